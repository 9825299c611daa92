"""Helpers for ledger tests: fixed keys and clock, a ledger builder, raw SQL tampering.

Raw rows are built here with hashlib and cryptography directly (not with the
store), so tests that force rows in check the store's and verifier's rules
against an independent construction of DESIGN.md's formulas.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.events import PromptSent, RunFinished
from ledger.keys import Signer
from ledger.proofs import issue_checkpoint
from ledger.store import Draft, Ledger

OPERATOR_SEED = bytes(range(32))
ADAPTER_SEED = bytes(range(100, 132))
STRANGER_SEED = bytes(range(200, 232))


def fixed_clock() -> str:
    """Every event claims the same time: bytes depend on content only."""
    return "2026-12-02T10:00:00.000000Z"


def operator() -> Signer:
    return Signer.from_seed("test-operator", OPERATOR_SEED, role="operator")


def adapter() -> Signer:
    return Signer.from_seed("test-adapter", ADAPTER_SEED, role="adapter")


def prompt(run: str, i: int) -> Draft:
    fields = {
        "case_id": f"case-{i:04d}",
        "attempt": 1,
        "prompt": f"question {i} of {run}: how many orders?",
        "prompt_sha256": "sha256:" + hashlib.sha256(f"{run}/{i}".encode()).hexdigest(),
    }
    return Draft(PromptSent, run, fields)


def build_ledger(path: Path, per_run: int = 340, runs: int = 3) -> dict[str, int]:
    """Operator genesis, an adapter key, ``runs`` runs of ``per_run`` prompts (alternating
    signers), a checkpoint in the middle and a RunFinished per run.

    Returns landmarks: the seq of the in-log checkpoint and the final size.
    """
    op, ad = operator(), adapter()
    ledger = Ledger.create(path, op, clock=fixed_clock)
    ledger.register(ad, by=op)
    names = [f"run-{r}" for r in range(runs)]
    marks: dict[str, int] = {}
    for i in range(per_run):
        batch = [prompt(run, i) for run in names]
        ledger.append(batch, ad if i % 2 else op)
        if i == per_run // 2:
            issue_checkpoint(ledger, op)
            marks["checkpoint_seq"] = ledger.size() - 1
    ledger.append([Draft(RunFinished, run, {"status": "completed"}) for run in names], ad)
    marks["size"] = ledger.size()
    ledger.close()
    return marks


def copy_ledger(src: Path, dst: Path) -> Path:
    """Copy a closed ledger file (its WAL was checkpointed on close)."""
    shutil.copyfile(src, dst)
    return dst


def raw(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with the append-only triggers dropped."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
    conn.execute("DROP TRIGGER IF EXISTS events_refuse_delete")
    return conn


def c2sp_key_id(name: str, public_key: bytes) -> str:
    """SHA-256(name || 0x0A || 0x01 || key)[:4] in hex, written out from the C2SP spec."""
    return hashlib.sha256(name.encode() + b"\n\x01" + public_key).digest()[:4].hex()


def raw_append(path: Path, event: dict[str, object], seed: bytes, name: str) -> int:
    """Force a row in with plain SQL: correct leaf hash, chain and signature by ``seed``.

    ``event`` lacks the stream envelope; it is continued from the stream head.
    """
    key = Ed25519PrivateKey.from_private_bytes(seed)
    pub = key.public_key().public_bytes_raw()
    conn = raw(path)
    seq, chain = conn.execute("SELECT seq, chain FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    stream = str(event["stream"])
    head = conn.execute(
        "SELECT stream_seq, leaf_hash FROM events WHERE stream = ? ORDER BY seq DESC LIMIT 1",
        (stream,),
    ).fetchone()
    body_dict = dict(event)
    body_dict["stream_seq"] = 0 if head is None else head[0] + 1
    body_dict["stream_prev"] = None if head is None else "sha256:" + head[1].hex()
    body = json.dumps(body_dict, sort_keys=True, separators=(",", ":")).encode()
    leaf = hashlib.sha256(b"\x00" + body).digest()
    new_chain = hashlib.sha256(chain + leaf).digest()
    sig = key.sign(b"caseledger/event/v2\n" + chain + leaf)
    conn.execute(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            seq + 1,
            body,
            leaf,
            new_chain,
            c2sp_key_id(name, pub),
            sig,
            stream,
            body_dict["stream_seq"],
            body_dict["type"],
        ),
    )
    conn.close()
    return seq + 1


def registration(name: str, seed: bytes, role: str = "adapter") -> dict[str, object]:
    """A SignerRegistered body (without envelope) for the key made from ``seed``."""
    pub = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    return {
        "type": "signer.registered.v1",
        "stream": "ledger",
        "at": fixed_clock(),
        "key_id": c2sp_key_id(name, pub),
        "public_key": base64.b64encode(pub).decode(),
        "name": name,
        "role": role,
        "valid_from": fixed_clock(),
    }


def prompt_body(run: str, i: int) -> dict[str, object]:
    """A PromptSent body (without envelope)."""
    return {
        "type": "prompt.sent.v1",
        "stream": run,
        "at": fixed_clock(),
        "case_id": f"forced-{i}",
        "attempt": 1,
        "prompt": "forced in",
        "prompt_sha256": "sha256:" + "0" * 64,
    }
