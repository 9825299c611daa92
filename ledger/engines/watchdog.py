"""The SQL worker's own guards, in the child: its deadline, its memory, its parent.

Part of the worker protocol (``ledger.engines.process``): every engine's worker starts
a :class:`Watchdog` (the deadline interrupt, the orphan check and, for DuckDB, the
resident-memory bound that ends the process with :data:`MEMORY_EXIT_CODE`), and the
SQLite and PostgreSQL workers cap their address space (:func:`limit_address_space`);
:func:`parse_memory_limit` reads a DuckDB-style memory limit for all of them.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ledger.errors import UsageError

__all__ = [
    "MEMORY_EXIT_CODE",
    "RSS_MARGIN_BYTES",
    "Watchdog",
    "limit_address_space",
    "parse_memory_limit",
]

# How often an idle worker checks that its parent is still alive.
_PARENT_CHECK_S = 0.25
# How often a DuckDB worker reads its resident memory while a query runs.
_RSS_CHECK_S = 0.005
# How long after a query the watchdog keeps waking every _RSS_CHECK_S (issue 34): while
# queries come one after another it is already awake for the next one, which is then
# armed without waking it (a hand-off cost 0.1-0.25 ms of a 2 ms query).
_HOT_S = 0.5
# What a DuckDB worker may hold beyond its size at its first query and its memory_limit
# before it stops itself (Watchdog.bound_memory): DuckDB's memory_limit leaves out some
# allocations (a single huge printf value, a recursive CTE's working set).
RSS_MARGIN_BYTES = 128 * 2**20
# The exit code of a worker that stopped itself over its memory bound: the parent
# records the query as ``memory`` and replaces the worker.
MEMORY_EXIT_CODE = 86


_UNITS = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}  # fmt: skip


def parse_memory_limit(text: str) -> int:
    """Bytes of a DuckDB-style memory limit (``512MB``, ``1GiB``; MB = 1000**2 as DuckDB).

    >>> parse_memory_limit("512MB"), parse_memory_limit("1 GiB")
    (512000000, 1073741824)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = (match.group(2).lower() or "b") if match else ""
    if match is None or unit not in _UNITS:
        raise UsageError(f"not a memory limit: {text!r}", hint="write it like 512MB or 1GiB")
    return int(float(match.group(1)) * _UNITS[unit])


def limit_address_space(extra_bytes: int) -> None:
    """Cap this process's address space at its current size plus ``extra_bytes``.

    Every SQL worker calls it once its database is open: an engine's own memory
    setting does not bound every allocation (DuckDB's ``memory_limit`` leaves out a
    1.5 GB ``printf`` value), the address space does, so such a query ends as
    ``memory`` (the allocation fails) instead of growing the worker without bound.
    Linux only (``/proc/self/status``); elsewhere the worker runs without the cap
    (docs/sandbox.md).
    """
    try:
        import resource

        status = Path("/proc/self/status").read_text(encoding="ascii")
        match = re.search(r"^VmSize:\s+(\d+) kB", status, re.MULTILINE)
        if match is None:
            return
        limit = int(match.group(1)) * 1024 + extra_bytes
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError, ImportError):
        return  # not Linux: the worker runs without the cap


class Watchdog(threading.Thread):
    """Interrupts the running query at its deadline; exits the process if the parent dies.

    One per worker process, for every engine whose query runs in a blocking call:
    ``arm`` gives the call that stops the query (DuckDB's ``cursor.interrupt``,
    psycopg's ``connection.cancel``) and the time it may run. A call that fails
    because the query finished meanwhile is fine.

    With :meth:`bound_memory` (the DuckDB worker) it also reads the process's resident
    memory every few milliseconds while a query runs and, past the bound, ends the
    process at once with :data:`MEMORY_EXIT_CODE`: DuckDB cannot interrupt a value it is
    building (a 1.5 GB ``printf`` grows to 2.9 GB resident before the interrupt is seen).
    """

    def __init__(self, parent_pid: int, name: str = "caseledger-watchdog") -> None:
        super().__init__(name=name, daemon=True)
        self._parent_pid = parent_pid
        self._cond = threading.Condition()
        self._interrupt: Callable[[], object] | None = None
        self._deadline: float | None = None
        self._fired = False
        self._extra_bytes: int | None = None
        self._bound: int | None = None
        self._statm: int | None = None
        self._page = 4096
        self._hot_until = 0.0  # until then the watchdog wakes every _RSS_CHECK_S

    def bound_memory(self, extra_bytes: int) -> None:
        """Bound the resident memory of this process while a query runs: its size when
        the first query is armed (the database open, the guard's modules loaded) plus
        ``extra_bytes``. Linux only (``/proc/self/statm``); elsewhere nothing is bounded."""
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
            self._page = os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            self._statm = None
            return
        self._extra_bytes = extra_bytes

    def _resident(self) -> int:
        """Bytes resident now (0 without ``/proc/self/statm``)."""
        if self._statm is None:
            return 0
        return int(os.pread(self._statm, 256, 0).split()[1]) * self._page

    def arm(self, interrupt: Callable[[], object], timeout_s: float) -> None:
        """Watch the query ``interrupt`` stops, for ``timeout_s`` seconds from now.

        The watchdog is woken only when it is not already waking every
        :data:`_RSS_CHECK_S` (within :data:`_HOT_S` of the last query): either way it
        reads the memory and the deadline within that time, as it did when woken (it
        first waited that long too), and the deadline is seconds away."""
        with self._cond:
            now = time.monotonic()
            if self._extra_bytes is not None and self._bound is None:
                self._bound = self._resident() + self._extra_bytes
            self._interrupt, self._deadline = interrupt, now + timeout_s
            self._fired = False
            if now >= self._hot_until or timeout_s < _RSS_CHECK_S:
                self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching; True when the deadline fired (the query was interrupted)."""
        with self._cond:
            fired = self._fired
            self._interrupt, self._deadline, self._fired = None, None, False
            self._hot_until = time.monotonic() + _HOT_S
            return fired

    def run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                wait = _PARENT_CHECK_S
                if self._deadline is not None and not self._fired:
                    wait = min(wait, max(0.0, self._deadline - now))
                if (self._bound is not None and self._interrupt is not None) or (
                    now < self._hot_until
                ):
                    wait = min(wait, _RSS_CHECK_S)
                self._cond.wait(wait)
                if (
                    self._bound is not None
                    and self._interrupt is not None
                    and self._resident() > self._bound
                ):
                    # Under the lock: the query's thread cannot disarm and answer meanwhile.
                    os._exit(MEMORY_EXIT_CODE)
                due = self._deadline is not None and time.monotonic() >= self._deadline
                if due and not self._fired and self._interrupt is not None:
                    self._fired = True
                    # A query that finished in the meantime may refuse: fine.
                    with contextlib.suppress(Exception):
                        self._interrupt()
            if os.getppid() != self._parent_pid:
                # Orphaned: the pool is gone, so is our job (for a server engine,
                # closing the socket ends the backend's query too).
                os._exit(3)
