"""Real processes: two writers make one chain; a SIGKILL mid-batch leaves no partial batch."""

from __future__ import annotations

import itertools
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from ledger_testkit import fixed_clock, operator, prompt
from writer_kit import spawn, start_together

from ledger.errors import ProofError
from ledger.events import RunFinished
from ledger.store import Draft, Ledger
from ledger.verify import verify_ledger


def test_two_processes_append_1000_each_into_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger.create(path, operator(), clock=fixed_clock).close()
    writers = [spawn(path, run, 1000, 10, busy_timeout_s=60) for run in ("run-a", "run-b")]
    start_together(writers)
    for w in writers:
        w.communicate(timeout=300)
        assert w.returncode == 0
    result = verify_ledger(path)
    assert result.size == 2001
    with Ledger.open(path, readonly=True) as ledger:
        for run in ("run-a", "run-b"):
            events = [row.event() for row in ledger.stream_events(run)]
            assert [e.stream_seq for e in events] == list(range(1000))
        # Interleaved: neither writer simply went first (both were running together).
        streams = [row.event().stream for row in ledger.iter_events(1)]
        switches = sum(1 for a, b in itertools.pairwise(streams) if a != b)
        assert switches >= 2


@pytest.mark.parametrize("delay", [0.02, 0.1, 0.2, 0.3])
@pytest.mark.no_cover  # see pyproject.toml: repeats covered paths
def test_sigkill_mid_batch_leaves_a_verifying_ledger_without_partial_batch(
    tmp_path: Path, delay: float
) -> None:
    path = tmp_path / "ledger.db"
    Ledger.create(path, operator(), clock=fixed_clock).close()
    batch = 5000
    writer = spawn(path, "run-k", 10 * batch, batch, busy_timeout_s=60)
    start_together([writer])
    assert writer.stdout is not None
    assert writer.stdout.readline().split() == ["committed", str(batch)]
    time.sleep(delay)  # inside the next batch: signing 5,000 events takes longer than this
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    result = verify_ledger(path)
    assert (result.size - 1) % batch == 0
    assert result.size >= 1 + batch
    # The lock died with the process: the next writer appends at once.
    with Ledger.open(path, busy_timeout_s=1) as ledger:
        assert ledger.append([], operator()) == []
        assert ledger.append([prompt("after", 0)], operator()) == [result.size]
    assert verify_ledger(path).size == result.size + 1


def test_a_checkpoint_committed_after_a_writer_read_the_head_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 34: a run's end commits its RunFinished and checkpoint between a second
    # writer's read of the head and that writer's check of the stored checkpoints, both
    # before the lock; the note then covers one event more than the head it read. It
    # was refused as a forgery (ProofError, exit 1); it is checked under the lock.
    path = tmp_path / "ledger.db"
    Ledger.create(path, operator(), clock=fixed_clock).close()
    with (
        Ledger.open(path, clock=fixed_clock) as second,
        Ledger.open(path, clock=fixed_clock) as first,
    ):
        assert second.append([prompt("writer-2", 0)], operator()) == [1]
        stale = second.head()
        first.append([Draft(RunFinished, "run-a", {"status": "completed"})], operator())
        assert [n for n, _ in first.stored_checkpoints()] == [3]
        real = second.head
        heads = iter([stale])
        monkeypatch.setattr(second, "head", lambda: next(heads, None) or real())
        assert second.append([prompt("writer-2", 1)], operator()) == [3]
    assert verify_ledger(path).size == 4


@pytest.mark.dishonest_ledger("a junk checkpoint row is stored on purpose")
def test_a_stored_checkpoint_over_more_events_than_the_log_is_still_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    Ledger.create(path, operator(), clock=fixed_clock).close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("INSERT INTO checkpoints VALUES (6, 'not a note')")
    finally:
        conn.close()
    with Ledger.open(path, clock=fixed_clock) as ledger, pytest.raises(ProofError) as refused:
        ledger.append([prompt("writer-2", 0)], operator())
    assert "the checkpoint stored at size 6 covers 6 events, but the log holds 1" in str(
        refused.value
    )
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.size() == 1  # nothing appended
