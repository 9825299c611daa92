"""Signers, key files and the keyring's validity windows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ledger_audit import TAMPERED
from ledger_testkit import (
    ADAPTER_SEED,
    OPERATOR_SEED,
    adapter,
    fixed_clock,
    operator,
    prompt,
    prompt_body,
    raw_append,
)

from ledger.errors import SignatureError, StoreError, UsageError
from ledger.keys import Keyring, Signer, load_default_signer
from ledger.store import Ledger
from ledger.verify import verify_ledger


def test_key_file_round_trip_with_mode_0600(tmp_path: Path) -> None:
    signer = Signer.from_seed("test-operator", OPERATOR_SEED)
    path = tmp_path / "keys" / "operator.key"
    signer.save(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    text = path.read_text()
    assert text.startswith("PRIVATE+KEY+test-operator+" + signer.key_id + "+")
    loaded = load_default_signer(tmp_path)
    assert (loaded.name, loaded.key_id, loaded.public_key) == (
        signer.name,
        signer.key_id,
        signer.public_key,
    )
    assert loaded.sign(b"x") == signer.sign(b"x")  # Ed25519 is deterministic
    with pytest.raises(UsageError, match="already exists"):
        signer.save(path)


def test_published_signer_key_loads_to_its_published_verifier_key(
    tmp_path: Path, vectors_dir: Path
) -> None:
    peter = json.loads((vectors_dir / "key_ids.json").read_text())["keypairs"][0]
    path = tmp_path / "peter.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, (peter["signer_key"] + "\n").encode())
    os.close(fd)
    signer = Signer.load(path)
    assert signer.verifier_key == peter["verifier_key"]
    assert signer.key_id == "c74f20a3"


def test_key_files_readable_by_others_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.key"
    Signer.from_seed("k", OPERATOR_SEED).save(path)
    path.chmod(0o644)
    with pytest.raises(StoreError, match="mode 0644"):
        Signer.load(path)
    path.chmod(0o600)
    path.write_text("PRIVATE+KEY+garbage\n")
    with pytest.raises(StoreError, match="is not a C2SP Ed25519 signer key") as info:
        Signer.load(path)
    assert "garbage" not in info.value.diagnostics()


def test_private_key_never_shows(tmp_path: Path) -> None:
    signer = Signer.from_seed("test-operator", OPERATOR_SEED)
    assert "PRIVATE" not in repr(signer)
    assert OPERATOR_SEED.hex() not in repr(signer)
    ledger = Ledger.create(tmp_path / "l.db", signer, clock=fixed_clock)
    ledger.close()
    data = (tmp_path / "l.db").read_bytes()
    secret = tmp_path / "secret.key"
    signer.save(secret)
    encoded = secret.read_text().strip().rsplit("+", 1)[1]
    assert OPERATOR_SEED not in data
    assert encoded.encode() not in data


def test_names_and_roles_are_checked() -> None:
    with pytest.raises(UsageError, match="bad signer name"):
        Signer.from_seed("two words", OPERATOR_SEED)
    with pytest.raises(UsageError, match="bad role"):
        Signer.from_seed("x", OPERATOR_SEED, role="boss")
    with pytest.raises(UsageError, match="32 bytes"):
        Signer.from_seed("x", b"short")


def test_genesis_rule() -> None:
    ring = Keyring()
    assert ring.signer_problem(0, "abcd0123") is not None
    assert "unregistered key id abcd0123" in (ring.signer_problem(5, "abcd0123") or "")


@TAMPERED
def test_retired_key_old_events_verify_new_ones_fail(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    op, ad = operator(), adapter()
    with Ledger.create(path, op, clock=fixed_clock) as ledger:
        ledger.register(ad, by=op)
        ledger.append([prompt("run-a", 0), prompt("run-a", 1)], ad)  # seq 2, 3
        ledger.retire("test-adapter", by=op)  # seq 4
    assert verify_ledger(path).signers == 2  # retired keys stay registered; old events verify
    seq = raw_append(path, prompt_body("run-a", 9), ADAPTER_SEED, "test-adapter")
    assert seq == 5
    with pytest.raises(
        SignatureError, match=r"^seq 5: signed by key test-adapter .* after it was retired at seq 4"
    ):
        verify_ledger(path)


@TAMPERED
def test_adapter_keys_cannot_register_signers(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    op, ad = operator(), adapter()
    with Ledger.create(path, op, clock=fixed_clock) as ledger:
        ledger.register(ad, by=op)
    from ledger_testkit import STRANGER_SEED, registration

    raw_append(path, registration("friend", STRANGER_SEED), ADAPTER_SEED, "test-adapter")
    with pytest.raises(SignatureError, match=r"^seq 2: signer events need an operator key"):
        verify_ledger(path)
