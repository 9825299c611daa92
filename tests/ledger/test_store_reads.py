"""The store's lean read (iter_bodies) against the full rows and an independent SQLite read."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from ledger_testkit import build_ledger

from ledger.store import Ledger


@pytest.fixture(scope="module")
def small_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reads") / "ledger.db"
    # genesis + adapter registration + 3 runs x 3000 prompts (crosses the
    # 4096-row fetch batches twice) + checkpoint + 3 RunFinished
    build_ledger(path, per_run=3000, runs=3)
    return path


def test_iter_bodies_is_seq_leaf_body_of_every_row(small_ledger: Path):
    with sqlite3.connect(small_ledger) as raw:
        expected = raw.execute("SELECT seq, leaf_hash, body FROM events ORDER BY seq").fetchall()
    assert len(expected) == 2 + 9000 + 1 + 3
    with Ledger.open(small_ledger, readonly=True) as ledger:
        got = list(ledger.iter_bodies())
    assert got == expected
    # the leaf hash column is the RFC 9162 leaf of the body it comes with
    assert all(leaf == hashlib.sha256(b"\x00" + body).digest() for _, leaf, body in got)


@pytest.mark.parametrize(
    ("start", "stop", "first", "count"),
    [
        (0, None, 0, 9006),
        (0, 1, 0, 1),
        (4095, 4098, 4095, 3),
        (9000, None, 9000, 6),
        (9006, None, None, 0),
        (5, 5, None, 0),
        (7, 3, None, 0),
        (20000, 30000, None, 0),
    ],
    ids=["all", "first", "across a fetch batch", "tail", "past the end", "empty", "reversed",
         "beyond"],
)  # fmt: skip
def test_iter_bodies_ranges(small_ledger: Path, start, stop, first, count):
    with Ledger.open(small_ledger, readonly=True) as ledger:
        rows = list(ledger.iter_bodies(start, stop))
        full = [(r.seq, r.leaf_hash, r.body) for r in ledger.iter_events(start, stop)]
    assert len(rows) == count
    assert rows == full
    if count:
        assert rows[0][0] == first
        assert [r[0] for r in rows] == list(range(first, first + count))
