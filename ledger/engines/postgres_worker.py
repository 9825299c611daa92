"""The PostgreSQL SQL worker: the spawn process that runs a model's queries as the reader.

Part of the PostgreSQL engine (``ledger.engines.postgres``; the module doc there says
how a query runs): the result column types, the loaders for values Python cannot hold,
the error classification by SQLSTATE, and the worker's session (one connection, each
query one cursor in a read-only transaction, reset after it). The engine's own reads
(``tables``, ``reference``) use the same types, loaders and cursor.
"""

from __future__ import annotations

import contextlib
import functools
import time
from multiprocessing.connection import Connection
from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format

from ledger.engines import cells
from ledger.engines.process import ExecResult, Request, failure, serve, success, too_large
from ledger.engines.watchdog import Watchdog, limit_address_space
from ledger.errors import first_line
from ledger.events import Column

#: How long after the timeout the worker's watchdog cancels a statement the server did not.
WATCHDOG_SLACK_S = 0.25
CURSOR = "caseledger_query"
_FETCH_FIRST = 64
FETCH_MAX = 1024


# ------------------------------------------------------------------------------ types

# Built-in type OIDs (pg_type.dat; stable across PostgreSQL versions) -> DuckDB-style names
# that ledger.engines.cells.type_class understands.
_BUILTIN_TYPES: dict[int, str] = {
    16: "BOOLEAN",
    17: "BLOB",  # bytea
    18: "VARCHAR",  # "char"
    19: "VARCHAR",  # name
    20: "BIGINT",
    21: "SMALLINT",
    23: "INTEGER",
    25: "VARCHAR",  # text
    26: "UINTEGER",  # oid
    114: "JSON",
    700: "FLOAT",  # real
    701: "DOUBLE",  # double precision
    705: "VARCHAR",  # unknown (an untyped literal)
    1042: "VARCHAR",  # character(n)
    1043: "VARCHAR",  # character varying(n)
    1082: "DATE",
    1083: "TIME",
    1114: "TIMESTAMP",
    1184: "TIMESTAMP WITH TIME ZONE",
    1186: "INTERVAL",
    1266: "TIME WITH TIME ZONE",
    2950: "UUID",
    3802: "JSON",  # jsonb
}
_NUMERIC = 1700


@functools.cache
def _array_elements() -> dict[int, int]:
    """Array type OID -> element type OID, for the built-in types psycopg knows."""
    from psycopg.postgres import types

    return {t.array_oid: t.oid for t in types if t.array_oid}


def _numeric_name(typmod: int) -> str:
    if typmod < 4:
        return "DECIMAL"  # unconstrained numeric (e.g. SUM of a numeric column)
    packed = typmod - 4
    precision = (packed >> 16) & 0xFFFF
    scale = packed & 0x7FF
    if scale & 0x400:  # an 11-bit signed scale (negative scales exist since PostgreSQL 15)
        scale -= 0x800
    return f"DECIMAL({precision},{scale})"


def column_type(oid: int, typmod: int = -1) -> str | None:
    """The type name of a built-in PostgreSQL type (OID and typmod), None when not built in.

    The one mapping of the engine: the gold, ``tables`` and the executor all use
    it (with :func:`TypeNames` for types it does not know).

    >>> column_type(23), column_type(1700, (12 << 16 | 2) + 4), column_type(1184)
    ('INTEGER', 'DECIMAL(12,2)', 'TIMESTAMP WITH TIME ZONE')
    >>> column_type(1007), column_type(1700), column_type(99999) is None
    ('INTEGER[]', 'DECIMAL', True)
    """
    if oid == _NUMERIC:
        return _numeric_name(typmod)
    name = _BUILTIN_TYPES.get(oid)
    if name is not None:
        return name
    element = _array_elements().get(oid)
    if element is not None:
        inner = column_type(element, typmod)
        return None if inner is None else inner + "[]"
    return None


class TypeNames:
    """Column type names for one database: built-ins by OID, the rest looked up in pg_type.

    An enum is ``VARCHAR`` (its values are labels), a domain is its base type,
    anything else (an array of an enum, say, whose cells arrive as PostgreSQL's text
    ``{sad,ok}``) is PostgreSQL's own ``format_type`` in upper case (``type_class``
    then compares it only with itself).
    """

    _DEPTH = 8  # a domain over a domain over ... ends long before this

    def __init__(self) -> None:
        self._rows: dict[int, tuple[str, int, int, int, str, str] | None] = {}

    def names(self, con: psycopg.Connection[Any], pairs: list[tuple[int, int]]) -> list[str]:
        """The names of (oid, typmod) pairs, looking unknown OIDs up in pg_type."""
        for _ in range(self._DEPTH):
            missing = sorted({oid for pair in pairs for oid in self._missing(pair, 0)})
            if not missing:
                break
            rows = con.execute(
                "SELECT t.oid::int8, t.typtype::text, t.typbasetype::int8, t.typtypmod, "
                "t.typelem::int8, t.typcategory::text, pg_catalog.format_type(t.oid, NULL) "
                "FROM pg_catalog.pg_type AS t WHERE t.oid = ANY(%s::oid[])",
                [missing],
            ).fetchall()
            for oid in missing:
                self._rows[oid] = None
            for r in rows:
                self._rows[int(r[0])] = (
                    str(r[1]),
                    int(r[2]),
                    int(r[3]),
                    int(r[4]),
                    str(r[5]),
                    str(r[6]),
                )
        return [self._name(pair, 0) for pair in pairs]

    def _next(self, pair: tuple[int, int]) -> tuple[tuple[int, int], str] | None:
        """The type a looked-up type stands for (domain base, array element), or None."""
        row = self._rows.get(pair[0])
        if row is None:
            return None
        kind, base, base_mod, element, category, _ = row
        if kind == "d":
            return (base, base_mod), ""
        if category == "A" and element and column_type(element, pair[1]) is not None:
            # psycopg loads arrays of built-in types; others arrive as text ('{sad,ok}').
            return (element, pair[1]), "[]"
        return None

    def _missing(self, pair: tuple[int, int], depth: int) -> set[int]:
        if column_type(*pair) is not None or depth >= self._DEPTH:
            return set()
        if pair[0] not in self._rows:
            return {pair[0]}
        step = self._next(pair)
        return set() if step is None else self._missing(step[0], depth + 1)

    def _name(self, pair: tuple[int, int], depth: int) -> str:
        known = column_type(*pair)
        if known is not None:
            return known
        row = self._rows.get(pair[0])
        if row is None or depth >= self._DEPTH:
            return f"OID {pair[0]}"
        if row[0] == "e":
            return "VARCHAR"
        step = self._next(pair)
        if step is None:
            return row[5].upper()
        return self._name(step[0], depth + 1) + step[1]


# ------------------------------------------------------------------------------ values


def _lenient(base: type[psycopg.abc.Loader]) -> type[Loader]:
    """A text loader that returns PostgreSQL's text when Python cannot hold the value.

    ``infinity``, ``-infinity`` and BC dates and timestamps have no ``datetime``;
    the cell is then the server's text (``'infinity'``), a string in a date or
    timestamp column, instead of a failed fetch.
    """

    class LenientLoader(Loader):
        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._inner = base(oid, context)

        def load(self, data: Any) -> Any:
            try:
                return self._inner.load(data)
            except psycopg.DataError:
                return bytes(data).decode("utf-8", "replace")

    return LenientLoader


def configure(con: psycopg.Connection[Any]) -> None:
    """Loaders for dates and timestamps Python cannot represent (see :func:`_lenient`)."""
    for name in ("date", "timestamp", "timestamptz"):
        info = con.adapters.types[name]
        base = con.adapters.get_loader(info.oid, Format.TEXT)
        if base is not None:
            con.adapters.register_loader(info.oid, _lenient(base))


def classify_error(exc: BaseException) -> tuple[str, str]:
    """(error kind, message) of a failed query, from PostgreSQL's SQLSTATE.

    ``timeout``: 57014 query_canceled (statement_timeout or the watchdog's cancel);
    ``memory``: class 53 (out of memory, disk full, temp_file_limit exceeded) or a
    client-side out of memory; ``refused``: 42501 insufficient_privilege, 25006
    read_only_sql_transaction, 42601 syntax_error (PostgreSQL cannot read it as one
    query: another statement, a second statement, a parse error), 08P01 (a
    parameter such as ``$1``: the statement asks for a value nobody binds) and a
    data-modifying WITH in the cursor; ``worker_crash``: the connection was lost
    (class 08, 57P01-57P03, no SQLSTATE); ``sql_runtime``: anything else.
    """
    message = first_line(exc)
    if isinstance(exc, MemoryError):
        return "memory", f"out of memory in the SQL worker: {message}"
    if not isinstance(exc, psycopg.Error):
        return "sql_runtime", message
    state = exc.sqlstate or ""
    if state == "57014":
        return "timeout", message
    lowered = message.lower()
    if state.startswith("53") or "out of memory" in lowered or "cannot allocate memory" in lowered:
        return "memory", message
    if state in ("42501", "25006", "42601", "08P01") or (
        state == "0A000" and "DECLARE CURSOR" in message
    ):
        return "refused", f"refused by PostgreSQL: {message}"
    if not state or state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return "worker_crash", f"the connection to PostgreSQL was lost: {message}"
    return "sql_runtime", message


def why_unsendable(sql: str) -> str | None:
    """Why ``sql`` cannot reach PostgreSQL as written, or None.

    libpq takes C strings: a NUL would cut the statement short without a word;
    a lone surrogate has no UTF-8 form.
    """
    if "\x00" in sql:
        return "it contains a NUL character"
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not valid UTF-8 (a lone surrogate)"
    return None


def declare(con: psycopg.Connection[Any], sql: str) -> None:
    """DECLARE the cursor over ``sql`` through the extended protocol (one statement only)."""
    query = f"DECLARE {CURSOR} NO SCROLL CURSOR FOR {sql}".encode()
    # binary=True sends it as a Parse/Bind/Execute: PostgreSQL refuses a second statement.
    con.execute(query, binary=True)


def describe(
    con: psycopg.Connection[Any], cur: psycopg.Cursor[Any], types: TypeNames
) -> tuple[Column, ...]:
    result = cur.pgresult
    if result is None or cur.description is None:
        return ()
    pairs = [(int(result.ftype(i)), int(result.fmod(i))) for i in range(result.nfields)]
    names = types.names(con, pairs)
    return tuple(Column(name=d.name, type=t) for d, t in zip(cur.description, names, strict=True))


# ------------------------------------------------------------------ the worker (child)


class _Session:
    """The worker's connection as the reader: opened lazily, closed after a failure that
    may leave the session in an unknown state (timeout, memory, lost connection)."""

    def __init__(self, conninfo: str, timeout_s: float) -> None:
        self.conninfo = conninfo
        self.timeout_s = timeout_s
        self.con: psycopg.Connection[Any] | None = None
        self.types = TypeNames()

    def connect(self) -> psycopg.Connection[Any]:
        if self.con is None or self.con.closed:
            self.con = psycopg.connect(self.conninfo, autocommit=True, prepare_threshold=None)
            configure(self.con)
        return self.con

    def drop(self) -> None:
        if self.con is not None:
            with contextlib.suppress(Exception):
                self.con.close()
        self.con = None

    def run(self, req: Request, watchdog: Watchdog) -> ExecResult:
        start = time.perf_counter_ns()
        try:
            con = self.connect()
        except psycopg.Error as exc:
            self.drop()
            message = f"cannot connect as the bank's reader: {first_line(exc)}"
            return failure("worker_crash", message, (time.perf_counter_ns() - start) // 1000)
        budget = cells.ResultBudget(req.max_result_bytes, req.max_cell_bytes)
        kept: list[list[Any]] = []
        columns: tuple[Column, ...] = ()
        truncated = False
        stopped: tuple[str, str] | None = None
        start = time.perf_counter_ns()
        # Just after the server's own statement_timeout, which should come first.
        watchdog.arm(con.cancel, self.timeout_s + WATCHDOG_SLACK_S)
        try:
            con.execute("BEGIN READ ONLY")
            declare(con, req.sql)
            wanted = req.max_rows + 1
            size = _FETCH_FIRST
            done = False
            while not done and not budget.over:
                cur = con.execute(f"FETCH FORWARD {min(size, wanted)} FROM {CURSOR}")
                batch = cur.fetchall()
                if not columns and cur.description is not None:
                    columns = describe(con, cur, self.types)
                    budget.add_columns([(c.name, c.type) for c in columns])
                for row in batch:
                    if budget.over:
                        break
                    if len(kept) == req.max_rows:
                        truncated = True  # one row more than max_rows exists; it is not kept
                        done = True
                        break
                    kept.append(budget.add_row(row))
                if len(batch) < min(size, wanted):
                    done = True
                size = min(size * 4, FETCH_MAX)
            if budget.over:
                stopped = too_large(req.max_result_bytes, len(kept), len(columns))
        except (psycopg.Error, MemoryError) as exc:
            stopped = classify_error(exc)
        except (UnicodeError, ValueError) as exc:
            stopped = ("refused", f"cannot be sent to PostgreSQL: {first_line(exc)}")
        finally:
            sql_us = (time.perf_counter_ns() - start) // 1000
            fired = watchdog.disarm()
        if fired and stopped is not None and stopped[0] in ("sql_runtime", "worker_crash"):
            stopped = ("timeout", stopped[1])
        if stopped is not None and stopped[0] == "timeout":
            stopped = ("timeout", f"query canceled after {self.timeout_s:g} s: {stopped[1]}")
        self._reset(reuse=not fired and (stopped is None or stopped[0] in _REUSABLE))
        if stopped is not None:
            return failure(stopped[0], stopped[1], sql_us)
        return success(columns, kept, truncated=truncated, sql_us=sql_us, budget=budget)

    def _reset(self, *, reuse: bool) -> None:
        """End the query's transaction and reset the session; or close the connection."""
        if reuse and self.con is not None:
            try:
                self.con.execute("ROLLBACK")
                self.con.execute("DISCARD ALL")
                return
            except psycopg.Error:
                pass
        self.drop()


# Failures after which the session is known to be fine (its transaction is rolled back).
_REUSABLE = frozenset({"sql_runtime", "refused", "result_too_large"})


def worker_main(
    conn: Connection, conninfo: str, timeout_s: float, memory_bytes: int, parent_pid: int
) -> None:
    """Entry point of the worker process (the loop is ``ledger.engines.process.serve``)."""

    def open_session() -> tuple[_Session, Watchdog]:
        session = _Session(conninfo, timeout_s)
        session.connect()
        watchdog = Watchdog(parent_pid, name="caseledger-pg-watchdog")
        watchdog.start()
        limit_address_space(memory_bytes)
        return session, watchdog

    def run(state: tuple[_Session, Watchdog], req: Request) -> ExecResult:
        session, watchdog = state
        try:
            return session.run(req, watchdog)
        except MemoryError:
            session.drop()
            return failure("memory", "out of memory in the SQL worker", 0)

    serve(conn, open_session, run, lambda state: state[0].drop(), (psycopg.Error,))
