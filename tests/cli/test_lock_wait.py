"""Writers wait for the write lock up to CASELEDGER_LOCK_WAIT and name who holds it (issue 34).

A real second process (a plain Python script with its own sqlite3 connection) takes the
ledger file's write lock with BEGIN IMMEDIATE and keeps it; ``caseledger checkpoint``
(a command that appends one event) is the writer. No time is asserted: the holder
says when it has the lock and the writer is started only then, so a writer that exits
0 waited for the lock and appended after it was released.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.events import CheckpointIssued
from ledger.store import Ledger

CASELEDGER = str(Path(sys.executable).parent / "caseledger")
LEDGER = ".caseledger/ledger.db"

HOLD = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("ROLLBACK")
print("released", flush=True)
"""


def _caseledger(cwd: Path, *args: str, wait: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CASELEDGER_LEDGER", None)
    env.pop("CASELEDGER_LOCK_WAIT", None)
    if wait is not None:
        env["CASELEDGER_LOCK_WAIT"] = wait
    return subprocess.run(
        [CASELEDGER, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    assert _caseledger(tmp_path, "init").returncode == 0
    (tmp_path / "hold.py").write_text(HOLD)
    return tmp_path


def _hold(folder: Path, seconds: str) -> subprocess.Popen[str]:
    """Start the holder (relative arguments: its command line is short and known)."""
    holder = subprocess.Popen(
        [sys.executable, "hold.py", LEDGER, seconds], cwd=folder, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "locked\n"
    return holder


def _checkpoints(folder: Path) -> int:
    with Ledger.open(folder / LEDGER, readonly=True) as ledger:
        return sum(1 for _ in ledger.events_of_type(CheckpointIssued))


def test_a_writer_waits_for_a_lock_held_less_than_the_limit(folder: Path) -> None:
    holder = _hold(folder, "1.5")
    try:
        done = _caseledger(folder, "checkpoint", "-o", "note.txt", wait="120")
        assert holder.wait(timeout=60) == 0
    finally:
        holder.kill()
    assert done.returncode == 0, done.stderr
    assert "ledger is busy" not in done.stderr
    assert _checkpoints(folder) == 1  # the writer's event was appended after the release


def test_a_writer_refused_after_the_limit_names_the_holder(folder: Path) -> None:
    holder = _hold(folder, "120")
    try:
        done = _caseledger(folder, "checkpoint", "-o", "note.txt", wait="0.5")
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: ledger is busy: process {holder.pid} ({sys.executable} hold.py {LEDGER} 120) "
        f"has held the write lock on {LEDGER} for more than 0.5 s",
        "  hint: wait for that process to finish, then retry "
        "(CASELEDGER_LOCK_WAIT=SECONDS waits longer: docs/stores.md)",
    ]
    assert _checkpoints(folder) == 0  # nothing appended, nothing lost


@pytest.mark.parametrize("wait", ["abc", "-1", "nan", "86401"], ids=["text", "neg", "nan", "day+1"])
def test_a_lock_wait_that_is_no_number_of_seconds_is_a_usage_error(folder: Path, wait: str) -> None:
    done = _caseledger(folder, "checkpoint", "-o", "note.txt", wait=wait)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: CASELEDGER_LOCK_WAIT={wait!r} is not a number of seconds from 0 to 86400",
        "  hint: set it to how long a writer may wait for the write lock, e.g. 60, or unset it",
    ]
    assert _checkpoints(folder) == 0
