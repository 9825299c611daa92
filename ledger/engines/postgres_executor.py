"""The PostgreSQL executor: the parent side of one SQL worker process.

Part of the PostgreSQL engine (``ledger.engines.postgres``; the module doc there says
how a query runs): starts the worker (``postgres_worker``), sends it each query, kills
it past the timeout and its grace, and checks ``pg_stat_activity`` until no backend of
it is left.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec
import psycopg

from ledger.engines.postgres_bankfile import ENV_VAR, read_bank_file
from ledger.engines.postgres_worker import why_unsendable, worker_main
from ledger.errors import SandboxError
from ledger.harness import cells
from ledger.harness.worker import ExecResult, Reply, Request, failure, parse_memory_limit

if TYPE_CHECKING:
    from ledger.engines.postgres import PostgresEngine

#: How long the parent waits past the timeout before it kills the worker.
KILL_GRACE_S = 2.0
#: How long a fresh worker may take to import psycopg and connect.
STARTUP_TIMEOUT_S = 60.0
#: How long a closed backend may take to leave pg_stat_activity before it is terminated.
BACKEND_EXIT_WAIT_S = 2.0


# ------------------------------------------------------------------ the executor (parent)

_DECODER: msgspec.msgpack.Decoder[Reply] = msgspec.msgpack.Decoder(Reply)
_ENCODER = msgspec.msgpack.Encoder()


class PostgresExecutor:
    """Runs a model's SQL as the bank's reader in one worker process (see the module doc).

    ``execute`` may be called from several threads; calls take turns (one
    worker, one connection). Use as a context manager or call :meth:`close`: no
    worker process and no backend of it outlives the executor.

    Raises:
        BankError: the bank file or its password file is missing.
        SandboxError: the worker cannot connect as the reader or does not start.
    """

    def __init__(
        self, engine: PostgresEngine, database: Path, *, timeout_s: float = 5.0,
        memory_limit: str = "512MB",
    ) -> None:  # fmt: skip
        self._engine = engine
        self._database = database
        self._timeout_s = timeout_s
        self._memory = parse_memory_limit(memory_limit)
        self._bank = read_bank_file(database)
        #: Names this executor's sessions in pg_stat_activity (its backends are found by it).
        self.application_name = f"caseledger-exec-{secrets.token_hex(6)}"
        self._conninfo = engine.reader_conninfo(
            database, [("statement_timeout", str(max(1, int(timeout_s * 1000))))],
            self.application_name,
        )  # fmt: skip
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._process: Any = None
        self._pipe: Connection | None = None
        self._admin: psycopg.Connection[Any] | None = None
        self._closed = False
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> PostgresExecutor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start(self) -> None:
        parent_end, child_end = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=worker_main,
            args=(child_end, self._conninfo, self._timeout_s, self._memory, os.getpid()),
            name="caseledger-pg-worker",
            daemon=True,
        )
        process.start()
        child_end.close()
        self._process, self._pipe = process, parent_end
        try:
            if not parent_end.poll(STARTUP_TIMEOUT_S):
                raise SandboxError(
                    f"the PostgreSQL worker did not start within {STARTUP_TIMEOUT_S:g} s"
                )
            reply = _DECODER.decode(parent_end.recv_bytes())
        except (EOFError, OSError):
            raise SandboxError(
                f"the PostgreSQL worker died while starting ({self._exit_text()})"
            ) from None
        if reply.kind == "open_failed":
            raise SandboxError(
                f"{self._database}: cannot connect as the bank's reader: {reply.message}",
                hint=f"publish the bank again, or check the server of {ENV_VAR}",
            )

    def _exit_text(self) -> str:
        self._process.join(0.5)
        code = self._process.exitcode
        if code is None:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _kill(self) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                self._pipe.close()
        if self._process is not None:
            self._process.join(2.0 if self._process.is_alive() else 0)
            if self._process.is_alive():
                self._process.kill()
            self._process.join()
        self._process, self._pipe = None, None

    def close(self) -> None:
        """Stop the worker, then wait until none of its backends is left. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._pipe is not None:
                    self._kill()
                self._reap()
            finally:
                if self._admin is not None:
                    with contextlib.suppress(psycopg.Error):
                        self._admin.close()
                    self._admin = None

    # ------------------------------------------------------------- backends

    def worker_pid(self) -> int | None:
        """Process id of the worker process (None when none runs)."""
        return None if self._process is None else int(self._process.pid)

    def backend_pids(self) -> tuple[int, ...]:
        """Process ids of this executor's backends on the server (for monitoring and tests)."""
        con = self._admin_connection()
        rows = con.execute(
            "SELECT pid FROM pg_catalog.pg_stat_activity WHERE usename = %s "
            "AND application_name = %s ORDER BY pid",
            [self._bank.reader, self.application_name],
        ).fetchall()
        return tuple(int(r[0]) for r in rows)

    def _admin_connection(self) -> psycopg.Connection[Any]:
        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(
                self._engine.admin_conninfo(application_name="caseledger-exec-admin"),
                autocommit=True,
            )
        return self._admin

    def _reap(self) -> None:
        """Wait until no backend of this executor is left; terminate any that lingers."""
        try:
            deadline = time.monotonic() + BACKEND_EXIT_WAIT_S
            pids = self.backend_pids()
            while pids and time.monotonic() < deadline:
                time.sleep(0.005)
                pids = self.backend_pids()
            if not pids:
                return
            con = self._admin_connection()
            for pid in pids:
                con.execute("SELECT pg_catalog.pg_terminate_backend(%s, 3000)", [pid])
            pids = self.backend_pids()
        except psycopg.OperationalError:
            return  # the server is gone, and its backends with it
        if pids:
            raise SandboxError(
                f"backends {pids} of the bank's reader did not end after the worker stopped"
            )

    # ------------------------------------------------------------- queries

    def execute(
        self,
        sql: str,
        *,
        max_rows: int,
        max_result_bytes: int = cells.DEFAULT_MAX_RESULT_BYTES,
        max_cell_bytes: int = cells.DEFAULT_MAX_CELL_BYTES,
    ) -> ExecResult:
        """Run one query as the reader; every failure is an ExecResult (kinds in the module doc).

        Fetches at most ``max_rows + 1`` rows; cells over ``max_cell_bytes`` are
        truncated; a result over ``max_result_bytes`` is ``result_too_large``.
        """
        if max_rows < 0:
            raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        unsendable = why_unsendable(sql)
        if unsendable is not None:
            return failure("refused", f"cannot be sent to PostgreSQL: {unsendable}", 0)
        request = Request(sql, max_rows, self._timeout_s, max_result_bytes, max_cell_bytes)
        with self._lock:
            if self._closed:
                raise SandboxError("the PostgreSQL executor is closed")
            if self._pipe is None:
                self._start()
            result = self._run(request)
            if result.error_kind in ("timeout", "worker_crash", "memory"):
                self._reap()  # the worker closed (or lost) its connection: make sure it is gone
            return result

    def _run(self, request: Request) -> ExecResult:
        pipe = self._pipe
        if pipe is None:
            raise SandboxError("the PostgreSQL worker is not running")
        start = time.perf_counter_ns()
        try:
            pipe.send_bytes(_ENCODER.encode(request))
            if not pipe.poll(self._timeout_s + KILL_GRACE_S):
                self._kill()
                us = (time.perf_counter_ns() - start) // 1000
                message = (
                    f"query did not stop within {self._timeout_s:g} s + {KILL_GRACE_S:g} s "
                    "grace; worker killed and its backend terminated"
                )
                return failure("timeout", message, us)
            reply = _DECODER.decode(pipe.recv_bytes())
        except (EOFError, OSError):
            us = (time.perf_counter_ns() - start) // 1000
            text = self._exit_text()
            self._kill()
            return failure("worker_crash", f"the PostgreSQL worker died ({text})", us)
        if reply.kind == "fault":
            raise SandboxError(f"the PostgreSQL worker failed (a harness bug):\n{reply.message}")
        if reply.result is None:
            raise SandboxError("the PostgreSQL worker answered without a result (a harness bug)")
        return reply.result
