"""Projection store: CaseRun rows hold seqs; their events are read back from the ledger."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest

from ledger.errors import StoreError
from ledger.projstore import ProjectionStore, replay_ledger

CASES = [(c, "basic", "easy", "1") for c in ("a", "b", "c")]


def _ledger(hand_ledger):
    h = hand_ledger(CASES)
    h.run("r1", attempts=2)
    for case, *_ in CASES:
        h.scored("r1", case, 1, "100.00")
        h.scored("r1", case, 2, "50.00", correct=False)
    h.finish("r1")
    return h


def test_rows_are_the_seqs_of_each_caserun(hand_ledger, tmp_path: Path):
    h = _ledger(hand_ledger)
    full = replay_ledger(h.ledger)
    with ProjectionStore(tmp_path / "p.db") as store:
        store.rebuild(h.ledger)
    conn = sqlite3.connect(tmp_path / "p.db")
    rows = conn.execute("SELECT key, run_id, body FROM caseruns ORDER BY key").fetchall()
    conn.close()
    # 3 cases x 2 attempts; the kit writes 4 events per attempt
    assert len(rows) == 6
    for key, run_id, body in rows:
        assert run_id == "r1"
        seqs = msgspec.msgpack.decode(body)
        assert len(seqs) == 4
        assert seqs == [s.seq for s in full.caseruns[key].steps]


def test_a_fresh_handle_loads_with_the_ledger_it_is_given(hand_ledger, tmp_path: Path):
    h = _ledger(hand_ledger)
    with ProjectionStore(tmp_path / "p.db") as store:
        store.catch_up(h.ledger)
    with ProjectionStore(tmp_path / "p.db") as store:
        with pytest.raises(StoreError, match="no ledger"):
            store.load()
        assert store.load(ledger=h.ledger) == replay_ledger(h.ledger)
        assert store.load(["r1"], h.ledger).caseruns == replay_ledger(h.ledger).caseruns


def test_a_file_of_the_msgpack_layout_is_rebuilt(hand_ledger, tmp_path: Path):
    h = _ledger(hand_ledger)
    with ProjectionStore(tmp_path / "p.db") as store:
        store.catch_up(h.ledger)
    # what a store written before the seq layout looks like: no layout entry,
    # rows that are not seq lists
    conn = sqlite3.connect(tmp_path / "p.db")
    conn.execute("DELETE FROM meta WHERE key = 'caseruns'")
    conn.execute("UPDATE caseruns SET body = x'81a3737465709100'")
    conn.commit()
    conn.close()
    with ProjectionStore(tmp_path / "p.db") as store:
        store.catch_up(h.ledger)
        assert store.load() == replay_ledger(h.ledger)


def test_rows_naming_events_the_ledger_lacks_are_refused(hand_ledger, tmp_path: Path):
    h = _ledger(hand_ledger)
    with ProjectionStore(tmp_path / "p.db") as store:
        store.catch_up(h.ledger)
    conn = sqlite3.connect(tmp_path / "p.db")
    conn.execute("UPDATE caseruns SET body = ? WHERE key = ?", (msgspec.msgpack.encode([10**6]),
                 "r1\x1fa\x1f1"))  # fmt: skip
    conn.commit()
    conn.close()
    with (
        ProjectionStore(tmp_path / "p.db") as store,
        pytest.raises(StoreError, match="events the ledger does not hold"),
    ):
        store.load(ledger=h.ledger)
