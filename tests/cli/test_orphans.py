"""No orphans (issue 13 section 5): a SIGKILLed harness leaves no model or worker process.

Real processes throughout: the ``caseledger`` console script runs a real
``--adapter command`` model (a Python script that starts a grandchild and
sleeps), the test SIGKILLs the harness, then polls /proc until every process
carrying the test's tag is gone (deadline, never a wall-time assertion).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.adapters.command import sweep_stale_children

CLI = str(Path(sys.executable).with_name("caseledger"))
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SLEEPER = """\
import subprocess, sys, time
sys.stdin.read()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as fh:
    fh.write(f"{child.pid}\\n")
time.sleep(600)
"""


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields


def _tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes whose environment holds ORPHAN_TEST_TAG=tag."""
    found = []
    needle = f"ORPHAN_TEST_TAG={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and _stat(int(entry.name)) is not None:
            found.append(int(entry.name))
    return found


def _wait_until(check, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return bool(check())


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with the sales-fixture bank published (built once for this module)."""
    folder = tmp_path_factory.mktemp("orphans")
    ledger = folder / "ledger.db"
    for args in (["init"], ["bank", "publish", "sales-fixture"]):
        done = subprocess.run(
            [CLI, "--ledger", str(ledger), *args], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    return folder


def test_sigkill_of_the_harness_leaves_no_process_behind(home: Path, tmp_path: Path) -> None:
    tag = f"orphans-{os.getpid()}-{time.monotonic_ns()}"
    model = tmp_path / "sleeper.py"
    model.write_text(SLEEPER, "utf-8")
    grandchild_file = tmp_path / "grandchild.pid"
    harness = subprocess.Popen(
        [
            CLI,
            "--ledger",
            str(home / "ledger.db"),
            "run",
            "--bank",
            "sales-fixture",
            "--adapter",
            "command",
            "--command",
            f"{sys.executable} {model} {grandchild_file}",
        ],
        env={**os.environ, "ORPHAN_TEST_TAG": tag},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # The model is running once it has started its own child.
        assert _wait_until(lambda: grandchild_file.exists(), 60), "the model never started"
        grandchild = int(grandchild_file.read_text())
        before = _tagged(tag)
        # The harness, at least one SQL worker or none yet, the supervisor, model, grandchild.
        assert harness.pid in before
        assert grandchild in before
        assert len(before) >= 4
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        assert _wait_until(lambda: not _tagged(tag), 15), f"still running: {_tagged(tag)}"
    finally:
        harness.kill()
        for pid in _tagged(tag):
            os.kill(pid, signal.SIGKILL)


def _start_time(pid: int) -> int:
    fields = _stat(pid)
    assert fields is not None
    return int(fields[19])


def test_the_next_run_sweeps_a_stale_group_and_only_that(home: Path, tmp_path: Path) -> None:
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    stale = subprocess.Popen(sleep, start_new_session=True)
    live_run = subprocess.Popen(sleep, start_new_session=True)
    recycled = subprocess.Popen(sleep, start_new_session=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    children = home / "children"
    children.mkdir(exist_ok=True)
    try:
        # A harness that died (its pid is gone) left `stale` running.
        (children / str(stale.pid)).write_text(
            f"{dead.pid} 1 {stale.pid} {_start_time(stale.pid)}\n", "ascii"
        )
        # A harness that still runs (this test process): its group is not ours to kill.
        (children / str(live_run.pid)).write_text(
            f"{os.getpid()} {_start_time(os.getpid())} {live_run.pid} "
            f"{_start_time(live_run.pid)}\n",
            "ascii",
        )
        # A dead harness whose group pid now belongs to another process (other start time).
        (children / str(recycled.pid)).write_text(
            f"{dead.pid} 1 {recycled.pid} {_start_time(recycled.pid) + 1}\n", "ascii"
        )
        done = subprocess.run(
            [
                CLI,
                "--ledger",
                str(home / "ledger.db"),
                "run",
                "--bank",
                "sales-fixture",
                "--adapter",
                "reference",
                "--no-variants",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert _wait_until(lambda: stale.poll() is not None, 10)
        assert stale.returncode == -signal.SIGKILL
        assert live_run.poll() is None
        assert recycled.poll() is None
        assert sorted(p.name for p in children.iterdir()) == [str(live_run.pid)]
        # The record of the live harness goes once that harness is gone (here: never killed).
        assert sweep_stale_children(children) == 0
        assert live_run.poll() is None
    finally:
        for proc in (stale, live_run, recycled):
            proc.kill()
            proc.wait()
