"""A run on a long ledger reads its own stream and signs its checkpoint without reading the
log from seq 0 (issue 34), and stays as checked as the whole read was.

The tree heads here are recomputed by the test's own RFC 9162 definition over leaf
hashes it computes from the stored bodies (SHA-256(0x00 || body)), not by
``ledger.merkle``; the vectors of ``tests/ledger/test_merkle.py`` pin that definition.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runkit import cli, fresh_home

from ledger import events, stream_read, tree_index
from ledger.adapters import build_adapter
from ledger.app.evaluate import bank_context, default_run_id
from ledger.bank.registry import find_published
from ledger.errors import ChainBrokenError
from ledger.events import PromptSent, RunFinished
from ledger.keys import Signer, load_default_signer
from ledger.run.runner import RunPlan, run
from ledger.store import Draft, Ledger
from ledger.stores.sqlite import SqliteBackend

AT = "2026-12-02T10:00:00.000000Z"
FILLER = 1_200  # rows appended before the run (more than four index blocks of 256)


def clock() -> str:
    return AT


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.1, as written there: MTH of a list of leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def raw_leaves(path: Path) -> list[bytes]:
    """SHA-256(0x00 || body) of every stored body, in seq order."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        bodies = [bytes(r[0]) for r in conn.execute("SELECT body FROM events ORDER BY seq")]
    finally:
        conn.close()
    return [hashlib.sha256(b"\x00" + body).digest() for body in bodies]


def newest_checkpoint(path: Path) -> tuple[int, bytes]:
    """(size, root) the newest stored checkpoint note states (C2SP tlog-checkpoint body)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        size, note = conn.execute(
            "SELECT size, note FROM checkpoints ORDER BY size DESC"
        ).fetchone()
    finally:
        conn.close()
    lines = note.split("\n")
    assert int(lines[1]) == size
    return size, base64.b64decode(lines[2])


def tamper(path: Path, seq: int) -> None:
    """Change one byte of a stored body (the append-only triggers dropped first)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
        body = bytes(conn.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()[0])
        edited = body.replace(b'"attempt":1', b'"attempt":7', 1)
        assert edited != body
        conn.execute("UPDATE events SET body = ? WHERE seq = ?", (edited, seq))
    finally:
        conn.close()


def operator_signer() -> Signer:
    return Signer.from_seed("operator", bytes(range(32)), role="operator")


def filler_prompt(stream: str, i: int) -> Draft:
    fields = {
        "case_id": f"case-{i:05d}",
        "attempt": 1,
        "prompt": f"filler prompt {i} of {stream}",
        "prompt_sha256": "sha256:" + hashlib.sha256(f"{stream}/{i}".encode()).hexdigest(),
    }
    return Draft(PromptSent, stream, fields)


def fill(home: Path, rows: int) -> None:
    """``rows`` PromptSent events on a few filler streams, then a RunFinished (whose
    batch stores a checkpoint, so the index covers them)."""
    signer = load_default_signer(home)
    with Ledger.open(home / "ledger.db") as ledger:
        for start in range(0, rows, 400):
            batch = [
                filler_prompt(f"filler-{i % 3}", i) for i in range(start, min(rows, start + 400))
            ]
            ledger.append(batch, signer)
        ledger.append([Draft(RunFinished, "filler-0", {"status": "completed"})], signer)


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    home = fresh_home(tmp_path_factory, tmp_path)
    fill(home, FILLER)
    return home


Read = tuple[int, int | None, bool]  # (start, stop, under the write lock)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Read]:
    """Every ranged read of the events table, and whether the write lock was held."""
    seen: list[Read] = []
    select = SqliteBackend.select

    def recorded(
        self: SqliteBackend, columns: str, start: int, stop: int | None, fetch: int
    ) -> Iterator[tuple[Any, ...]]:
        seen.append((start, stop, self.conn.in_transaction))
        return select(self, columns, start, stop, fetch)

    monkeypatch.setattr(SqliteBackend, "select", recorded)
    return seen


def run_once(home: Path, run_id: str) -> None:
    """One reference run of the retail bank (18 attempts) by a fresh writer, as a new
    ``caseledger run`` process is: its Ledger object has no tree of its own."""
    path = home / "ledger.db"
    with Ledger.open(path) as ledger:
        published = find_published(ledger, home, "retail")
        ctx = bank_context(published, path, home)
        adapter = build_adapter("reference", {}, cases=ctx.reference_sql)
        try:
            plan = RunPlan(run_id=run_id, profile="test", attempts=1)
            run(ledger, load_default_signer(home), ctx, adapter, plan, clock=clock)
        finally:
            adapter.close()


def long_reads(reads: list[Read], below: int) -> list[Read]:
    """Reads of more than one row that start below seq ``below``."""
    return [r for r in reads if r[0] < below and (r[1] is None or r[1] - r[0] > 1)]


def test_a_run_on_a_long_ledger_signs_the_head_verify_computes_and_never_reads_from_seq_0(
    home: Path, reads: list[Read]
) -> None:
    path = home / "ledger.db"
    with Ledger.open(path, readonly=True) as ledger:
        index = tree_index.open_index(ledger)  # the index as a reader left it
        assert index is not None
        before = index.size
    assert before == len(raw_leaves(path)) > FILLER
    reads.clear()
    run_once(home, "long-1")
    # Nothing read more than one row below the checkpoint the index stood at: not at
    # the start, not at the end, and under the write lock not even one row past it.
    assert long_reads(reads, before) == []
    locked = [r for r in reads if r[2]]
    assert locked
    assert all(r[0] >= before or r[1] == r[0] + 1 for r in locked)
    # The checkpoint the run signed covers every row, and its root is the tree head
    # of all the stored bodies, as verify computes it from seq 0.
    leaves = raw_leaves(path)
    size, root = newest_checkpoint(path)
    assert size == len(leaves) > before
    assert root == mth(leaves)
    done = cli(home, "verify")
    assert done.returncode == 0, done.stderr
    assert f"verified: {size} events" in done.stdout


def _expect_seq(call: Callable[[], object], seq: int) -> None:
    with pytest.raises(ChainBrokenError) as caught:
        call()
    assert caught.value.seq == seq
    assert f"seq {seq}" in str(caught.value)


@pytest.mark.dishonest_ledger("a stored body is edited on purpose")
def test_a_tampered_row_of_the_runs_own_stream_under_the_checkpoint_is_caught(
    home: Path,
) -> None:
    run_once(home, "long-1")
    path = home / "ledger.db"
    with Ledger.open(path) as ledger:
        rows = stream_read.stream_events(ledger, "long-1")
        assert [r.event().stream_seq for r in rows] == list(range(len(rows)))
        assert isinstance(rows[-1].event(), events.RunFinished)
        # The run's PromptSent events: under the newest checkpoint, covered by the index.
        sent = [r.seq for r in rows if isinstance(r.event(), events.PromptSent)]
    tamper(path, sent[3])
    with Ledger.open(path) as ledger:
        _expect_seq(lambda: stream_read.stream_events(ledger, "long-1"), sent[3])
    # A run that starts now on this ledger is refused before its first model call.
    done = cli(home, "run", "--bank", "retail", "--adapter", "reference", "--attempts", "1",
               "--run-id", "long-2", "--no-variants")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"seq {sent[3]}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.dishonest_ledger("a stored body is edited on purpose")
def test_a_tampered_row_after_the_newest_checkpoint_is_caught(home: Path) -> None:
    path = home / "ledger.db"
    signer = load_default_signer(home)
    fields = {"case_id": "c", "attempt": 1, "prompt": "p", "prompt_sha256": "sha256:" + "0" * 64}
    with Ledger.open(path) as ledger:
        seqs = [ledger.append([Draft(PromptSent, "open-run", {**fields, "case_id": c})], signer)[0]
                for c in "abc"]  # fmt: skip
    assert newest_checkpoint(path)[0] <= seqs[0]
    tamper(path, seqs[1])
    with Ledger.open(path) as ledger:
        _expect_seq(lambda: stream_read.stream_events(ledger, "open-run"), seqs[1])
        # a stream the tampered row does not belong to: the rows after the checkpoint are
        # read in full all the same
        _expect_seq(lambda: stream_read.stream_events(ledger, "filler-1"), seqs[1])


def test_a_deleted_index_is_rebuilt_outside_the_lock(home: Path, reads: list[Read]) -> None:
    path = home / "ledger.db"
    run_once(home, "long-1")
    index_file = path.with_name("ledger.index.db")
    assert index_file.exists()
    before = newest_checkpoint(path)[0]
    index_file.unlink()
    reads.clear()
    run_once(home, "long-2")
    assert index_file.exists()
    # The rebuild read from seq 0, never under the write lock.
    assert long_reads(reads, before)
    assert all(not r[2] for r in long_reads(reads, before))
    leaves = raw_leaves(path)
    assert newest_checkpoint(path) == (len(leaves), mth(leaves))


def test_a_ledger_copied_back_to_an_older_size_never_trusts_the_newer_index(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / "ledger.db"
    with Ledger.open(path, readonly=True) as ledger:
        assert tree_index.open_index(ledger) is not None
    older = tmp_path / "older.db"
    shutil.copyfile(path, older)  # no -wal: every writer above closed its connection
    run_once(home, "long-1")
    run_once(home, "long-2")  # its start extended the index over long-1
    with Ledger.open(path, readonly=True) as ledger:
        newer = tree_index.open_index(ledger)
        assert newer is not None
        grown = newer.size
    shutil.copyfile(older, path)
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.size() < grown
    capsys.readouterr()
    run_once(home, "long-1")  # the id is free again in the older ledger
    assert "did not match the ledger's signed checkpoints" in capsys.readouterr().err
    leaves = raw_leaves(path)
    assert newest_checkpoint(path) == (len(leaves), mth(leaves))
    with Ledger.open(path, readonly=True) as ledger:
        again = tree_index.open_index(ledger)
        assert again is not None
        assert again.size == len(leaves)
        assert again.root == mth(leaves)
    assert cli(home, "verify").returncode == 0


def test_an_edited_index_block_is_not_trusted(home: Path, reads: list[Read]) -> None:
    path = home / "ledger.db"
    with Ledger.open(path, readonly=True) as ledger:
        assert tree_index.open_index(ledger) is not None
    conn = sqlite3.connect(path.with_name("ledger.index.db"), isolation_level=None)
    try:
        conn.execute("UPDATE blocks SET node = ? WHERE block = 1", (bytes(32),))
    finally:
        conn.close()
    run_once(home, "long-1")
    leaves = raw_leaves(path)
    assert newest_checkpoint(path) == (len(leaves), mth(leaves))
    assert all(r[0] > 0 or r[1] == 1 for r in reads if r[2])


def test_the_default_run_id_counts_the_streams_through_the_index(
    home: Path, reads: list[Read]
) -> None:
    path = home / "ledger.db"
    with Ledger.open(path, readonly=True) as ledger:
        index = tree_index.open_index(ledger)
        assert index is not None
        before = index.size
    # After the index: two rows of a new stream, one of an indexed one.
    signer = load_default_signer(home)
    fields = {"case_id": "c", "attempt": 1, "prompt": "p", "prompt_sha256": "sha256:" + "0" * 64}
    with Ledger.open(path) as ledger:
        for stream, case in (("reference-0005", "a"), ("filler-1", "b"), ("reference-0005", "c")):
            ledger.append([Draft(PromptSent, stream, {**fields, "case_id": case})], signer)
    reads.clear()
    with Ledger.open(path) as ledger:
        # ledger, filler-0..2 and reference-0005: five streams; reference-0005 is
        # taken, so the next free number is 6
        assert default_run_id(ledger, "reference") == "reference-0006"
    assert long_reads(reads, before) == []


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.integers(min_value=1, max_value=700),
    between=st.integers(min_value=0, max_value=300),
    batch=st.integers(min_value=1, max_value=300),
)
def test_a_fresh_writer_signs_the_head_of_every_row_whatever_the_sizes(
    tmp_path_factory: pytest.TempPathFactory,
    reads: list[Read],
    before: int,
    between: int,
    batch: int,
) -> None:
    # A checkpoint after ``before`` rows (any offset in a block of 256), ``between`` rows
    # nobody checkpointed, then a fresh writer reads a stream through the index (taking
    # its tree) and appends ``batch`` rows ending in a RunFinished: the checkpoint it
    # signs must be the head of all the rows, by the test's own MTH.
    signer = operator_signer()
    path = tmp_path_factory.mktemp("sizes") / "ledger.db"
    Ledger.create(path, signer, clock=clock).close()
    with Ledger.open(path, clock=clock) as first:
        first.append([filler_prompt("a", i) for i in range(before - 1)], signer)
        first.append([Draft(RunFinished, "a", {"status": "completed"})], signer)
        if between:
            first.append([filler_prompt("b", i) for i in range(between)], signer)
    assert newest_checkpoint(path)[0] == before + 1
    reads.clear()
    with Ledger.open(path, clock=clock) as fresh:
        assert len(stream_read.stream_events(fresh, "a")) == before
        drafts = [filler_prompt("c", i) for i in range(batch - 1)]
        fresh.append([*drafts, Draft(RunFinished, "c", {"status": "completed"})], signer)
    # under the lock, nothing below the checkpoint was read but single rows
    assert all(r[0] > before or r[1] == r[0] + 1 for r in reads if r[2])
    leaves = raw_leaves(path)
    assert len(leaves) == 1 + before + between + batch
    assert newest_checkpoint(path) == (len(leaves), mth(leaves))
