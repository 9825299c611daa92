"""The SQL worker process protocol every engine shares, both sides of the pipe.

Each engine's executor is a ``spawn`` child per worker that opens the bank read-only
and answers one request at a time over a pipe in msgpack (never pickle: a child that
ran hostile SQL is not trusted to hand us objects). This module owns everything but
the engine's own part:

- the messages: :class:`Request` (one query under its caps and timeout),
  :class:`Reply`, and :class:`ExecResult` (an execution or its classified failure,
  kinds as :data:`ERROR_KINDS`; failures are data, only a broken harness raises
  ``SandboxError``);
- the child side: :func:`serve` (open, say ready, answer until EOF; a ``ReadRequest``
  is read by the module ``ledger.engines.reading.READER`` names); the child's own
  guards (the deadline interrupt, the memory bound, the orphan check) are
  ``ledger.engines.watchdog``'s;
- the parent side: :class:`ProcessWorker` (spawn with Ctrl-C held off, wait for
  ready, request and reply, the kill past the timeout and its grace, the exit code
  read) and :class:`ProcessExecutor`, the base of every engine's executor (persistent
  workers, pids, close, a killed or crashed worker replaced).

An engine supplies its worker's entry point (open, run and classify, given to
:func:`serve`) and a :class:`ProcessExecutor` subclass that spawns it: DuckDB
(``ledger.engines.duckdb_worker``), SQLite (``ledger.engines.sqlite_worker``) and
PostgreSQL (``ledger.engines.postgres_executor``).
"""

from __future__ import annotations

import abc
import importlib
import math
import multiprocessing
import os
import queue
import select
import signal
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from ledger import collector, events
from ledger.closing import Closing
from ledger.engines import cells
from ledger.engines.reading import READER, Reading, ReadRequest
from ledger.engines.watchdog import MEMORY_EXIT_CODE, RSS_MARGIN_BYTES
from ledger.errors import SandboxError

__all__ = [
    "CHECKS_KEPT",
    "CHECK_KEPT_CHARS",
    "ERROR_KINDS",
    "KILL_GRACE_S",
    "MEMORY_MESSAGE",
    "STARTUP_TIMEOUT_S",
    "CheckedTexts",
    "ExecResult",
    "ProcessExecutor",
    "ProcessWorker",
    "Reply",
    "Request",
    "exit_now",
    "failure",
    "read_timeout_s",
    "send_or_quit",
    "serve",
    "success",
    "too_large",
]

# ``refused``: the worker's own DuckDB parse check refused the statement (a guard-class
# failure, scored as one); nothing ran.
ERROR_KINDS = (
    "timeout", "memory", "sql_runtime", "result_too_large", "worker_crash", "refused",
)  # fmt: skip

# The kinds of result a worker gives only after its own parse check passed the text and
# the query ran (a timeout, a memory stop or a crash may come while it is still checking).
_CHECK_PASSED = frozenset({"sql_runtime", "result_too_large"})
#: How many texts that passed the workers' own parse check an executor remembers
#: (``ProcessExecutor.remembers_checks``), and the longest text remembered.
CHECKS_KEPT = 4096
CHECK_KEPT_CHARS = 65536

# How long a worker may take to stop after DuckDB was asked to interrupt it.
KILL_GRACE_S = 1.0
# How long a worker may take to read one SQL text beyond twice the judge budget
# (``read_timeout_s``): a worker that overruns is replaced and the parent reads it.
READ_GRACE_S = 5.0
# How long a freshly spawned worker may take to import duckdb and open the file.
STARTUP_TIMEOUT_S = 60.0
# How long the parent waits for a worker whose pipe closed to be gone (to read its code).
_EXIT_WAIT_S = 10.0
MEMORY_MESSAGE = (
    "out of memory: the query took the SQL worker's resident memory past its bound (its "
    f"size at its first query + memory_limit + {RSS_MARGIN_BYTES // 2**20} MiB); the worker "
    "was stopped and replaced"
)


class ExecResult(msgspec.Struct, frozen=True, kw_only=True):
    """One execution, shaped like the fields of ``events.SqlExecuted``.

    ``rows`` hold cells encoded by :func:`ledger.engines.cells.encode_cell`;
    ``row_count`` is the number of rows kept (at most ``max_rows``) and
    ``truncated`` says that more existed.  ``sql_us`` is measured inside the
    worker around execute + fetch (for a kill or crash: the parent's wait).
    ``cells_truncated`` counts cells cut to the cell cap (unset when none).
    ``texts_cut`` and ``scrubbed`` are set by the judge, never by a worker
    (``ledger.harness.pipeline.stored_result``: the error text cut, secrets scrubbed).
    """

    ok: bool
    error_kind: str | None
    error_message: str | None
    columns: tuple[events.Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    row_count: int
    truncated: bool
    sql_us: int
    cells_truncated: int | UnsetType = UNSET
    texts_cut: tuple[events.TextCut, ...] | UnsetType = UNSET
    scrubbed: int | UnsetType = UNSET


class Request(msgspec.Struct, frozen=True, tag="execute"):
    """One query sent to a worker process (every engine's worker reads this shape).

    A worker also answers a :class:`ledger.engines.reading.ReadRequest` (read the SQL,
    run nothing) with a ``reading`` reply: see ``ledger.engines.reading``.
    """

    sql: str
    max_rows: int
    timeout_s: float
    max_result_bytes: int = cells.DEFAULT_MAX_RESULT_BYTES
    max_cell_bytes: int = cells.DEFAULT_MAX_CELL_BYTES
    #: The executor saw this very text pass a worker's own parse check on this database
    #: before (:attr:`ProcessExecutor.remembers_checks`): the worker may skip that check,
    #: whose answer depends on the text and the database alone (issue 34).
    checked: bool = False


class Reply(msgspec.Struct, frozen=True):
    """A worker's answer: ``ready``, ``open_failed``, ``result``, ``reading`` or ``fault``
    (a worker bug)."""

    kind: str
    message: str | None = None
    result: ExecResult | None = None
    reading: Reading | None = None


def read_timeout_s(req: ReadRequest) -> float:
    """How long the parent waits for a worker's reading: the judge budget is CPU time, so
    twice it in wall time (a loaded machine), plus :data:`READ_GRACE_S`."""
    return 2 * req.limits.judge_budget_ms / 1000 + READ_GRACE_S


def failure(kind: str, message: str, sql_us: int) -> ExecResult:
    """A failed execution of kind ``kind`` (no columns, no rows)."""
    return ExecResult(
        ok=False,
        error_kind=kind,
        error_message=message,
        columns=(),
        rows=(),
        row_count=0,
        truncated=False,
        sql_us=sql_us,
    )


def success(
    columns: tuple[events.Column, ...],
    kept: list[list[Any]],
    *,
    truncated: bool,
    sql_us: int,
    budget: cells.ResultBudget,
) -> ExecResult:
    """A query's result: ``kept``, its rows encoded under ``budget`` (at most max_rows)."""
    return ExecResult(
        ok=True,
        error_kind=None,
        error_message=None,
        columns=columns,
        rows=tuple(tuple(row) for row in kept),
        row_count=len(kept),
        truncated=truncated,
        sql_us=sql_us,
        cells_truncated=budget.cells_truncated or UNSET,
    )


def too_large(max_result_bytes: int, rows: int, columns: int) -> tuple[str, str]:
    """(kind, message) of a result over the cap, read as far as ``rows`` rows."""
    return (
        "result_too_large",
        f"the result is over the {max_result_bytes}-byte cap "
        f"(stopped reading after {rows} rows of {columns} columns)",
    )


# --------------------------------------------------------------------------- child side


S = TypeVar("S")


def serve(
    conn: Connection,
    open_session: Callable[[], S],
    run: Callable[[S, Request], ExecResult],
    close: Callable[[S], None],
    open_errors: tuple[type[BaseException], ...],
) -> None:
    """The child side of every engine's worker process: open, say ready, serve until EOF.

    Ctrl-C belongs to the harness (it closes the pool, which ends us through EOF);
    a failure to open the database is reported as ``open_failed``; an exception
    while running a query is a worker bug, handed to the parent as ``fault``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    collector.tune()  # a reading worker builds a sqlglot tree per new text
    encoder = msgspec.msgpack.Encoder()
    try:
        session = open_session()
    except open_errors as exc:
        send_or_quit(conn, encoder.encode(Reply(kind="open_failed", message=str(exc))))
        return
    try:
        if not send_or_quit(conn, encoder.encode(Reply(kind="ready"))):
            return
        # What reading SQL needs (sqlglot, the guard: the harness's reader, named by
        # READER) is imported at the first ReadRequest, before its CPU budget starts: a
        # worker that is only asked to execute (variant diagnostics read each text on
        # one variant's worker, not on every one) never loads a parser (issue 34).
        reader: Any = None
        decoder: msgspec.msgpack.Decoder[Request | ReadRequest] = msgspec.msgpack.Decoder(
            Request | ReadRequest
        )
        while True:
            try:
                raw = conn.recv_bytes()
            except (EOFError, OSError):
                break
            req = decoder.decode(raw)
            try:
                if isinstance(req, ReadRequest):
                    reader = reader or importlib.import_module(READER)
                    reply = Reply(kind="reading", reading=reader.read(req))
                else:
                    reply = Reply(kind="result", result=run(session, req))
            except Exception:
                reply = Reply(kind="fault", message=traceback.format_exc())
            if not send_or_quit(conn, encoder.encode(reply)):
                break
    finally:
        close(session)


def send_or_quit(conn: Connection, payload: bytes) -> bool:
    """Send to the parent; False when it went away (Ctrl-C while we started or ran)."""
    try:
        conn.send_bytes(payload)
    except OSError:
        return False  # nobody to answer: end quietly, the parent reports the interruption
    return True


def exit_now() -> None:
    """End a worker whose database is closed and whose pipe is done, skipping the
    interpreter's teardown (freeing every cached parse tree took 0.3 s a worker at the
    end of each run, issue 21): nothing is left to flush or to release."""
    os._exit(0)


# --------------------------------------------------------------------------- parent side

_DECODER: msgspec.msgpack.Decoder[Reply] = msgspec.msgpack.Decoder(Reply)
_ENCODER = msgspec.msgpack.Encoder()


def _start_holding_ctrl_c(process: Any) -> bool:
    """Start ``process`` with Ctrl-C held off; True when one arrived meanwhile.

    An interrupt in the middle of ``start()`` would leave a child reading half of
    its start-up data (and printing a traceback). Python delivers KeyboardInterrupt
    in the main thread whichever thread the signal reached, so the main thread's
    handler is swapped for one that only notes it; elsewhere no KeyboardInterrupt
    can interrupt ``start()``. The child inherits the blocked mask, and ignores
    SIGINT from then on (serve): a Ctrl-C to the whole group cannot stop it
    half-started either.
    """
    if threading.current_thread() is not threading.main_thread():
        process.start()
        return False
    noted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, previous)
    return bool(noted)


class ProcessWorker:
    """The parent's handle on one worker process of any engine (child side: :func:`serve`).

    ``target(child_end, *args)`` runs in a ``spawn`` child; ``label`` names the
    worker in messages, ``engine_name`` the database, and ``open_hint`` says what to
    do when it cannot open the database (``open_what``: what could not be done, by
    default "cannot open the ... database read-only"); ``kill_note`` ends the message
    of a query killed past its grace.
    """

    def __init__(
        self,
        ctx: Any,
        target: Callable[..., None],
        args: tuple[Any, ...],
        *,
        database: Path,
        name: str,
        label: str = "SQL worker",
        open_hint: str = "build the bank first",
        engine_name: str = "",
        open_what: str = "",
        kill_note: str = "worker killed",
    ) -> None:
        parent_end, child_end = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=target, args=(child_end, *args), name=name, daemon=True)
        held = _start_holding_ctrl_c(self.process)
        child_end.close()  # so that our end sees EOF when the child dies
        self.conn: Connection = parent_end
        # One poll object for the worker's life (Connection.poll builds a selector on each
        # call: tens of microseconds a query, issue 34); where select.poll is missing
        # (Windows), Connection.poll.
        self._poller = select.poll() if hasattr(select, "poll") else None
        if self._poller is not None:
            self._poller.register(parent_end.fileno(), select.POLLIN)
        self.ready = False
        self.db_path = database
        self.label = label
        self.open_hint = open_hint
        what = f"{engine_name} bank database" if engine_name else "bank database"
        self.open_what = open_what or f"cannot open the {what} read-only"
        self.kill_note = kill_note
        if held:  # the Ctrl-C that came while the child was launched: stop it, then obey
            self.conn.close()
            self.kill()
            raise KeyboardInterrupt

    def wait_ready(self, timeout_s: float) -> str | None:
        """Wait for the child to open the database; None when ready, else why not."""
        try:
            if not self._answered(timeout_s):
                return f"worker did not start within {timeout_s:g} s"
            reply = _DECODER.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            return f"worker died while starting ({self._exit_text()})"
        if reply.kind == "open_failed":
            raise SandboxError(
                f"{self.db_path}: {self.open_what}: {reply.message}",
                hint=self.open_hint,
            )
        self.ready = True
        return None

    def run(self, req: Request, grace_s: float) -> tuple[ExecResult, bool]:
        """Send one query and wait for its result; returns (result, worker still usable)."""
        if not self.ready:
            why = self.wait_ready(STARTUP_TIMEOUT_S)
            if why is not None:
                return failure("worker_crash", why, 0), False
        start = time.perf_counter_ns()
        try:
            self.conn.send_bytes(_ENCODER.encode(req))
            if not self._answered(req.timeout_s + grace_s):
                self.kill()
                us = (time.perf_counter_ns() - start) // 1000
                message = (
                    f"query did not stop within {req.timeout_s:g} s + {grace_s:g} s grace; "
                    f"{self.kill_note}"
                )
                return failure("timeout", message, us), False
            reply = _DECODER.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            us = (time.perf_counter_ns() - start) // 1000
            # A worker that stopped itself over its memory bound has closed its pipe on
            # the way out: wait for its exit code, which says so.
            self.process.join(_EXIT_WAIT_S)
            if self.process.exitcode == MEMORY_EXIT_CODE:
                return failure("memory", MEMORY_MESSAGE, us), False
            message = f"worker process died while running the query ({self._exit_text()})"
            return failure("worker_crash", message, us), False
        if reply.kind == "fault":
            raise SandboxError(f"the {self.label} failed (a harness bug):\n{reply.message}")
        if reply.result is None:
            raise SandboxError(f"the {self.label} answered without a result (a harness bug)")
        return reply.result, True

    def read(self, req: ReadRequest, timeout_s: float) -> tuple[Reading | None, bool]:
        """Have the worker read one SQL text (``ledger.harness.reading``); returns (the
        reading, worker still usable). None: no reading (the worker died, took over
        ``timeout_s``, or reported a fault); the caller then reads the text itself."""
        if not self.ready and self.wait_ready(STARTUP_TIMEOUT_S) is not None:
            return None, False
        try:
            self.conn.send_bytes(_ENCODER.encode(req))
            if not self._answered(timeout_s):
                self.kill()
                return None, False
            reply = _DECODER.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            return None, False
        return (reply.reading if reply.kind == "reading" else None), True

    def _answered(self, timeout_s: float) -> bool:
        """Whether the worker's answer (or the end of its pipe) arrives within ``timeout_s``."""
        if self._poller is None:
            return self.conn.poll(timeout_s)
        return bool(self._poller.poll(max(0, math.ceil(timeout_s * 1000))))

    def _exit_text(self) -> str:
        self.process.join(0.5)
        code = self.process.exitcode
        if code is None:
            return "still running"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        """SIGKILL the process and reap it (no zombie left behind)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()

    def stop(self) -> None:
        """Close the pipe (the child exits on EOF); kill it if it lingers."""
        self.conn.close()
        self.process.join(2.0)
        self.kill()


class CheckedTexts:
    """The last :data:`CHECKS_KEPT` SQL texts (of up to :data:`CHECK_KEPT_CHARS`) that
    passed a worker's own parse check on one database, shared by the threads and executors
    that use it (``ProcessExecutor.remembers_checks``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, sql: object) -> bool:
        with self._lock:
            if sql not in self._texts:
                return False
            self._texts.move_to_end(sql)  # type: ignore[arg-type]
            return True

    def add(self, sql: str) -> None:
        """Remember that ``sql`` passed (a text over :data:`CHECK_KEPT_CHARS` is not kept)."""
        if len(sql) > CHECK_KEPT_CHARS:
            return
        with self._lock:
            self._texts[sql] = None
            self._texts.move_to_end(sql)
            if len(self._texts) > CHECKS_KEPT:
                self._texts.popitem(last=False)


class ProcessExecutor(Closing, abc.ABC):
    """The parent side every engine's executor shares: ``size`` persistent worker
    processes (:class:`ProcessWorker`, child side :func:`serve`) over one bank database.

    It owns the process protocol: spawn, request and reply, the kill past the timeout
    and :attr:`kill_grace_s`, the memory-bound exit code (``memory``), :meth:`pids`,
    :meth:`close`, and a worker that timed out hard or crashed replaced by a fresh one.
    An engine supplies only :meth:`_spawn` (its worker's entry point: open, run and
    classify, served by :func:`serve`) and, where it needs them, :meth:`_refusal` (a
    text the engine cannot be sent) and :meth:`_settle` (after a query, e.g. make sure
    a server backend of a stopped worker is gone). ``execute`` and ``read`` may be
    called from several threads; each call takes an idle worker (waiting for one).
    Use as a context manager, or call :meth:`close`: no worker process outlives it.

    Raises:
        SandboxError: a worker cannot open the database or does not start.
    """

    #: Names the workers in messages ("SQLite worker").
    label: ClassVar[str] = "SQL worker"
    #: Names the executor in the message of a call after close.
    title: ClassVar[str] = "SQL worker pool"
    #: How long the parent waits past the timeout before it kills a worker.
    kill_grace_s: ClassVar[float] = KILL_GRACE_S
    #: Whether the workers read SQL texts (``ledger.harness.reading``) for the caller.
    reads_sql: ClassVar[bool] = True
    #: Whether the executor remembers the texts that passed its workers' own parse check
    #: and sends them again with ``Request.checked`` (an engine whose check costs a parse:
    #: DuckDB's ``json_serialize_sql``), in a :class:`CheckedTexts` of its own or one
    #: shared with :meth:`share_checks`: each worker remembers its own checks too, but a
    #: run's repeated text reaches whichever worker is idle.
    remembers_checks: ClassVar[bool] = False

    def __init__(self, database: Path, *, size: int, timeout_s: float) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self._database = Path(database)
        self._timeout_s = timeout_s
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._all: list[ProcessWorker] = []
        self._idle: queue.Queue[ProcessWorker] = queue.Queue()
        self._closed = False
        self._checks: CheckedTexts | None = CheckedTexts() if self.remembers_checks else None
        try:
            for _ in range(size):
                self._all.append(self._spawn())
            for worker in self._all:
                why = worker.wait_ready(STARTUP_TIMEOUT_S)
                if why is not None:
                    raise SandboxError(f"{self._database}: {self.label} failed to start: {why}")
                self._idle.put(worker)
        except BaseException:
            self.close()
            raise

    @property
    def timeout_s(self) -> float:
        """The deadline of each query, in seconds (``executor_for`` sets a bank's)."""
        return self._timeout_s

    @staticmethod
    def _existing(database: Path) -> Path:
        """``database`` as a Path, checked to be a file (a file engine's bank)."""
        database = Path(database)
        if not database.is_file():
            raise SandboxError(
                f"{database}: bank database not found", hint="build the bank before running it"
            )
        return database

    @abc.abstractmethod
    def _spawn(self) -> ProcessWorker:
        """Start one worker process (not waited for): the engine's entry point and args."""

    def _refusal(self, sql: str) -> str | None:
        """Why ``sql`` cannot be sent to the engine at all (a ``refused`` result), or None."""
        return None

    def _settle(self, result: ExecResult) -> None:
        """Called after each query, once a worker no longer usable is stopped (nothing to
        do for a file engine)."""
        return

    def pids(self) -> tuple[int, ...]:
        """Process ids of the current workers (for monitoring and tests)."""
        with self._lock:
            return tuple(w.process.pid for w in self._all if w.process.pid is not None)

    def execute(
        self,
        sql: str,
        *,
        max_rows: int,
        max_result_bytes: int = cells.DEFAULT_MAX_RESULT_BYTES,
        max_cell_bytes: int = cells.DEFAULT_MAX_CELL_BYTES,
    ) -> ExecResult:
        """Run one query in a worker and return its result or classified failure
        (kinds as :data:`ERROR_KINDS`), never an exception for the query's own failure.

        Fetches at most ``max_rows + 1`` rows; ``truncated`` is True when more
        than ``max_rows`` existed.  Cells over ``max_cell_bytes`` are truncated;
        a result over ``max_result_bytes`` is a ``result_too_large`` failure.
        Never retries.
        """
        if max_rows < 0:
            raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        refusal = self._refusal(sql)
        if refusal is not None:
            return failure("refused", refusal, 0)
        checks = self._checks
        checked = checks is not None and sql in checks
        request = Request(
            sql, max_rows, self._timeout_s, max_result_bytes, max_cell_bytes, checked=checked
        )
        worker = self._take()
        usable = False
        try:
            result, usable = worker.run(request, self.kill_grace_s)
            if not usable:
                worker.stop()
            self._settle(result)
        finally:
            self._give_back(worker, usable)
        passed = result.ok or result.error_kind in _CHECK_PASSED
        if checks is not None and passed and not checked:
            checks.add(sql)
        return result

    def share_checks(self, checks: CheckedTexts) -> None:
        """Remember the texts that passed the parse check in ``checks``, shared with the
        other executors over the same database (a run's ``SqlWorkers``: one executor per
        worker). Nothing happens for an engine that does not remember its checks."""
        if self.remembers_checks:
            self._checks = checks

    def read(self, req: ReadRequest) -> Reading | None:
        """Read one SQL text in a worker (see ``ledger.harness.reading``); None when the
        worker could not (the caller reads it itself). A worker that died or overran is
        replaced."""
        if not self.reads_sql:
            return None
        worker = self._take()
        usable = False
        try:
            reading, usable = worker.read(req, read_timeout_s(req))
        finally:
            self._give_back(worker, usable)
        return reading

    def _take(self) -> ProcessWorker:
        while True:
            if self._closed:
                raise SandboxError(f"the {self.title} is closed")
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                continue

    def _give_back(self, worker: ProcessWorker, usable: bool) -> None:
        with self._lock:
            if self._closed:
                return
            if not usable:
                worker.stop()
                self._all.remove(worker)
                worker = self._spawn()  # a fresh worker starts now, ready by the next query
                self._all.append(worker)
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every worker and reap it. Safe to call twice."""
        with self._lock:
            self._closed = True
            workers, self._all = self._all, []
        for worker in workers:
            worker.stop()
