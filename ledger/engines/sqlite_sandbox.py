"""The SQLite sandbox shared by the gold and the worker: SQL text checks, the typing rule,
and the locked-down connection.

Every connection that runs a query on a SQLite bank (the gold's, in-process, and
the worker's, in its own process) is opened by :func:`open_sandboxed`: the file
as a read-only, immutable URI, no ATTACH (limit 0), ``query_only``,
``trusted_schema=OFF``, temporary b-trees in memory, extension loading off, and
an authorizer that allows only SELECT, reads of the bank's own tables and views,
recursive CTEs and calls of the functions the allow-list allows
(``sqlite_catalog``). The text must also start with SELECT, WITH or VALUES
(:func:`statement_refusal`: the authorizer has no code for VACUUM, so
``VACUUM INTO 'file'`` is refused by this check) and be one statement.

SQLite has no result types, so a column's type is derived from its values by
one rule (:func:`column_plan`, docs/engines.md "SQLite"), the same for the gold
and the model's result.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger.engines import cells
from ledger.engines.sqlite_catalog import allowed_calls, catalog, fold
from ledger.engines.watchdog import parse_memory_limit as worker_memory_limit
from ledger.errors import UsageError
from ledger.events import Column

__all__ = [
    "Authorizer",
    "column_plan",
    "first_keyword",
    "open_sandboxed",
    "parse_memory_limit",
    "readonly_uri",
    "split_statements",
    "statement_refusal",
    "typed_result",
]

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


class Authorizer:
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


def readonly_uri(path: Path) -> str:
    """The ``file:`` URI that opens ``path`` read-only and immutable (no locks, no journal)."""
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"


def open_sandboxed(
    path: Path, *, heap_limit: int | None = None
) -> tuple[sqlite3.Connection, Authorizer]:
    """Open a bank database read-only with the worker's locked-down settings, in this process.

    ``heap_limit`` (bytes) sets ``PRAGMA hard_heap_limit``, which holds for the
    whole process: only the worker passes it. Called without it this is the
    gold's connection (the same settings and authorizer, no process boundary).
    """
    con = sqlite3.connect(
        readonly_uri(path), uri=True, isolation_level=None, check_same_thread=False
    )
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
        authorizer = Authorizer(frozenset(fold(str(r[0])) for r in rows), allowed_calls())
        con.set_authorizer(authorizer)
    except BaseException:
        con.close()
        raise
    return con, authorizer


def parse_memory_limit(text: str) -> int:
    """Bytes of a memory limit as every SQL worker reads it (``ledger.engines.process``),
    at least 1 MiB: SQLite's heap limit below that would refuse opening the database.

    >>> parse_memory_limit("512MB"), parse_memory_limit("64 MiB")
    (512000000, 67108864)
    """
    size = worker_memory_limit(text)
    if size < 1024 * 1024:
        raise UsageError(f"memory limit {text!r} is below 1 MiB", hint="give SQLite at least 1MiB")
    return size
