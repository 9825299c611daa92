"""The PostgreSQL executor: the parent side of one SQL worker process.

Part of the PostgreSQL engine (``ledger.engines.postgres``; the module doc there says
how a query runs): starts the worker (``postgres_worker``), sends it each query, kills
it past the timeout and its grace, and checks ``pg_stat_activity`` until no backend of
it is left.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from ledger.engines.postgres_bankfile import ENV_VAR, read_bank_file
from ledger.engines.postgres_worker import why_unsendable, worker_main
from ledger.engines.process import ExecResult, ProcessExecutor, ProcessWorker
from ledger.engines.watchdog import parse_memory_limit
from ledger.errors import SandboxError

if TYPE_CHECKING:
    from ledger.engines.postgres import PostgresEngine

#: How long the parent waits past the timeout before it kills the worker.
KILL_GRACE_S = 2.0
#: How long a closed backend may take to leave pg_stat_activity before it is terminated.
BACKEND_EXIT_WAIT_S = 2.0
# Results after which the worker's backend may be gone or going: wait until it is.
_BACKEND_LOST = frozenset({"timeout", "worker_crash", "memory"})


class PostgresExecutor(ProcessExecutor):
    """Runs a model's SQL as the bank's reader in one worker process (see the module doc).

    The process protocol is :class:`ledger.engines.process.ProcessExecutor`'s:
    ``execute`` may be called from several threads and calls take turns (one
    worker, one connection); a worker killed past its timeout and grace, or
    crashed, is replaced. Use as a context manager or call :meth:`close`: no worker
    process and no backend of it outlives the executor.

    Raises:
        BankError: the bank file or its password file is missing.
        SandboxError: the worker cannot connect as the reader or does not start.
    """

    label = "PostgreSQL worker"
    title = "PostgreSQL executor"
    kill_grace_s = KILL_GRACE_S
    # The reading of SQL stays in the parent, as before the shared base.
    reads_sql = False

    def __init__(
        self, engine: PostgresEngine, database: Path, *, timeout_s: float = 5.0,
        memory_limit: str = "512MB",
    ) -> None:  # fmt: skip
        self._engine = engine
        self._memory = parse_memory_limit(memory_limit)
        self._bank = read_bank_file(database)
        #: Names this executor's sessions in pg_stat_activity (its backends are found by it).
        self.application_name = f"caseledger-exec-{secrets.token_hex(6)}"
        self._conninfo = engine.reader_conninfo(
            database, [("statement_timeout", str(max(1, int(timeout_s * 1000))))],
            self.application_name,
        )  # fmt: skip
        self._admin: psycopg.Connection[Any] | None = None
        super().__init__(database, size=1, timeout_s=timeout_s)

    def _spawn(self) -> ProcessWorker:
        return ProcessWorker(
            self._ctx,
            worker_main,
            (self._conninfo, self._timeout_s, self._memory, os.getpid()),
            database=self._database,
            name="caseledger-pg-worker",
            label=self.label,
            open_what="cannot connect as the bank's reader",
            open_hint=f"publish the bank again, or check the server of {ENV_VAR}",
            kill_note="worker killed and its backend terminated",
        )

    def _refusal(self, sql: str) -> str | None:
        unsendable = why_unsendable(sql)
        return None if unsendable is None else f"cannot be sent to PostgreSQL: {unsendable}"

    def _settle(self, result: ExecResult) -> None:
        if result.error_kind in _BACKEND_LOST:
            self._reap()  # the worker closed (or lost) its connection: make sure it is gone

    def close(self) -> None:
        """Stop the worker, then wait until none of its backends is left. Safe to call twice."""
        first = not self._closed
        super().close()
        if not first:
            return
        try:
            self._reap()
        finally:
            if self._admin is not None:
                with contextlib.suppress(psycopg.Error):
                    self._admin.close()
                self._admin = None

    # ------------------------------------------------------------- backends

    def worker_pid(self) -> int | None:
        """Process id of the worker process (None when none runs)."""
        pids = self.pids()
        return pids[0] if pids else None

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
