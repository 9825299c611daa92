"""The SQLite engine: a bank as a SQLite file, a model's SQL in a locked-down worker process.

Build: the bank's schema and seed (SQLite SQL; a DuckDB bank is transpiled
first) run statement by statement into a temporary file beside the target,
which is then linked into place (never a half-built file under the final name,
never an overwrite). A bank that ships its data as a SQLite file is copied with
the backup API (:func:`build_from_file`). :func:`canonical_digest` hashes the
schema and the rows in a canonical order, so it does not depend on page layout,
insert order or VACUUM.

Every connection that runs a query (the gold's in-process one and the
worker's) is opened by :func:`open_sandboxed`: the file as a read-only,
immutable URI, no ATTACH (limit 0), ``query_only``, ``trusted_schema=OFF``,
temporary b-trees in memory, extension loading off, and an authorizer that
allows only SELECT, reads of the bank's own tables and views, recursive CTEs
and calls of the functions the allow-list allows (``sqlite_catalog``). The
text must also start with SELECT, WITH or VALUES (the authorizer has no code
for VACUUM, so ``VACUUM INTO 'file'`` is refused by this check) and be one
statement. A refusal is the ``refused`` failure kind: nothing ran.

The executor runs one ``spawn`` worker process per executor, spoken to over a
pipe in msgpack. In the worker, ``PRAGMA hard_heap_limit`` bounds SQLite's
memory (``memory``), a progress handler stops a query at its deadline
(``timeout``), and the parent SIGKILLs a worker that does not answer within a
grace. SQLite has no result types, so a column's type is derived from its
values by one rule (:func:`column_plan`, docs/engines.md "SQLite"), the same
for the gold and the model's result.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import multiprocessing
import os
import re
import signal
import sqlite3
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from ledger.codec import canonical_json
from ledger.engines.base import EngineQueryError
from ledger.engines.sqlite_catalog import allowed_calls, catalog, fold
from ledger.errors import BankError, SandboxError, UsageError
from ledger.events import Column, TableSchema
from ledger.harness import cells
from ledger.harness.worker import KILL_GRACE_S, STARTUP_TIMEOUT_S, ExecResult

__all__ = [
    "DIALECT_NOTES",
    "SQLiteEngine",
    "SQLiteExecutor",
    "build_from_file",
    "build_sql",
    "canonical_digest",
    "column_plan",
    "first_keyword",
    "open_sandboxed",
    "parse_memory_limit",
    "split_statements",
    "statement_refusal",
    "table_schemas",
    "typed_result",
]

DIALECT_NOTES = (
    "The database is SQLite {version}: write SQLite SQL. Dates and times are TEXT "
    "('YYYY-MM-DD HH:MM:SS'), handled with date(), datetime() and strftime('%Y-%m', ts) "
    "(there is no date_trunc or EXTRACT); `/` between two integers is integer division "
    "(7 / 2 = 3), so write `x * 1.0 / y` for a fraction; REAL is an 8-byte double; "
    "'now', 'localtime' and random() are not allowed (an answer must not depend on when "
    "or where it runs)."
)

# How many SQLite virtual machine steps pass between two deadline checks.
_PROGRESS_STEPS = 10_000
# How often an idle worker checks that its parent is still alive.
_PARENT_CHECK_S = 0.25
_QUERY_WORDS = frozenset({"select", "with", "values"})

# ------------------------------------------------------------------------- SQL text

# Quoted strings and identifiers, comments and the statement separator; everything else
# is skipped by the search. An unterminated quote or comment runs to the end.
_TOKENS = re.compile(
    r"'[^']*(?:''[^']*)*(?:'|\Z)"
    r'|"[^"]*(?:""[^"]*)*(?:"|\Z)'
    r"|`[^`]*(?:``[^`]*)*(?:`|\Z)"
    r"|\[[^\]]*(?:\]|\Z)"
    r"|--[^\n]*"
    r"|/\*.*?(?:\*/|\Z)"
    r"|;",
    re.DOTALL,
)
_BLANK = re.compile(r"(?:\s+|--[^\n]*|/\*.*?(?:\*/|\Z))*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")


def first_keyword(sql: str) -> str | None:
    """The first word of ``sql`` after blanks and comments, lower-cased; None if there is none.

    >>> first_keyword("  -- the total\\n/* x */ SELECT 1"), first_keyword("-- nothing")
    ('select', None)
    """
    start = _BLANK.match(sql)
    word = _WORD.match(sql, start.end() if start else 0)
    return word.group(0).lower() if word else None


def split_statements(sql: str) -> list[tuple[int, str]]:
    """(line, text) of every statement of a script, at SQLite's own statement ends.

    Separators inside strings, quoted names and comments do not count, and a
    CREATE TRIGGER body stays whole (``sqlite3.complete_statement`` decides).
    Pieces without a keyword (blanks, comments, a lone ``;``) are dropped.

    >>> split_statements("SELECT ';' AS a; -- done;\\nSELECT 2")
    [(1, "SELECT ';' AS a;"), (2, ' -- done;\\nSELECT 2')]
    """
    out: list[tuple[int, str]] = []

    def emit(begin: int, text: str) -> None:
        blank = _BLANK.match(text)
        offset = blank.end() if blank else 0
        if _WORD.match(text, offset) or (offset < len(text) and text[offset] != ";"):
            out.append((sql.count("\n", 0, begin + offset) + 1, text))

    start = 0
    for token in _TOKENS.finditer(sql):
        if token.group(0) != ";":
            continue
        chunk = sql[start : token.end()]
        if sqlite3.complete_statement(chunk):
            emit(start, chunk)
            start = token.end()
    if start < len(sql):
        emit(start, sql[start:])
    return out


def statement_refusal(sql: str) -> str | None:
    """Why ``sql`` is not a query the worker may run (before SQLite sees it), or None.

    Only the first keyword is checked here (SELECT, WITH or VALUES: the
    authorizer has no code for VACUUM or EXPLAIN); that it is one statement is
    checked by ``sqlite3`` itself, and everything inside by the authorizer.

    >>> statement_refusal("VACUUM INTO '/tmp/x'")
    'only a query may run (SELECT, WITH or VALUES), not VACUUM'
    """
    word = first_keyword(sql)
    if word is None:
        return "there is no statement"
    if word not in _QUERY_WORDS:
        return f"only a query may run (SELECT, WITH or VALUES), not {word.upper()}"
    return None


# -------------------------------------------------------------------- typed results

Coerce = Callable[[Any], Any]


def _as_double(value: Any) -> Any:
    return float(value) if type(value) is int else value


def _as_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return str(cells.encode_cell(value))


def _plan_one(kinds: set[type]) -> tuple[str, Coerce | None]:
    kinds.discard(type(None))
    if not kinds or kinds == {str}:
        return "VARCHAR", None
    if kinds == {int}:
        return "BIGINT", None
    if kinds == {float}:
        return "DOUBLE", None
    if kinds == {int, float}:
        return "DOUBLE", _as_double
    if kinds == {bytes}:
        return "BLOB", None
    return "VARCHAR", _as_text


def column_plan(rows: Sequence[Sequence[Any]], width: int) -> list[tuple[str, Coerce | None]]:
    """The type of each result column, derived from its values, and how to coerce its cells.

    SQLite has no result types, only a storage class per value. The rule
    (docs/engines.md "SQLite"): only integers -> BIGINT; only reals, or
    integers and reals -> DOUBLE (integers become reals); only text -> VARCHAR;
    only blobs -> BLOB; any other mix -> VARCHAR (numbers and blobs become the
    text of their encoded cell); no value but NULL -> VARCHAR. The gold and the
    worker both use this function, so one result gets one type whoever runs it.

    >>> [t for t, _ in column_plan([(1, 1, "a", None), (2, 0.5, 3, None)], 4)]
    ['BIGINT', 'DOUBLE', 'VARCHAR', 'VARCHAR']
    """
    if not rows:
        return [("VARCHAR", None)] * width
    return [_plan_one(set(map(type, column))) for column in zip(*rows, strict=True)]


def typed_result(
    names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
    """Typed columns and the rows with each column's cells coerced (:func:`column_plan`)."""
    plan = column_plan(rows, len(names))
    columns = tuple(Column(name=n, type=t) for n, (t, _) in zip(names, plan, strict=True))
    coercions = [(i, fn) for i, (_, fn) in enumerate(plan) if fn is not None]
    if not coercions:
        return columns, [tuple(r) for r in rows]
    out = []
    for row in rows:
        cells_ = list(row)
        for i, fn in coercions:
            cells_[i] = fn(cells_[i])
        out.append(tuple(cells_))
    return columns, out


# --------------------------------------------------------------------------- opening

_ACTIONS = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_")
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_", "SQLITE_ALTER_"))
    or name
    in {
        *("SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_PRAGMA", "SQLITE_INSERT", "SQLITE_UPDATE"),
        *("SQLITE_DELETE", "SQLITE_TRANSACTION", "SQLITE_ANALYZE"),
        *("SQLITE_REINDEX", "SQLITE_SAVEPOINT"),
    }
}


class _Authorizer:
    """SQLite's authorizer callback: allows a read-only query over the bank, nothing else.

    Every denial is recorded in ``denied`` (SQLite itself only says "not
    authorized"), so the refusal names what was refused.
    """

    def __init__(self, tables: frozenset[str], calls: frozenset[str]) -> None:
        self.tables = tables
        self.calls = calls
        self.denied: list[str] = []

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            name = fold(arg1 or "")
            if name in self.tables and db in (None, "main"):
                return sqlite3.SQLITE_OK
            # A CTE read without a column (count(*) FROM cte) arrives as an unqualified read
            # of its name. Besides the bank's tables the database holds only sqlite_*
            # tables (no ATTACH, no TEMP objects), so any other name is a CTE.
            if arg2 == "" and db is None and not name.startswith("sqlite_"):
                return sqlite3.SQLITE_OK
            self.denied.append(f"reading {arg1} is not allowed (not a table of the bank)")
        elif action == sqlite3.SQLITE_FUNCTION:
            name = arg2 or ""
            if fold(name) in self.calls:
                return sqlite3.SQLITE_OK
            self.denied.append(f"function {name}() {catalog().call_refusal(name)}")
        else:
            what = _ACTIONS.get(action, f"action {action}")
            shown = f"{what} {arg1}" if arg1 else what
            self.denied.append(f"{shown} is not allowed (only a query may run)")
        return sqlite3.SQLITE_DENY

    def refusal(self) -> str:
        """The denials of the last statement as one message."""
        return "refused by the SQLite authorizer: " + "; ".join(dict.fromkeys(self.denied))


def _uri(path: Path) -> str:
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"


def open_sandboxed(
    path: Path, *, heap_limit: int | None = None
) -> tuple[sqlite3.Connection, _Authorizer]:
    """Open a bank database read-only with the worker's locked-down settings, in this process.

    ``heap_limit`` (bytes) sets ``PRAGMA hard_heap_limit``, which holds for the
    whole process: only the worker passes it. Called without it this is the
    gold's connection (the same settings and authorizer, no process boundary).
    """
    con = sqlite3.connect(_uri(path), uri=True, isolation_level=None, check_same_thread=False)
    try:
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        if heap_limit is not None:
            con.execute(f"PRAGMA hard_heap_limit={int(heap_limit)}")
        con.execute("PRAGMA temp_store=MEMORY")
        con.execute("PRAGMA query_only=ON")
        con.execute("PRAGMA trusted_schema=OFF")
        rows = con.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
        ).fetchall()
        if hasattr(con, "enable_load_extension"):
            con.enable_load_extension(False)
        authorizer = _Authorizer(frozenset(fold(str(r[0])) for r in rows), allowed_calls())
        con.set_authorizer(authorizer)
    except BaseException:
        con.close()
        raise
    return con, authorizer


def parse_memory_limit(text: str) -> int:
    """Bytes of a memory limit written as DuckDB reads it (KB, MB, GB: powers of 1000;
    KiB, MiB, GiB: of 1024; no unit: bytes).

    >>> parse_memory_limit("512MB"), parse_memory_limit("64 MiB")
    (512000000, 67108864)
    """
    units = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
    units |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if found is None or found.group(2).lower() not in units:
        raise UsageError(f"memory limit {text!r} is not a size", hint="write it like 512MB or 1GiB")
    size = int(float(found.group(1)) * units[found.group(2).lower()])
    if size < 1024 * 1024:
        raise UsageError(f"memory limit {text!r} is below 1 MiB", hint="give SQLite at least 1MiB")
    return size


# ---------------------------------------------------------------- build, tables, digest


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _publish(tmp: Path, target: Path) -> None:
    """Put the finished file under its final name; never replace an existing file."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise BankError(f"refusing to overwrite {target}") from None
    except OSError:  # no hard links on this file system
        if target.exists():
            raise BankError(f"refusing to overwrite {target}") from None
        os.replace(tmp, target)


@contextlib.contextmanager
def _temporary_beside(target: Path) -> Iterator[Path]:
    if target.exists():
        raise BankError(f"refusing to overwrite {target}", hint="remove it or build elsewhere")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def build_sql(schema_sql: str, seed_sql: str, target: Path) -> None:
    """Run schema.sql then seed.sql (SQLite SQL) into a new database file at ``target``.

    One transaction, statement by statement, into a temporary file beside
    ``target`` that is linked into place when complete.

    Raises:
        BankError: ``target`` exists, or a statement fails (naming the file,
            the statement's number and line, and SQLite's message).
    """
    target = Path(target)
    with _temporary_beside(target) as tmp:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("BEGIN")
            for name, text in (("schema.sql", schema_sql), ("seed.sql", seed_sql)):
                for number, (line, statement) in enumerate(split_statements(text), 1):
                    try:
                        con.execute(statement)
                    except sqlite3.Error as exc:
                        shown = " ".join(statement.split())[:80]
                        raise BankError(
                            f"{target}: {name}: statement {number} (line {line}): "
                            f"SQLite error: {_first_line(exc)} (in: {shown})",
                            hint=f"fix {name} so it runs on SQLite {sqlite3.sqlite_version} "
                            "(a bank written for DuckDB is rewritten with sqlglot first: "
                            "check the statement it wrote)",
                        ) from None
            con.execute("COMMIT")
        finally:
            con.close()
        _publish(tmp, target)


def build_from_file(source: Path, target: Path) -> None:
    """Copy an existing SQLite database (a bank's ``data.sqlite``) to ``target``.

    Uses SQLite's backup API (a consistent copy whatever the source's journal
    mode), checks the copy with ``PRAGMA quick_check`` and links it into place.

    Raises:
        BankError: the source is missing or not a sound SQLite database, or
            ``target`` exists.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise BankError(f"{source}: SQLite database not found", hint="add data.sqlite to the bank")
    with _temporary_beside(target) as tmp:
        try:
            src = sqlite3.connect(Path(source).resolve().as_uri() + "?mode=ro", uri=True)
            try:
                dst = sqlite3.connect(tmp)
                try:
                    src.backup(dst)
                    check = dst.execute("PRAGMA quick_check").fetchall()
                finally:
                    dst.close()
            finally:
                src.close()
        except sqlite3.Error as exc:
            raise BankError(
                f"{source}: cannot read it as a SQLite database: {_first_line(exc)}",
                hint="data.sqlite must be a SQLite 3 database file",
            ) from None
        if check != [("ok",)]:
            raise BankError(
                f"{source}: the SQLite database is damaged: {check[0][0]}",
                hint="rebuild data.sqlite",
            )
        _publish(tmp, target)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _objects(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(name, type, sql) of every table and view of the bank, sorted by name."""
    rows = con.execute(
        "SELECT name, type, coalesce(sql, '') FROM sqlite_schema "
        "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    return sorted((str(n), str(t), str(s)) for n, t, s in rows)


def _columns(con: sqlite3.Connection, name: str) -> tuple[Column, ...]:
    rows = con.execute(
        "SELECT name, type FROM pragma_table_info(?) ORDER BY cid", (name,)
    ).fetchall()
    return tuple(Column(name=str(c), type=str(t).upper()) for c, t in rows)


def table_schemas(con: sqlite3.Connection) -> tuple[TableSchema, ...]:
    """Every table and view of the bank, columns in order with their declared types
    (upper-cased; "" where SQLite has none), sorted by name."""
    return tuple(TableSchema(name=n, columns=_columns(con, n)) for n, _, _ in _objects(con))


def _open_trusted(path: Path) -> sqlite3.Connection:
    path = Path(path)
    if not path.is_file():
        raise BankError(f"bank database {path} is missing", hint="publish the bank again")
    return sqlite3.connect(_uri(path), uri=True, isolation_level=None)


_SAFE_INT = 2**53


def _tagged(value: Any) -> Any:
    """A cell for the canonical dump: the storage class stays visible (1, 1.0 and '1.0'
    differ), no floats."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT < value < _SAFE_INT else {"integer": str(value)}
    if isinstance(value, float):
        return {"real": repr(value)}
    return {"blob": bytes(value).hex()}


def canonical_digest(path: Path) -> str:
    """``sha256:<hex>`` of a canonical dump of a SQLite bank database.

    The dump is the schema (tables and views sorted by name; a table's columns
    in order with their declared types, a view's SQL text) followed by each
    table's rows, every cell tagged with its storage class, sorted by their
    canonical JSON. So it does not depend on page layout, insert order, rowids
    that are not columns, VACUUM or a column's collation.
    """
    con = _open_trusted(path)
    try:
        objects = _objects(con)
        schema = [
            [n, kind, sql if kind == "view" else [[c.name, c.type] for c in _columns(con, n)]]
            for n, kind, sql in objects
        ]
        hasher = hashlib.sha256(canonical_json({"format": "caseledger-sqlite-dump-1"}))
        hasher.update(canonical_json(schema))
        for name, kind, _ in objects:
            if kind != "table":
                continue
            # A table name from the database's own catalog, quoted as an identifier.
            cursor = con.execute(f"SELECT * FROM {_quote(name)}")  # noqa: S608
            dumped = sorted(canonical_json([_tagged(v) for v in row]) for row in cursor)
            hasher.update(b"\n" + canonical_json([name, len(dumped)]))
            for row in dumped:
                hasher.update(b"\n" + row)
    finally:
        con.close()
    return "sha256:" + hasher.hexdigest()


# ------------------------------------------------------------------------ the worker


class _Job(msgspec.Struct, frozen=True):
    sql: str
    max_rows: int
    timeout_s: float
    max_result_bytes: int
    max_cell_bytes: int


class _Answer(msgspec.Struct, frozen=True):
    # kind: ready | open_failed | result | fault
    kind: str
    message: str | None = None
    result: ExecResult | None = None


def _failure(kind: str, message: str, sql_us: int) -> ExecResult:
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


class _Session:
    """The worker's connection, its authorizer and the deadline its progress handler checks."""

    def __init__(self, con: sqlite3.Connection, authorizer: _Authorizer, heap_limit: int) -> None:
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


def _classify(session: _Session, exc: BaseException, job: _Job) -> tuple[str, str]:
    if session.fired:
        return "timeout", f"query interrupted after {job.timeout_s:g} s"
    if isinstance(exc, MemoryError) or "too big" in str(exc):
        shown = f"{session.heap_limit / 1e6:g} MB"
        return "memory", f"out of memory: the query needs more than SQLite's {shown} heap limit"
    if session.authorizer.denied:
        return "refused", session.authorizer.refusal()
    if isinstance(exc, sqlite3.ProgrammingError):
        # sqlite3's own check: "You can only execute one statement at a time", a NUL, ...
        return "refused", f"refused by the SQLite worker: {_first_line(exc)}"
    return "sql_runtime", _first_line(exc)


def _run_job(session: _Session, job: _Job) -> ExecResult:
    """Check one statement, run it under the deadline and the caps, type and encode its rows."""
    start = time.perf_counter_ns()
    why = statement_refusal(job.sql)
    if why is not None:
        message = f"refused by the SQLite worker: {why}"
        return _failure("refused", message, (time.perf_counter_ns() - start) // 1000)
    session.authorizer.denied.clear()
    session.fired = False
    budget = cells.ResultBudget(job.max_result_bytes, job.max_cell_bytes)
    raw: list[tuple[Any, ...]] = []
    kept: list[list[Any]] = []
    names: list[str] = []
    truncated = False
    failure: tuple[str, str] | None = None
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
        failure = _classify(session, exc, job)
    finally:
        session.deadline = math.inf
        if cursor is not None:
            with contextlib.suppress(sqlite3.Error, MemoryError):
                cursor.close()
        sql_us = (time.perf_counter_ns() - start) // 1000
    if failure is None and not names:
        failure = ("refused", "refused by the SQLite worker: the statement returns no rows")
    plan = column_plan(raw, len(names)) if failure is None else []
    for type_name, _ in plan:
        budget.used += cells.stored_size(type_name)
    if failure is None and budget.over:
        failure = (
            "result_too_large",
            f"the result is over the {job.max_result_bytes}-byte cap "
            f"(stopped reading after {len(kept)} rows of {len(names)} columns)",
        )
    if failure is not None:
        return _failure(*failure, sql_us)
    for i, (_, coerce) in enumerate(plan):
        if coerce is not None:
            for row_raw, row_kept in zip(raw, kept, strict=True):
                cell = cells.encode_cell(coerce(row_raw[i]))
                row_kept[i] = cells.truncate_cell(cell, job.max_cell_bytes)[0]
    columns = tuple(Column(name=n, type=t) for n, (t, _) in zip(names, plan, strict=True))
    rows = tuple(tuple(r) for r in kept)
    return ExecResult(
        ok=True,
        error_kind=None,
        error_message=None,
        columns=columns,
        rows=rows,
        row_count=len(rows),
        truncated=truncated,
        sql_us=sql_us,
        cells_truncated=budget.cells_truncated or msgspec.UNSET,
    )


def _watch_parent(parent_pid: int) -> None:
    """Exit the worker once its parent is gone (the executor owns us)."""
    while True:
        time.sleep(_PARENT_CHECK_S)
        if os.getppid() != parent_pid:
            os._exit(3)


def _send_or_quit(conn: Connection, payload: bytes) -> bool:
    try:
        conn.send_bytes(payload)
    except OSError:
        return False  # nobody to answer: end quietly, the parent reports the interruption
    return True


def _child_main(conn: Connection, db_path: str, heap_limit: int, parent_pid: int) -> None:
    """Entry point of a worker process: open, report ready, serve until EOF."""
    # Ctrl-C belongs to the harness; it closes the executor, which ends us through EOF.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # 'localtime' and 'utc' read the process's zone: the same in every worker.
    os.environ["TZ"] = "UTC"
    time.tzset()
    encoder = msgspec.msgpack.Encoder()
    try:
        con, authorizer = open_sandboxed(Path(db_path), heap_limit=heap_limit)
    except (sqlite3.Error, OSError) as exc:
        _send_or_quit(conn, encoder.encode(_Answer(kind="open_failed", message=str(exc))))
        return
    session = _Session(con, authorizer, heap_limit)
    threading.Thread(
        target=_watch_parent, args=(parent_pid,), name="caseledger-parent-watch", daemon=True
    ).start()
    if not _send_or_quit(conn, encoder.encode(_Answer(kind="ready"))):
        return
    decoder: msgspec.msgpack.Decoder[_Job] = msgspec.msgpack.Decoder(_Job)
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):
            break
        job = decoder.decode(raw)
        try:
            answer = _Answer(kind="result", result=_run_job(session, job))
        except Exception:
            # A bug in the worker, not a model failure: hand the traceback to the parent.
            answer = _Answer(kind="fault", message=traceback.format_exc())
        if not _send_or_quit(conn, encoder.encode(answer)):
            break
    con.close()


# ------------------------------------------------------------------------ parent side

_DECODER: msgspec.msgpack.Decoder[_Answer] = msgspec.msgpack.Decoder(_Answer)
_ENCODER = msgspec.msgpack.Encoder()


class _Child:
    """The parent's handle on one worker process."""

    def __init__(self, ctx: Any, database: Path, heap_limit: int) -> None:
        parent_end, child_end = ctx.Pipe(duplex=True)
        self.process = ctx.Process(
            target=_child_main,
            args=(child_end, str(database), heap_limit, os.getpid()),
            name="caseledger-sqlite-worker",
            daemon=True,
        )
        self.process.start()
        child_end.close()  # so that our end sees EOF when the child dies
        self.conn: Connection = parent_end
        self.database = database
        self.ready = False

    def wait_ready(self, timeout_s: float) -> str | None:
        """Wait for the child to open the database; None when ready, else why not."""
        try:
            if not self.conn.poll(timeout_s):
                return f"worker did not start within {timeout_s:g} s"
            answer = _DECODER.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            return f"worker died while starting ({self._exit_text()})"
        if answer.kind == "open_failed":
            raise SandboxError(
                f"{self.database}: cannot open the SQLite bank database read-only: "
                f"{answer.message}",
                hint="build the bank first (a SQLite 3 database file)",
            )
        self.ready = True
        return None

    def run(self, job: _Job, grace_s: float) -> tuple[ExecResult, bool]:
        """Send one job and wait for its result; returns (result, worker still usable)."""
        if not self.ready:
            why = self.wait_ready(STARTUP_TIMEOUT_S)
            if why is not None:
                return _failure("worker_crash", why, 0), False
        start = time.perf_counter_ns()
        try:
            self.conn.send_bytes(_ENCODER.encode(job))
            if not self.conn.poll(job.timeout_s + grace_s):
                self.kill()
                message = (
                    f"query did not stop within {job.timeout_s:g} s + {grace_s:g} s grace; "
                    "worker killed"
                )
                us = (time.perf_counter_ns() - start) // 1000
                return _failure("timeout", message, us), False
            answer = _DECODER.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            message = f"worker process died while running the query ({self._exit_text()})"
            us = (time.perf_counter_ns() - start) // 1000
            return _failure("worker_crash", message, us), False
        if answer.kind == "fault":
            raise SandboxError(f"the SQLite worker failed (a harness bug):\n{answer.message}")
        if answer.result is None:
            raise SandboxError("the SQLite worker answered without a result (a harness bug)")
        return answer.result, True

    def _exit_text(self) -> str:
        self.process.join(0.5)
        code = self.process.exitcode
        if code is None:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

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


class SQLiteExecutor:
    """Runs a model's SQL on a SQLite bank in one sandboxed worker process.

    Queries from several threads take turns. A worker that was killed (a
    query past its timeout and grace) or crashed is replaced by a fresh one.
    Use as a context manager, or call :meth:`close`: no worker outlives it.

    Raises:
        SandboxError: the database is missing or cannot be opened read-only.
        UsageError: ``memory_limit`` is not a size.
    """

    def __init__(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> None:
        database = Path(database)
        if not database.is_file():
            raise SandboxError(
                f"{database}: bank database not found", hint="build the bank before running it"
            )
        self._database = database
        self._timeout_s = timeout_s
        self._heap_limit = parse_memory_limit(memory_limit)
        self._ctx = multiprocessing.get_context("spawn")
        self._turn = threading.Lock()  # one query at a time
        self._state = threading.Lock()  # guards _child and _closed
        self._closed = False
        self._child: _Child | None = self._spawn()
        try:
            why = self._child.wait_ready(STARTUP_TIMEOUT_S)
            if why is not None:
                raise SandboxError(f"{database}: SQLite worker failed to start: {why}")
        except BaseException:
            self.close()
            raise

    def _spawn(self) -> _Child:
        return _Child(self._ctx, self._database, self._heap_limit)

    def __enter__(self) -> SQLiteExecutor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def pids(self) -> tuple[int, ...]:
        """Process id of the current worker (for monitoring and tests)."""
        with self._state:
            child = self._child
        return () if child is None or child.process.pid is None else (child.process.pid,)

    def execute(
        self,
        sql: str,
        *,
        max_rows: int,
        max_result_bytes: int = cells.DEFAULT_MAX_RESULT_BYTES,
        max_cell_bytes: int = cells.DEFAULT_MAX_CELL_BYTES,
    ) -> ExecResult:
        """Run one statement in the worker; every failure is an ExecResult (kinds as
        ``ledger.harness.worker.ERROR_KINDS``), never an exception. Never retries.

        Fetches at most ``max_rows + 1`` rows; ``truncated`` says more than
        ``max_rows`` existed. Cells over ``max_cell_bytes`` are cut; a result
        over ``max_result_bytes`` is ``result_too_large``.
        """
        if max_rows < 0:
            raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        job = _Job(sql, max_rows, self._timeout_s, max_result_bytes, max_cell_bytes)
        with self._turn:
            with self._state:
                if self._closed:
                    raise SandboxError("the SQLite executor is closed")
                if self._child is None:
                    self._child = self._spawn()
                child = self._child
            result, usable = child.run(job, KILL_GRACE_S)
            if not usable:
                child.stop()
                with self._state:
                    # A fresh worker starts now, ready by the next query.
                    self._child = None if self._closed else self._spawn()
        return result

    def close(self) -> None:
        """Stop the worker and reap it. Safe to call twice."""
        with self._state:
            self._closed = True
            child, self._child = self._child, None
        if child is not None:
            child.stop()


class SQLiteEngine:
    """SQLite as linked into Python's ``sqlite3``, in a locked-down worker process."""

    name = "sqlite"
    dialect = "sqlite"

    def version(self) -> str:
        """The linked SQLite library's version (e.g. ``3.40.1``)."""
        return sqlite3.sqlite_version

    def dialect_notes(self) -> str:
        """What the prompt says about the SQL to write."""
        return DIALECT_NOTES.format(version=sqlite3.sqlite_version)

    def build(self, schema_sql: str, seed_sql: str, target: Path) -> None:
        """Build the database file at ``target`` (see :func:`build_sql`)."""
        build_sql(schema_sql, seed_sql, target)

    def tables(self, database: Path) -> tuple[TableSchema, ...]:
        """The tables and views of the built database (:func:`table_schemas`)."""
        con = _open_trusted(database)
        try:
            return table_schemas(con)
        finally:
            con.close()

    def reference(
        self, database: Path, sql: str
    ) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
        """Run one reference query on the gold's sandboxed connection: typed columns and
        every row (coerced as :func:`column_plan` says)."""
        count = len(split_statements(sql))
        if count != 1:
            raise EngineQueryError(f"must be exactly one statement, found {count}")
        why = statement_refusal(sql)
        if why is not None:
            raise EngineQueryError(why)
        if not Path(database).is_file():
            raise BankError(f"bank database {database} is missing", hint="publish the bank again")
        con, authorizer = open_sandboxed(Path(database))
        try:
            cursor = con.execute(sql)
            names = [str(d[0]) for d in cursor.description or ()]
            rows = cursor.fetchall()
        except sqlite3.Error as exc:
            if authorizer.denied:
                raise EngineQueryError(authorizer.refusal()) from None
            raise EngineQueryError(_first_line(exc)) from None
        finally:
            con.close()
        if not names:
            raise EngineQueryError("does not return rows (it must be a query)")
        return typed_result(names, rows)

    def executor(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> SQLiteExecutor:
        """A sandboxed executor over ``database`` (:class:`SQLiteExecutor`)."""
        return SQLiteExecutor(database, timeout_s=timeout_s, memory_limit=memory_limit)
