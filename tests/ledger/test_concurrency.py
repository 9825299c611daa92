"""Real processes: two writers make one chain; a SIGKILL mid-batch leaves no partial batch."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

import pytest
from ledger_testkit import fixed_clock, operator, prompt
from writer_kit import spawn, start_together

from ledger.store import Ledger
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
