"""A run's SQL workers: sandboxed executors started at once, used as one executor.

Part of the runner (``ledger.run.runner``): each statement runs on an idle worker;
the model calls do not wait for the workers to start, only the judging of SQL does
(issue 34). The runner passes the function that starts one (``executor_for``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path

from ledger.closing import Closing
from ledger.engines import Executor
from ledger.engines.process import CheckedTexts, ExecResult, ProcessExecutor
from ledger.engines.reading import Reading, ReadRequest
from ledger.events import BankPublished
from ledger.harness.attempt import BankContext
from ledger.harness.reading import KeptReadings


def hold_ctrl_c() -> None:
    """Block SIGINT in this (non-main) thread, so a worker process it starts (or restarts
    after a crash) inherits a blocked SIGINT, as one started on the main thread does
    (``ledger.engines.duckdb_worker``): a Ctrl-C to the whole process group cannot stop it
    half-started. Python handles signals on the main thread only, which keeps them."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class SqlWorkers(Closing):
    """The run's SQL workers: ``size`` sandboxed executors started at once on threads,
    used as one executor (each statement runs on an idle one; ``Executor``)."""

    def __init__(
        self,
        bank: BankContext,
        size: int,
        start: Callable[[BankPublished, Path], Executor],
    ) -> None:
        """``start``: starts one worker for the bank (``ledger.engines.executor_for``, as
        the runner looks it up when the run starts)."""
        self.size = max(1, size)
        self._bank = bank
        self._start_one = start
        self._lock = threading.Lock()
        self._made: list[Executor] = []
        self._errors: list[BaseException] = []
        self._free: list[Executor] = []  # idle workers, the one idle longest first
        self._freed = threading.Condition(self._lock)
        self._on_ready: list[Callable[[], None]] = []
        self._readings = KeptReadings()
        # The texts that passed a worker's own parse check, shared by every worker's
        # executor (issue 34: a repeated text is then checked once per run, not once per
        # worker it reaches).
        self._checks = CheckedTexts()
        self._started = 0  # workers that have started, or failed to
        self._closed = False  # a worker that starts after close() stops itself
        self._threads = [
            threading.Thread(target=self._start, name=f"caseledger-sql-start-{n}", daemon=True)
            for n in range(self.size)
        ]
        for thread in self._threads:
            thread.start()

    def _start(self) -> None:
        hold_ctrl_c()
        try:
            made = self._start_one(self._bank.event, self._bank.db_path)
        except BaseException as exc:  # not hidden: ready() raises it on the run's thread
            with self._lock:
                self._errors.append(exc)
                self._started += 1
            return
        if isinstance(made, ProcessExecutor):
            made.share_checks(self._checks)
        with self._lock:
            late = self._closed
            if not late:
                self._made.append(made)
            self._started += 1
            done = self._started == self.size and not self._errors
            callbacks = list(self._on_ready) if done else []
        if late:  # the run ended while this worker started: nothing will use it
            made.close()
        else:
            self.give_back(made)
        for callback in callbacks:
            callback()

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every worker has started (now, if they have; never when
        one failed to start), on the thread of the last one to start."""
        with self._lock:
            if self._started < self.size:
                self._on_ready.append(callback)
                return
            ok = not self._errors
        if ok:
            callback()

    def ready(self) -> SqlWorkers:
        """Wait until every worker has started.

        Raises:
            SandboxError: a worker could not start (the bank database is missing, ...).
        """
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]
        return self

    def execute(
        self, sql: str, *, max_rows: int, max_result_bytes: int, max_cell_bytes: int
    ) -> ExecResult:
        """Run one statement on an idle worker (waiting for every worker to start, then
        for an idle one; SandboxError when one could not start)."""
        self.ready()
        executor = self.take()
        try:
            return executor.execute(
                sql,
                max_rows=max_rows,
                max_result_bytes=max_result_bytes,
                max_cell_bytes=max_cell_bytes,
            )
        finally:
            self.give_back(executor)

    def take(self) -> Executor:
        """An idle worker, waiting for one: the one idle longest."""
        with self._freed:
            while not self._free:
                self._freed.wait()
            return self._free.pop(0)

    def give_back(self, executor: Executor) -> None:
        """Return a worker taken with :meth:`take`."""
        with self._freed:
            self._free.append(executor)
            self._freed.notify()

    def read(self, request: ReadRequest) -> Reading | None:
        """Read one SQL text on an idle worker (``ledger.harness.reading``); None when
        its engine's executor cannot, or the worker could not (the caller reads it).
        Waits for the workers to start, as :meth:`execute` does.

        A run sends the same SQL many times (issue 34): the reading of a request already
        read (the same text, tables, rules, reference SQL, engine and limits) is given
        again without a worker, unless it ran out of its CPU budget (the only part of a
        reading that depends on the machine rather than on the request)."""
        return self._readings.read(request, self._read_on_worker)

    def _read_on_worker(self, request: ReadRequest) -> Reading | None:
        self.ready()
        executor = self.take()
        try:
            read = getattr(executor, "read", None)
            return None if read is None else read(request)
        finally:
            self.give_back(executor)

    def close(self) -> None:
        """Stop every worker that has started. One still starting is not waited for (a
        run that stopped before needing its SQL workers ends at once, issue 34): its
        own thread stops it once it is up, and a process that exits first ends it
        (the workers are daemon processes and watch their parent)."""
        with self._lock:
            self._closed = True
            made, self._made = self._made, []
        # Each on its own thread: a worker takes a moment to end, and they end together.
        errors: list[BaseException] = []

        def close(executor: Executor) -> None:
            try:
                executor.close()
            except BaseException as exc:  # not hidden: raised below, on the run's thread
                errors.append(exc)

        closers = [threading.Thread(target=close, args=(e,)) for e in made]
        for thread in closers:
            thread.start()
        for thread in closers:
            thread.join()
        if errors:
            raise errors[0]
