"""The test cluster never outlives its test process: a process killed outright
(SIGKILL: no fixture teardown, no atexit) still has its server stopped and its
folder removed, by the cluster's watchdog (tests/pgcluster.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import REPO

HOLDER = """
import sys, time
from pgcluster import PgCluster
cluster = PgCluster.start()
print(cluster.root, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waiting to be reaped is not running
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_a_killed_test_process_leaves_no_server_running() -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
    )
    try:
        assert holder.stdout is not None
        root = Path(holder.stdout.readline().strip())
        postmaster = int((root / "data" / "postmaster.pid").read_text().splitlines()[0])
        assert _alive(postmaster)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        end = time.monotonic() + 60
        while (_alive(postmaster) or root.exists()) and time.monotonic() < end:
            time.sleep(0.1)
        assert not _alive(postmaster), "the server outlived its killed test process"
        assert not root.exists(), f"{root} was left behind"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
