"""A model program run once, in its own process group, under a supervisor tied to caseledger.

The command adapter and the pi adapter both run a program per attempt. Each
run goes through ``SUPERVISOR`` in a new session (its own process group): on a
timeout, when the adapter closes, and when caseledger dies (even by SIGKILL)
the whole group is killed, so no model program outlives the run. With
``ProcessGroups.track_children`` each running group is also recorded in a
folder, and ``sweep_stale_children`` kills what a dead caseledger left behind
(docs/adapters.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

__all__ = [
    "SUPERVISOR",
    "CannotStart",
    "Finished",
    "ProcessGroups",
    "kill_group",
    "sweep_stale_children",
]

# The supervisor every model program runs under (``python -I -S -c``, argv: the
# harness pid, then the program's argv). It leads the program's process group and
# asks Linux for a signal when the harness dies (PR_SET_PDEATHSIG), even by
# SIGKILL; on it, it kills the whole group (itself, the program, its children).
# It forks the program rather than exec'ing it so that grandchildren die too, and
# relays the program's exit status or signal. A tiny separate process instead of
# a preexec_fn: preexec_fn is unsafe in a process with threads, as the runner is.
SUPERVISOR = r"""
import os, signal, sys
def die(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, die)
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
except (ImportError, OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    die()
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        os.write(2, ("cannot start the command: %s" % exc).encode())
    os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
status = os.waitpid(pid, 0)[1]
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
"""


class CannotStart(OSError):
    """The supervisor could not be started (Popen's OSError, same message).

    Told apart from an error of a running program so an adapter can record it
    as the attempt's failure; an ``OSError`` still, for a caller that does not.
    """


class Finished(msgspec.Struct, frozen=True):
    """How one run ended: exit status (negative: killed by that signal), output, whether
    the timeout killed it, and the wall time from start to the group's end, in µs."""

    returncode: int
    out: bytes
    err: bytes
    timed_out: bool
    wall_us: int

    def how(self) -> str:
        """How the program ended, for a failure message.

        >>> Finished(returncode=-9, out=b"", err=b"", timed_out=False, wall_us=1).how()
        'killed by signal 9'
        >>> Finished(returncode=3, out=b"", err=b"", timed_out=False, wall_us=1).how()
        'exit status 3'
        """
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return f"exit status {self.returncode}"


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks since boot) of a live process, else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # a zombie runs nothing
        return None
    return int(fields[2]), int(fields[19])


class _ChildRecord:
    """``<folder>/<pgid>``: one running model's group, so a later run can sweep it.

    The file holds the harness pid and start time and the group leader's pid and
    start time. A pid is only trusted with its start time, so a recycled pid is
    never killed.
    """

    def __init__(self, folder: Path, pgid: int) -> None:
        self.path: Path | None = folder / str(pgid)
        me, leader = _proc_stat(os.getpid()), _proc_stat(pgid)
        if me is None or leader is None:
            self.path = None
            return
        folder.mkdir(parents=True, exist_ok=True)
        self.path.write_text(f"{os.getpid()} {me[1]} {pgid} {leader[1]}\n", "ascii")

    def remove(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def sweep_stale_children(folder: Path) -> int:
    """Kill the model process groups a dead caseledger left behind; returns how many.

    A record is stale when its harness process is gone (or is another process
    with a recycled pid). Its group is killed only when the group leader still
    runs with the recorded start time. Records of live harnesses are left alone.
    """
    if not folder.is_dir():
        return 0
    killed = 0
    for path in sorted(folder.iterdir()):
        try:
            harness, harness_start, pgid, leader_start = map(int, path.read_text("ascii").split())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)  # not one of ours, or half-written: nothing to trust
            continue
        alive = _proc_stat(harness)
        if alive is not None and alive[1] == harness_start:
            continue  # a run in progress
        leader = _proc_stat(pgid)
        if leader is not None and leader == (pgid, leader_start):
            kill_group(pgid)
            killed += 1
        path.unlink(missing_ok=True)
    return killed


def kill_group(pgid: int) -> None:
    """SIGKILL a process group; one already gone (or not ours) is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    # After the group was killed; a grandchild that left the group could still
    # hold the pipes open, so do not wait for it forever.
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return b"", b""


class ProcessGroups:
    """The process groups of an adapter's running calls (safe from several threads).

    ``run`` starts a program under the supervisor and waits for it; ``kill_all``
    kills every group still running (an interrupted run's models never outlive
    caseledger); ``close`` does that and refuses any later start.
    """

    def __init__(self) -> None:
        self._live: set[int] = set()
        self._lock = threading.Lock()
        self._children_dir: Path | None = None
        self._closed = False

    def track_children(self, folder: Path) -> None:
        """Record each running group under ``folder`` for :func:`sweep_stale_children`."""
        self._children_dir = folder

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | Path,
        env: Mapping[str, str],
        timeout_s: float,
        stdin: bytes | None = None,
    ) -> Finished | None:
        """Run ``argv`` once (``stdin`` written to it, else no standard input) and wait.

        The program's group is killed when it ends, and at ``timeout_s`` seconds
        (``Finished.timed_out``). None: ``close`` was called, nothing was started.

        Raises:
            CannotStart: the supervisor could not be started.
        """
        start = time.perf_counter_ns()
        with self._lock:
            if self._closed:
                return None
            try:
                # An argument list, no shell: the user's configured program through our
                # supervisor (docs/adapters.md).
                proc = subprocess.Popen(  # noqa: S603
                    [sys.executable, "-I", "-S", "-c", SUPERVISOR, str(os.getpid()), *argv],
                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=dict(env),
                    start_new_session=True,  # own process group: a timeout kills all of it
                )
            except OSError as exc:
                raise CannotStart(str(exc)) from exc
            self._live.add(proc.pid)
        record = _ChildRecord(self._children_dir, proc.pid) if self._children_dir else None
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc.pid)
            out, err = _drain(proc)
        finally:
            # A finished program may leave children behind; none outlives its job.
            kill_group(proc.pid)
            with self._lock:
                self._live.discard(proc.pid)
            if record is not None:
                record.remove()
        return Finished(
            returncode=proc.returncode,
            out=out,
            err=err,
            timed_out=timed_out,
            wall_us=(time.perf_counter_ns() - start) // 1000,
        )

    def kill_all(self) -> None:
        """Kill the group of every run still going (idempotent); later runs may start."""
        with self._lock:
            live, self._live = self._live, set()
        for pgid in live:
            kill_group(pgid)

    def close(self) -> None:
        """Kill every run still going and refuse later ones (idempotent)."""
        with self._lock:
            self._closed = True
        self.kill_all()
