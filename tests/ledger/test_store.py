"""The SQLite store: row formulas, stream chains, idempotence, optimistic appends, locking."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from ledger_testkit import OPERATOR_SEED, adapter, fixed_clock, operator, prompt

from ledger import codec
from ledger.errors import StoreBusyError, StoreConflictError, StoreError, UsageError
from ledger.events import PromptSent, RunFinished, SignerRegistered
from ledger.keys import Signer
from ledger.store import Draft, Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger.create(tmp_path / "ledger.db", operator(), clock=fixed_clock)
    yield led
    led.close()


def test_genesis_row_follows_the_design_formulas(ledger: Ledger) -> None:
    row = ledger.get(0)
    assert row is not None
    assert ledger.size() == 1
    assert row.leaf_hash == hashlib.sha256(b"\x00" + row.body).digest()
    assert row.chain == hashlib.sha256(bytes(32) + row.leaf_hash).digest()
    op = operator()
    # Rule event/v2: the previous chain (32 zero bytes before seq 0), then the leaf.
    Ed25519PublicKey.from_public_bytes(op.public_key).verify(
        row.sig, b"caseledger/event/v2\n" + bytes(32) + row.leaf_hash
    )
    event = row.event()
    assert isinstance(event, SignerRegistered)
    assert (event.stream, event.stream_seq, event.stream_prev) == ("ledger", 0, None)
    assert (event.name, event.role, event.key_id) == ("test-operator", "operator", op.key_id)
    assert event.at == event.valid_from == "2026-12-02T10:00:00.000000Z"
    assert ledger.origin() == "caseledger/" + row.leaf_hash.hex()[:16]


def test_sqlite_settings_and_schema(ledger: Ledger, tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "ledger.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert triggers == {
        "events_refuse_update",
        "events_refuse_delete",
        "checkpoints_refuse_update",
        "checkpoints_refuse_delete",
    }
    conn.close()
    assert ledger._db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # type: ignore[attr-defined]  # FULL


def test_drafts_get_stream_envelopes_and_chains(ledger: Ledger) -> None:
    seqs = ledger.append([prompt("run-a", 0), prompt("run-b", 0), prompt("run-a", 1)], operator())
    assert seqs == [1, 2, 3]
    a0, b0, a1 = (ledger.get(s).event() for s in seqs)  # type: ignore[union-attr]
    assert (a0.stream_seq, a0.stream_prev) == (0, None)
    assert (b0.stream_seq, b0.stream_prev) == (0, None)
    assert a1.stream_seq == 1
    assert a1.stream_prev == "sha256:" + ledger.get(1).leaf_hash.hex()  # type: ignore[union-attr]
    # The chain continues across batches: recompute it by hand.
    chain = bytes(32)
    for row in ledger.iter_events():
        chain = hashlib.sha256(chain + row.leaf_hash).digest()
        assert row.chain == chain
    assert [r.seq for r in ledger.stream_events("run-a")] == [1, 3]
    assert [r.seq for r in ledger.events_of_type(PromptSent)] == [1, 2, 3]
    assert ledger.streams() == ["ledger", "run-a", "run-b"]


def test_same_event_twice_is_stored_once(ledger: Ledger) -> None:
    (seq,) = ledger.append([prompt("run-a", 0)], operator())
    event = ledger.get(seq).event()  # type: ignore[union-attr]
    assert ledger.append([event], operator()) == [seq]
    assert ledger.append([event, event], adapter_registered(ledger)) == [seq, seq]
    assert ledger.size() == 3  # genesis, the prompt, the adapter's registration


def adapter_registered(ledger: Ledger) -> Signer:
    ad = adapter()
    ledger.register(ad, by=operator())
    return ad


def test_duplicate_inside_one_batch_is_written_once(ledger: Ledger) -> None:
    body = ledger.get(0).event()  # type: ignore[union-attr]
    other = PromptSent(
        stream="imp", stream_seq=0, stream_prev=None, at=fixed_clock(),
        case_id="c", attempt=1, prompt="p", prompt_sha256="sha256:00",
    )  # fmt: skip
    assert ledger.append([other, other, body], operator()) == [1, 1, 0]
    assert ledger.size() == 2


def test_import_that_expects_an_old_size_writes_nothing(ledger: Ledger) -> None:
    ledger.append([prompt("run-a", 0)], operator())
    with pytest.raises(StoreConflictError, match="expected tree size 1, found 2"):
        ledger.append([prompt("run-b", 0)], operator(), expect_size=1)
    assert ledger.size() == 2
    assert ledger.append([prompt("run-b", 0)], operator(), expect_size=2) == [2]


def test_complete_event_must_continue_its_stream(ledger: Ledger) -> None:
    stray = PromptSent(
        stream="imp", stream_seq=3, stream_prev=None, at=fixed_clock(),
        case_id="c", attempt=1, prompt="p", prompt_sha256="sha256:00",
    )  # fmt: skip
    with pytest.raises(StoreConflictError, match="stream imp: event has stream_seq 3"):
        ledger.append([prompt("run-a", 0), stray], operator())
    assert ledger.size() == 1  # the whole batch was rolled back


def test_unregistered_and_retired_signers_are_refused(ledger: Ledger) -> None:
    stranger = Signer.from_seed("stranger", bytes(32))
    with pytest.raises(UsageError, match="seq 1: signed by unregistered key id"):
        ledger.append([prompt("run-a", 0)], stranger)
    ad = adapter_registered(ledger)
    ledger.append([prompt("run-a", 0)], ad)
    with pytest.raises(UsageError, match="signer events need an operator key"):
        ledger.retire("test-adapter", by=ad)
    ledger.retire("test-adapter", by=operator(), reason="rotated")
    with pytest.raises(UsageError, match="after it was retired at seq 3"):
        ledger.append([prompt("run-a", 1)], ad)
    entry = ledger.keyring().by_name("test-adapter")
    assert entry is not None
    assert entry.retired_seq == 3
    assert entry.reason == "rotated"


def test_reregistering_a_name_under_another_key_is_refused(ledger: Ledger) -> None:
    adapter_registered(ledger)
    impostor = Signer.from_seed("test-adapter", bytes(32), role="adapter")
    with pytest.raises(UsageError, match="signer name test-adapter is already registered"):
        ledger.register(impostor, by=operator())
    with pytest.raises(UsageError, match="would leave no active operator"):
        ledger.retire("test-operator", by=operator())


def test_bad_drafts_are_refused(ledger: Ledger) -> None:
    with pytest.raises(UsageError, match="must not set stream_seq"):
        ledger.append([Draft(RunFinished, "r", {"status": "x", "stream_seq": 4})], operator())
    with pytest.raises(UsageError, match="does not match its declared shape"):
        ledger.append([Draft(RunFinished, "r", {"status": 7})], operator())
    with pytest.raises(UsageError, match="bad RunFinished draft"):
        ledger.append([Draft(RunFinished, "r", {"nope": 1})], operator())
    assert ledger.size() == 1


def test_refused_batch_leaves_the_keyring_usable(ledger: Ledger) -> None:
    ad = adapter()
    with pytest.raises(UsageError):
        ledger.append([Draft(RunFinished, "r", {"status": 7})], operator())
    ledger.register(ad, by=operator())
    assert [e.name for e in ledger.keyring().entries()] == ["test-operator", "test-adapter"]


def test_create_refuses_an_existing_file_and_open_refuses_strangers(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger.create(path, operator()).close()
    with pytest.raises(StoreError, match="already exists"):
        Ledger.create(path, operator())
    with pytest.raises(StoreError, match="no ledger at"):
        Ledger.open(tmp_path / "missing.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"junk\.db: file is not a database"):
        Ledger.open(junk)
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StoreError, match=r"plain\.db is not a caseledger ledger"):
        Ledger.open(plain)
    with pytest.raises(UsageError, match="must be an operator"):
        Ledger.create(tmp_path / "x.db", adapter())


def test_second_writer_waits_then_fails_busy(ledger: Ledger, tmp_path: Path) -> None:
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    other = Ledger.open(tmp_path / "ledger.db", busy_timeout_s=0.2)
    with pytest.raises(StoreBusyError, match=r"^ledger is busy"):
        other.append([prompt("run-a", 0)], operator())
    holder.execute("ROLLBACK")
    assert other.append([prompt("run-a", 0)], operator()) == [1]
    other.close()
    holder.close()


def test_readonly_open_cannot_write(ledger: Ledger, tmp_path: Path) -> None:
    reader = Ledger.open(tmp_path / "ledger.db", readonly=True)
    assert reader.size() == 1
    with pytest.raises(StoreError):
        reader.append([prompt("run-a", 0)], operator())
    reader.close()


def test_bodies_are_the_canonical_bytes(ledger: Ledger) -> None:
    (seq,) = ledger.append([prompt("run-a", 7)], operator())
    row = ledger.get(seq)
    assert row is not None
    assert row.body == codec.encode(row.event())
    assert row.body.startswith(b'{"at":"2026-12-02T10:00:00.000000Z","attempt":1,"case_id":')


@pytest.mark.parametrize("cores", [1, 2, 8])
@pytest.mark.parametrize("count", [1, 31, 32, 127, 128, 129, 300])
def test_a_batch_signed_on_threads_carries_each_rows_own_signature(
    ledger: Ledger, count: int, cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1 core: signed on this thread; 2: the whole batch signed on two threads, then
    # inserted; 8: on four threads, and a batch of more than 128 rows inserted a chunk
    # at a time by a helper thread (it has a core of its own) while the next chunk is
    # signed (Ledger._write). The rows must be the same: Ed25519 is deterministic, so
    # each signature is compared byte for byte with one made here from the seed.
    monkeypatch.setattr("ledger.store.os.cpu_count", lambda: cores)
    key = Ed25519PrivateKey.from_private_bytes(OPERATOR_SEED)
    # Batches of 32 rows or more are signed on one thread per core (Ledger._sign_all);
    # every row must still carry the signature of its own message, in order: checked
    # here from the design's formula (event/v2: previous chain, then the leaf), not
    # from the store's code.
    ledger.append([prompt("r", i) for i in range(count)], operator())
    public = Ed25519PublicKey.from_public_bytes(operator().public_key)
    prev = ledger.get(0)
    assert prev is not None
    for seq in range(1, count + 1):
        row = ledger.get(seq)
        assert row is not None
        assert row.chain == hashlib.sha256(prev.chain + row.leaf_hash).digest()
        public.verify(row.sig, b"caseledger/event/v2\n" + prev.chain + row.leaf_hash)
        assert row.sig == key.sign(b"caseledger/event/v2\n" + prev.chain + row.leaf_hash)
        prev = row
    assert ledger.size() == count + 1
    assert (ledger._inserter is not None) == (cores == 8 and count > 128)
