"""Large batches: signing and inserting overlap, with the same rows and the same refusals."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from ledger_testkit import fixed_clock, operator, prompt

from ledger.errors import UsageError
from ledger.events import LEDGER_STREAM, PromptSent, SignerRetired
from ledger.store import Draft, Ledger, link_of
from ledger.verify import verify_ledger


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT * FROM events ORDER BY seq").fetchall()


def test_one_large_batch_stores_what_small_batches_store(tmp_path: Path):
    drafts = [prompt(f"run-{i % 3}", i) for i in range(1000)]
    big, small = tmp_path / "big.db", tmp_path / "small.db"
    with Ledger.create(big, operator(), clock=fixed_clock) as ledger:
        assert ledger.append(drafts, operator()) == list(range(1, 1001))
    with Ledger.create(small, operator(), clock=fixed_clock) as ledger:
        for i in range(0, 1000, 10):
            ledger.append(drafts[i : i + 10], operator())
    # every column of every row, signatures included (Ed25519 is deterministic)
    assert _rows(big) == _rows(small)
    assert len(_rows(big)) == 1001
    assert verify_ledger(big).size == 1001


def test_refusal_late_in_a_large_batch_writes_nothing(tmp_path: Path):
    path = tmp_path / "ledger.db"
    op = operator()
    with Ledger.create(path, op, clock=fixed_clock) as ledger:
        entry = ledger.keyring().get(op.key_id)
        assert entry is not None
        retire = Draft(
            SignerRetired,
            LEDGER_STREAM,
            {"key_id": op.key_id, "name": op.name, "retired_at": fixed_clock(), "reason": "t"},
        )
        # seq 1..300 prompts, seq 301 retires the signing key, seq 302 is signed after it
        batch = [prompt("run-a", i) for i in range(300)] + [retire]
        batch += [prompt("run-a", i) for i in range(300, 600)]
        with pytest.raises(UsageError, match=r"seq 302: signed by key test-operator .* seq 301"):
            ledger.append(batch, op)
        assert ledger.size() == 1
        # the ledger is still usable and the stream starts where it did
        assert ledger.append([prompt("run-a", 0)], op) == [1]
    assert len(_rows(path)) == 2
    assert verify_ledger(path).size == 2


def test_a_stream_event_is_encoded_once_on_its_way_into_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: the stream encodes each event it makes (the link of the next one); the
    store appends those very bytes instead of encoding the event a second time. The
    stored bodies are still the canonical bytes of the events, and the chain holds."""
    from ledger import codec
    from ledger.harness.attempt import Stream

    op = operator()
    ledger = Ledger.create(tmp_path / "l.db", op, clock=fixed_clock)
    stream = Stream("run-enc", fixed_clock, None)
    batch = [
        stream.make(
            PromptSent,
            case_id=f"c{i}",
            attempt=1,
            prompt=f"question {i}",
            prompt_sha256="sha256:" + "0" * 64,
        )[0]
        for i in range(5)
    ]
    calls = []
    real = codec.canonical_json
    monkeypatch.setattr(codec, "canonical_json", lambda v: calls.append(v) or real(v))
    seqs = ledger.append(batch, op)
    assert calls == []  # all five bodies were the kept ones
    stored = [ledger.get(s) for s in seqs]
    assert [s.body for s in stored if s] == [real(e) for e in batch]
    assert [link_of(s.leaf_hash) for s in stored[:-1] if s] == [e.stream_prev for e in batch[1:]]
    ledger.close()
    assert verify_ledger(tmp_path / "l.db").size == 1 + 5
