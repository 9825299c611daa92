"""Sandboxed SQL execution: a model's query runs in a separate, locked-down DuckDB process.

Each worker is a ``spawn`` child that opens the frozen bank database read-only
with external access off, a 512 MB memory limit, one thread, ``TimeZone='UTC'``
and the configuration locked.  The parent talks to it over a pipe in msgpack
(never pickle: a child that ran hostile SQL is not trusted to hand us objects).
A query that runs past its timeout is interrupted inside the worker; if it
does not stop within a short grace the parent kills the process with SIGKILL
and starts a fresh one.  Rows are read one at a time under the result caps
(cells over ``max_cell_bytes`` truncated, reading stopped once the result is
over ``max_result_bytes``: see ``ledger.engines.cells``).  The process protocol
(pipe, deadline kill, memory bound, pids, close, replacement) is every engine's,
``ledger.engines.process``; this module is DuckDB's part of it: the worker's open,
run and classify, and :class:`WorkerPool`, its ``ProcessExecutor``.  Failures are data
(:class:`ExecResult`), classified as ``timeout``, ``memory``, ``sql_runtime``,
``result_too_large`` or ``worker_crash``; only a broken
harness (unreadable database, a bug in the worker) raises ``SandboxError``.
Before running anything the worker parses the statement with DuckDB itself
(``json_serialize_sql``) and refuses (``refused``) what is not one SELECT over
published tables and allowed functions: a second parser, so SQL that sqlglot
and DuckDB read differently passes at most one of the two checks. Denied
functions are also shadowed on the query connection by temporary macros that
raise an error. The worker is defence in depth behind the static guard, not an
OS sandbox: see ``docs/sandbox.md``.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ledger import events
from ledger.engines import cells
from ledger.engines.duckdb_sandbox import (
    Sandbox,
    connect_sandboxed,
    duckdb_refusals,
    shadow_denied_functions,
)
from ledger.engines.process import (
    KILL_GRACE_S,
    ExecResult,
    ProcessExecutor,
    ProcessWorker,
    Request,
    exit_now,
    failure,
    serve,
    success,
    too_large,
)
from ledger.engines.watchdog import RSS_MARGIN_BYTES, Watchdog, parse_memory_limit

# ExecResult, KILL_GRACE_S and ProcessWorker are also named here for the callers that
# imported them from this module before ``ledger.engines.process`` held them.
__all__ = [
    "KILL_GRACE_S",
    "ExecResult",
    "ProcessWorker",
    "WorkerPool",
    "connect_sandboxed",
    "duckdb_refusals",
    "execute_once",
    "shadow_denied_functions",
]


def _run_query(sandbox: Sandbox, watchdog: Watchdog, req: Request) -> ExecResult:
    """Check one query with DuckDB's parser, then execute it and encode the rows.

    The query connection is kept between queries (its temporary macros shadow the
    denied functions); a statement that passed the check is one SELECT, which
    cannot leave temporary objects behind.
    """
    import duckdb

    start = time.perf_counter_ns()
    refusal = None if req.checked else sandbox.refusal(req.sql)
    if refusal is not None:
        return failure("refused", refusal, (time.perf_counter_ns() - start) // 1000)
    cursor = sandbox.query
    start = time.perf_counter_ns()
    watchdog.arm(cursor.interrupt, req.timeout_s)
    stopped: tuple[str, str] | None = None
    budget = cells.ResultBudget(req.max_result_bytes, req.max_cell_bytes)
    kept: list[list[Any]] = []
    truncated = False
    try:
        cursor.execute(req.sql)
        description = cursor.description or []
        budget.add_columns([(str(d[0]), str(d[1])) for d in description])
        # One row at a time, so a result over the cap is never read whole.
        while description and not budget.over:
            row = cursor.fetchone()
            if row is None:
                break
            if len(kept) == req.max_rows:
                truncated = True  # one row more than max_rows exists; it is not kept
                break
            kept.append(budget.add_row(row))
        if budget.over:
            stopped = too_large(req.max_result_bytes, len(kept), len(description))
    except duckdb.InterruptException:
        stopped = ("timeout", f"query interrupted after {req.timeout_s:g} s")
    except (duckdb.OutOfMemoryException, MemoryError) as exc:
        stopped = ("memory", str(exc) or "out of memory")
    except duckdb.Error as exc:
        stopped = ("sql_runtime", str(exc))
    finally:
        sql_us = (time.perf_counter_ns() - start) // 1000
        interrupted = watchdog.disarm()
    if stopped is not None:
        kind, message = stopped
        if interrupted and kind == "sql_runtime":
            # The interrupt may surface as another error type mid-operator.
            kind, message = "timeout", f"query interrupted after {req.timeout_s:g} s: {message}"
        return failure(kind, message, sql_us)
    columns = tuple(events.Column(name=str(d[0]), type=str(d[1])) for d in description)
    return success(columns, kept, truncated=truncated, sql_us=sql_us, budget=budget)


def _worker_main(conn: Connection, db_path: str, memory_limit: str, parent_pid: int) -> None:
    """Entry point of a DuckDB worker process (see :func:`serve`)."""
    import duckdb

    def open_session() -> tuple[Sandbox, Watchdog]:
        con = connect_sandboxed(db_path, memory_limit=memory_limit)
        watchdog = Watchdog(parent_pid)
        # No address-space cap here (the SQLite and PostgreSQL workers have one): DuckDB
        # reserves virtual memory far beyond its memory_limit (the demo's ordinary
        # answers reach 3 GB of address space from 115 MB), so a cap at the size once
        # ready plus the limit made plain joins fail as "Out of Memory" and changed
        # scores with the machine. What is bounded is resident memory: DuckDB's
        # memory_limit does not cover every allocation (a 1.5 GB printf value, a
        # recursive CTE's working set), the watchdog's bound does.
        watchdog.bound_memory(parse_memory_limit(memory_limit) + RSS_MARGIN_BYTES)
        watchdog.start()
        sandbox = Sandbox(con)
        return sandbox, watchdog

    serve(
        conn,
        open_session,
        lambda session, req: _run_query(session[0], session[1], req),
        lambda session: session[0].check.close(),
        (duckdb.Error,),
    )
    exit_now()


class WorkerPool(ProcessExecutor):
    """DuckDB's executor: persistent sandboxed workers over one bank database
    (:class:`ProcessExecutor`; the worker: :func:`_worker_main`).

    Raises:
        SandboxError: the database is missing or cannot be opened read-only.
    """

    remembers_checks = True

    def __init__(
        self,
        db_path: Path,
        *,
        size: int = 1,
        timeout_s: float = 5.0,
        memory_limit: str = "512MB",
    ) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        db_path = self._existing(db_path)
        parse_memory_limit(memory_limit)  # a bad value is the caller's error, here
        self._memory_limit = memory_limit
        super().__init__(db_path, size=size, timeout_s=timeout_s)

    def _spawn(self) -> ProcessWorker:
        return ProcessWorker(
            self._ctx,
            _worker_main,
            (str(self._database), self._memory_limit, os.getpid()),
            database=self._database,
            name="caseledger-sql-worker",
            open_hint="build the bank first, and make sure no other process has it open for "
            "writing",
        )


def execute_once(
    db_path: Path,
    sql: str,
    *,
    max_rows: int,
    timeout_s: float = 5.0,
    memory_limit: str = "512MB",
) -> ExecResult:
    """Run one query in a freshly spawned worker that is gone when this returns."""
    with WorkerPool(db_path, size=1, timeout_s=timeout_s, memory_limit=memory_limit) as pool:
        return pool.execute(sql, max_rows=max_rows)
