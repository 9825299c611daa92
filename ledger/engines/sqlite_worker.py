"""The SQLite executor: a model's SQL in one locked-down ``spawn`` worker process per executor.

The parent talks to the worker over a pipe in msgpack (never pickle), as with
the DuckDB worker. In the worker the bank is opened by
:func:`ledger.engines.sqlite_sandbox.open_sandboxed` after ``PRAGMA
hard_heap_limit`` bounds SQLite's memory (``memory``); a progress handler stops
a query at its deadline (``timeout``); the parent SIGKILLs a worker that does
not answer within a grace and starts a fresh one. Rows are read one at a time
under the result caps of ``ledger.engines.cells``, typed by the one rule of
``sqlite_sandbox.column_plan`` and encoded. Failures are data
(:class:`ledger.engines.process.ExecResult`); a refusal (the text check, the
one-statement check, the authorizer) is ``refused``: nothing ran.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sqlite3
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ledger.engines import cells
from ledger.engines.process import (
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
from ledger.engines.sqlite_sandbox import (
    Authorizer,
    column_plan,
    open_sandboxed,
    parse_memory_limit,
    statement_refusal,
)
from ledger.engines.watchdog import Watchdog, limit_address_space
from ledger.errors import first_line
from ledger.events import Column

__all__ = ["SQLiteExecutor"]

# How many SQLite virtual machine steps pass between two deadline checks.
_PROGRESS_STEPS = 10_000


class _Session:
    """The worker's connection, its authorizer and the deadline its progress handler checks."""

    def __init__(self, con: sqlite3.Connection, authorizer: Authorizer, heap_limit: int) -> None:
        self.con = con
        self.authorizer = authorizer
        self.heap_limit = heap_limit
        self.deadline = math.inf
        self.fired = False
        con.set_progress_handler(self._tick, _PROGRESS_STEPS)

    def _tick(self) -> int:
        if time.monotonic() >= self.deadline:
            self.fired = True
            return 1  # SQLite stops the statement: "interrupted"
        return 0


def _classify(session: _Session, exc: BaseException, job: Request) -> tuple[str, str]:
    if session.fired:
        return "timeout", f"query interrupted after {job.timeout_s:g} s"
    if isinstance(exc, MemoryError) or "too big" in str(exc):
        shown = f"{session.heap_limit / 1e6:g} MB"
        return "memory", f"out of memory: the query needs more than SQLite's {shown} heap limit"
    if session.authorizer.denied:
        return "refused", session.authorizer.refusal()
    if isinstance(exc, sqlite3.ProgrammingError):
        # sqlite3's own check: "You can only execute one statement at a time", a NUL, ...
        return "refused", f"refused by the SQLite worker: {first_line(exc)}"
    if isinstance(exc, sqlite3.OperationalError) and _SYNTAX.match(first_line(exc)):
        # SQLite cannot read the text as a statement: nothing ran. One classification of
        # parse failures on every engine (issue 31): DuckDB's worker parse check and
        # PostgreSQL's 42601 syntax_error are ``refused`` too, so the same syntax error
        # scores the same everywhere.
        return "refused", f"refused by SQLite: {first_line(exc)}"
    return "sql_runtime", first_line(exc)


# SQLite's parser's own messages (sqlite3.OperationalError; SQLite gives them the generic
# SQLITE_ERROR code, so the text is what tells them apart).
_SYNTAX = re.compile(r'near ".*": syntax error$|incomplete input$|unrecognized token: ')


def _run_job(session: _Session, job: Request) -> ExecResult:
    """Check one statement, run it under the deadline and the caps, type and encode its rows."""
    start = time.perf_counter_ns()
    why = statement_refusal(job.sql)
    if why is not None:
        message = f"refused by the SQLite worker: {why}"
        return failure("refused", message, (time.perf_counter_ns() - start) // 1000)
    session.authorizer.denied.clear()
    session.fired = False
    budget = cells.ResultBudget(job.max_result_bytes, job.max_cell_bytes)
    raw: list[tuple[Any, ...]] = []
    kept: list[list[Any]] = []
    names: list[str] = []
    truncated = False
    stopped: tuple[str, str] | None = None
    cursor: sqlite3.Cursor | None = None
    start = time.perf_counter_ns()
    session.deadline = time.monotonic() + job.timeout_s
    try:
        cursor = session.con.execute(job.sql)
        names = [str(d[0]) for d in cursor.description or ()]
        budget.add_columns([(n, "") for n in names])
        # One row at a time, so a result over the cap is never read whole.
        while names and not budget.over:
            row = cursor.fetchone()
            if row is None:
                break
            if len(kept) == job.max_rows:
                truncated = True  # one row more than max_rows exists; it is not kept
                break
            raw.append(row)
            kept.append(budget.add_row(row))
    except (sqlite3.Error, MemoryError) as exc:
        stopped = _classify(session, exc, job)
    finally:
        session.deadline = math.inf
        if cursor is not None:
            with contextlib.suppress(sqlite3.Error, MemoryError):
                cursor.close()
        sql_us = (time.perf_counter_ns() - start) // 1000
    if stopped is None and not names:
        stopped = ("refused", "refused by the SQLite worker: the statement returns no rows")
    plan = column_plan(raw, len(names)) if stopped is None else []
    for type_name, _ in plan:
        budget.used += cells.stored_size(type_name)
    if stopped is None and budget.over:
        stopped = too_large(job.max_result_bytes, len(kept), len(names))
    if stopped is not None:
        return failure(*stopped, sql_us)
    for i, (_, coerce) in enumerate(plan):
        if coerce is not None:
            for row_raw, row_kept in zip(raw, kept, strict=True):
                cell = cells.encode_cell(coerce(row_raw[i]))
                row_kept[i] = cells.truncate_cell(cell, job.max_cell_bytes)[0]
    columns = tuple(Column(name=n, type=t) for n, (t, _) in zip(names, plan, strict=True))
    return success(columns, kept, truncated=truncated, sql_us=sql_us, budget=budget)


def _child_main(conn: Connection, db_path: str, heap_limit: int, parent_pid: int) -> None:
    """Entry point of a worker process (the loop is ``ledger.engines.process.serve``)."""
    # 'localtime' and 'utc' read the process's zone: the same in every worker.
    os.environ["TZ"] = "UTC"
    time.tzset()

    def open_session() -> _Session:
        con, authorizer = open_sandboxed(Path(db_path), heap_limit=heap_limit)
        # Never armed (the progress handler keeps the deadline): it only ends the worker
        # once its parent is gone.
        Watchdog(parent_pid, name="caseledger-parent-watch").start()
        # SQLite's heap limit bounds SQLite; the address space also bounds what Python
        # makes of its values (the same rule as every SQL worker).
        limit_address_space(heap_limit)
        return _Session(con, authorizer, heap_limit)

    serve(
        conn, open_session, _run_job, lambda session: session.con.close(), (sqlite3.Error, OSError)
    )
    exit_now()


# ------------------------------------------------------------------------ parent side


class SQLiteExecutor(ProcessExecutor):
    """Runs a model's SQL on a SQLite bank in one sandboxed worker process.

    The process protocol is :class:`ledger.engines.process.ProcessExecutor`'s:
    queries from several threads take turns; a worker that was killed (a query past
    its timeout and grace) or crashed is replaced by a fresh one; no worker outlives
    :meth:`close` (or the ``with`` block).

    Raises:
        SandboxError: the database is missing or cannot be opened read-only.
        UsageError: ``memory_limit`` is not a size.
    """

    label = "SQLite worker"
    title = "SQLite executor"

    def __init__(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> None:
        database = self._existing(database)
        self._heap_limit = parse_memory_limit(memory_limit)
        super().__init__(database, size=1, timeout_s=timeout_s)

    def _spawn(self) -> ProcessWorker:
        return ProcessWorker(
            self._ctx,
            _child_main,
            (str(self._database), self._heap_limit, os.getpid()),
            database=self._database,
            name="caseledger-sqlite-worker",
            label=self.label,
            engine_name="SQLite",
            open_hint="build the bank first (a SQLite 3 database file)",
        )
