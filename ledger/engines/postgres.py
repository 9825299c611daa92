"""The PostgreSQL engine: a bank in its own database on a real server, queried by a locked role.

The server is given by ``CASELEDGER_PG_DSN`` (an admin with CREATEDB and
CREATEROLE; docs/engines.md lists the privileges). ``build`` creates, for one
bank database file ``target``:

- an owner role ``cl_owner_<key>`` that owns the database ``cl_<key>`` and runs
  schema.sql and seed.sql (logged in as itself for the build only, then
  NOLOGIN without a password);
- a login role ``cl_reader_<key>`` with CONNECT on that database, USAGE on its
  ``public`` schema and SELECT on its tables, nothing else; its role settings
  make every session read-only with a statement timeout, an idle-in-transaction
  timeout, ``work_mem``, ``temp_file_limit``, a fixed ``search_path`` and UTC;
- ``target``: a small JSON file naming the database and the roles, and beside it
  ``<target>.password`` (mode 0600) with the reader's password, generated at
  build time and sent to the server only as a SCRAM verifier.

``<key>`` is the target's parent folder name (the bank's content hash), cut to 24
characters, and 10 hex digits of the target's absolute path, so two homes
building the same bank on one server never meet.

Queries of a model run in :class:`PostgresExecutor`: one worker process (spawn)
holding one connection as the reader, an address-space limit on that process
(a result that does not fit is ``memory``, not a dead harness), each query one
``DECLARE ... NO SCROLL CURSOR`` in a ``READ ONLY`` transaction (PostgreSQL's own
parser then accepts exactly one SELECT/VALUES/TABLE query, and the extended
protocol refuses a second statement), ``max_rows + 1`` rows fetched in chunks
under the result caps, then ROLLBACK and DISCARD ALL so nothing of the session
carries over to the next query. The timeout is enforced three times: the
server's ``statement_timeout``, a watchdog in the worker that cancels the
running statement at the deadline, and the parent, which kills the worker after
a grace and terminates its backend. After a timeout, a crash and ``close`` the
executor checks ``pg_stat_activity`` until no backend of the executor is left.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import multiprocessing
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from importlib import resources
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec
import psycopg
from msgspec import UNSET
from psycopg import sql as pgsql
from psycopg.adapt import Loader
from psycopg.pq import Format

from ledger.engines.base import EngineQueryError
from ledger.errors import BankError, SandboxError, UsageError
from ledger.events import Column, TableSchema
from ledger.harness import cells
from ledger.harness.functions import (
    Catalog,
    DenyRule,
    FunctionEntry,
    denied_by,
    fold,
    name_denial,
)
from ledger.harness.worker import (
    ExecResult,
    Reply,
    Request,
    Watchdog,
    failure,
    limit_address_space,
    parse_memory_limit,
    serve,
)

if TYPE_CHECKING:
    from ledger.bank.data import DataFiles

__all__ = [
    "ALLOWED_FROM",
    "BANK_SCHEMA",
    "DATA_FILE",
    "DENY_RULES",
    "ENV_VAR",
    "GRAMMAR_FUNCTIONS",
    "MIN_SERVER_VERSION",
    "READER_SETTINGS",
    "SESSION_PINS",
    "BankNames",
    "PostgresEngine",
    "PostgresExecutor",
    "bank_names",
    "catalog",
    "classify_error",
    "column_type",
    "from_environment",
    "judge_function",
    "parse_memory_limit",
]

ENV_VAR = "CASELEDGER_PG_DSN"
#: The schema of the bank's database that holds its tables (the reader's search_path).
BANK_SCHEMA = "public"
#: server_version_num of the oldest server the engine accepts (GRANT SET ON PARAMETER, PG15).
MIN_SERVER_VERSION = 150000
DATA_FILE = "postgres_functions.json"
FORMAT = "caseledger-postgres-bank/1"

#: Settings that keep a query's rows and their text the same on every run (issue 30):
#: no parallel plan (a Gather returns its workers' rows in whatever order they come, which
#: LIMIT without ORDER BY and string_agg without ORDER BY would see), and the locale and
#: interval settings the server's configuration would otherwise decide (money, to_char's
#: TM, L, D and G patterns, an interval's text). Every reader session has them, from the
#: role and from the connection (a bank built before they were added).
SESSION_PINS: tuple[tuple[str, str], ...] = (
    ("max_parallel_workers_per_gather", "0"),
    ("IntervalStyle", "postgres"),
    ("lc_monetary", "C"),
    ("lc_numeric", "C"),
    ("lc_time", "C"),
)
#: Settings of every reader role (ALTER ROLE ... SET): what a session of the reader gets
#: even when it is not opened by the executor.
READER_SETTINGS: tuple[tuple[str, str], ...] = (
    ("default_transaction_read_only", "on"),
    ("statement_timeout", "5s"),
    ("idle_in_transaction_session_timeout", "10s"),
    ("work_mem", "64MB"),
    ("temp_file_limit", "256MB"),
    ("search_path", BANK_SCHEMA),
    ("TimeZone", "UTC"),
    ("DateStyle", "ISO"),
    ("client_connection_check_interval", "1s"),
    ("cursor_tuple_fraction", "1"),
    *SESSION_PINS,
)
#: Concurrent sessions one reader may hold.
READER_CONNECTION_LIMIT = 32
#: Functions whose EXECUTE the build revokes from PUBLIC in the bank's database. Only a
#: superuser admin can (they belong to the bootstrap superuser); docs/engines.md says
#: which of them PostgreSQL already keeps from PUBLIC.
REVOKED_FUNCTIONS = (
    "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file",
    "lo_import", "lo_export", "set_config",
)  # fmt: skip
#: How long a reference (gold) query may run.
REFERENCE_TIMEOUT_S = 60.0
#: How long after the timeout the worker's watchdog cancels a statement the server did not.
WATCHDOG_SLACK_S = 0.25
#: How long the parent waits past the timeout before it kills the worker.
KILL_GRACE_S = 2.0
#: How long a fresh worker may take to import psycopg and connect.
STARTUP_TIMEOUT_S = 60.0
#: How long a closed backend may take to leave pg_stat_activity before it is terminated.
BACKEND_EXIT_WAIT_S = 2.0
_CURSOR = "caseledger_query"
_FETCH_FIRST = 64
_FETCH_MAX = 1024
_NAME_BODY = 24


# ------------------------------------------------------------------------- environment


def from_environment(environ: Mapping[str, str]) -> PostgresEngine:
    """The engine for the server named by ``CASELEDGER_PG_DSN`` in ``environ``.

    Raises UsageError with what to set when the variable is missing or empty.
    """
    dsn = environ.get(ENV_VAR, "").strip()
    if not dsn:
        raise UsageError(
            f"{ENV_VAR} is not set: the postgres engine needs a PostgreSQL server",
            hint=(
                f"set {ENV_VAR} to a libpq connection string of a role with CREATEDB and "
                "CREATEROLE (e.g. 'host=db.example port=5432 user=caseledger dbname=postgres'; "
                "docs/engines.md lists the privileges)"
            ),
        )
    return PostgresEngine(dsn=dsn)


# ------------------------------------------------------------------------------ types

# Built-in type OIDs (pg_type.dat; stable across PostgreSQL versions) -> DuckDB-style names
# that ledger.harness.cells.type_class understands.
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
    it (with :func:`_TypeNames` for types it does not know).

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


class _TypeNames:
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


def _configure(con: psycopg.Connection[Any]) -> None:
    """Loaders for dates and timestamps Python cannot represent (see :func:`_lenient`)."""
    for name in ("date", "timestamp", "timestamptz"):
        info = con.adapters.types[name]
        base = con.adapters.get_loader(info.oid, Format.TEXT)
        if base is not None:
            con.adapters.register_loader(info.oid, _lenient(base))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
    message = _first_line(exc)
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


# --------------------------------------------------------------------------- functions

#: Set-returning functions a FROM clause may call.
ALLOWED_FROM: tuple[str, ...] = ("unnest", "generate_series")

# Rules on a function's pg_proc row rather than its name (the pattern is a label).
_INTERNAL = DenyRule(
    "(internal signature)",
    "internal",
    "every form takes or returns a pseudo-type (internal, cstring, trigger, handlers): type "
    "input/output, planner support and handler functions, not query functions",
)
_SET_RETURNING = DenyRule(
    "(set-returning)",
    "table_function",
    "a set-returning function; only unnest and generate_series, and only in FROM",
)

#: The documented deny list, first match wins (categories as the DuckDB list).
DENY_RULES: tuple[DenyRule, ...] = (
    # ---- anything that takes, runs or returns SQL text
    DenyRule("query_to_xml*", "sql_text", "executes SQL text given as a string"),
    DenyRule("cursor_to_xml*", "sql_text", "reads a cursor of the session"),
    DenyRule("table_to_xml*", "sql_text", "reads a table named by a runtime string"),
    DenyRule("schema_to_xml*", "sql_text", "reads every table of a schema named by a string"),
    DenyRule("database_to_xml*", "sql_text", "reads every table of the database"),
    DenyRule("ts_stat", "sql_text", "executes SQL text given as a string"),
    DenyRule("ts_rewrite", "sql_text", "one form executes SQL text given as a string"),
    DenyRule("current_query", "sql_text", "returns the text of the running statement"),
    # ---- settings
    DenyRule("set_config", "settings", "changes a setting of the session"),
    DenyRule("current_setting", "settings", "reads configuration, including paths"),
    # ---- session
    DenyRule("current_user", "session", "names the session user"),
    DenyRule("session_user", "session", "names the session user"),
    DenyRule("user", "session", "names the session user"),
    DenyRule("current_role", "session", "names the session role"),
    DenyRule("system_user", "session", "names the authenticated user"),
    DenyRule("inet_client_addr", "session", "the client's address"),
    DenyRule("inet_client_port", "session", "the client's port"),
    DenyRule("inet_server_addr", "session", "the server's address"),
    DenyRule("inet_server_port", "session", "the server's port"),
    DenyRule("txid_*", "session", "transaction ids and snapshots of the session"),
    # ---- files, large objects and other servers
    DenyRule("pg_read_file", "files", "reads a server file"),
    DenyRule("pg_read_binary_file", "files", "reads a server file"),
    DenyRule("pg_ls_*", "files", "lists server folders"),
    DenyRule("pg_stat_file", "files", "inspects a server file"),
    DenyRule(
        "lo_*", "files", "server-side large objects (lo_import/lo_export read and write files)"
    ),
    DenyRule("loread", "files", "reads a large object"),
    DenyRule("lowrite", "files", "writes a large object"),
    DenyRule("dblink*", "files", "connects to other databases and servers"),
    # ---- side effects on the session, other sessions or the database
    DenyRule("nextval", "side_effects", "advances a sequence"),
    DenyRule("setval", "side_effects", "sets a sequence"),
    DenyRule("currval", "side_effects", "reads a sequence's session state"),
    DenyRule("lastval", "side_effects", "reads a sequence's session state"),
    DenyRule("setseed", "side_effects", "changes the session's random state"),
    DenyRule("pg_advisory*", "side_effects", "takes or releases an advisory lock"),
    DenyRule("pg_try_advisory*", "side_effects", "takes an advisory lock"),
    DenyRule("pg_notify", "side_effects", "sends a notification"),
    DenyRule("pg_cancel_backend", "side_effects", "cancels another session's query"),
    DenyRule("pg_terminate_backend", "side_effects", "ends another session"),
    DenyRule("brin_*summarize*", "side_effects", "changes an index"),
    DenyRule("gin_clean_pending_list", "side_effects", "changes an index"),
    # ---- not reproducible: a clock, a random source or a delay
    DenyRule("pg_sleep*", "non_reproducible", "stalls the query"),
    DenyRule("random*", "non_reproducible", "a random number"),
    DenyRule("gen_random_uuid", "non_reproducible", "a random UUID"),
    DenyRule("now", "non_reproducible", "the clock"),
    DenyRule("clock_timestamp", "non_reproducible", "the clock"),
    DenyRule("statement_timestamp", "non_reproducible", "the clock"),
    DenyRule("transaction_timestamp", "non_reproducible", "the clock"),
    DenyRule("timeofday", "non_reproducible", "the clock"),
    DenyRule("current_date", "non_reproducible", "the clock"),
    DenyRule("current_time", "non_reproducible", "the clock"),
    DenyRule("current_timestamp", "non_reproducible", "the clock"),
    DenyRule("localtime", "non_reproducible", "the clock"),
    DenyRule("localtimestamp", "non_reproducible", "the clock"),
    # ---- catalog introspection
    DenyRule("current_database", "catalog", "names the database"),
    DenyRule("current_catalog", "catalog", "names the database"),
    DenyRule("current_schema", "catalog", "names the current schema"),
    DenyRule("current_schemas", "catalog", "lists the search path"),
    DenyRule("pg_*", "catalog", "PostgreSQL catalog, statistics and server administration"),
    DenyRule("has_*_privilege", "catalog", "privilege introspection"),
    DenyRule("*_description", "catalog", "catalog comments"),
    DenyRule("format_type", "catalog", "catalog type names"),
    DenyRule("to_reg*", "catalog", "looks names up in the catalog"),
    DenyRule("row_security_active", "catalog", "row security of a table"),
    DenyRule("acl*", "catalog", "access control lists"),
    DenyRule("makeaclitem", "catalog", "access control lists"),
    # ---- the environment of the server
    DenyRule("version", "environment", "the server's version and platform"),
    # ---- internals
    DenyRule("binary_upgrade_*", "internal", "pg_upgrade internals"),
    DenyRule("plpgsql_*", "internal", "the PL/pgSQL handler"),
)

#: Grammar-level functions that are not in pg_proc (the generator adds them as scalars).
GRAMMAR_FUNCTIONS: tuple[str, ...] = (
    *("coalesce", "nullif", "greatest", "least", "trim"),
    *("current_date", "current_time", "current_timestamp", "localtime", "localtimestamp"),
    *("current_user", "session_user", "user", "current_role", "current_catalog"),
    "current_schema",
)


def judge_function(name: str, function_type: str, *, internal: bool = False) -> FunctionEntry:
    """The verdict on one (name, type) of pg_proc: a name rule, else the signature rules.

    ``function_type`` is ``scalar``, ``aggregate`` (window functions too) or ``table``
    (set-returning); ``internal`` says that every form of it takes or returns a
    pseudo-type.

    >>> judge_function("set_config", "scalar").category
    'settings'
    >>> judge_function("lower", "scalar").allowed, judge_function("unnest", "table").allowed
    (True, True)
    >>> judge_function("regexp_matches", "table").rule
    '(set-returning)'
    """
    denied = name_denial(DENY_RULES, name, function_type)
    if denied is not None:
        return denied
    # PostgreSQL: rules on the pg_proc row, each named in the data file (unlike DuckDB's
    # and SQLite's type rules, which carry no rule pattern).
    if internal:
        return denied_by(_INTERNAL, name, function_type)
    if function_type == "table" and fold(name) not in ALLOWED_FROM:
        return denied_by(_SET_RETURNING, name, function_type)
    return FunctionEntry(name=name, type=function_type, allowed=True)


def all_rules() -> tuple[DenyRule, ...]:
    """The name rules and the two signature rules, as the data file lists them."""
    return (*DENY_RULES, _INTERNAL, _SET_RETURNING)


@functools.cache
def catalog() -> Catalog:
    """The checked-in PostgreSQL allow-list as a :class:`ledger.harness.functions.Catalog`.

    The file names the server version ``server_version``; Catalog reads the
    version from ``duckdb_version``, so it is passed under that key too.
    """
    text = resources.files("ledger.engines").joinpath(DATA_FILE).read_text(encoding="utf-8")
    doc = json.loads(text)
    return Catalog({**doc, "duckdb_version": doc["server_version"]})


# ------------------------------------------------------------------------ bank names


class BankNames(msgspec.Struct, frozen=True):
    """The server-side names of one built bank."""

    database: str
    owner: str
    reader: str


def bank_names(target: Path) -> BankNames:
    """Database and role names for a bank database file ``target`` (at most 45 characters).

    >>> bank_names(Path("/h/banks/0123456789abcdef0123456789abcdef/pg.json")).database[:28]
    'cl_0123456789abcdef01234567_'
    """
    folder = re.sub(r"[^a-z0-9]", "", target.absolute().parent.name.lower())[:_NAME_BODY]
    tag = hashlib.sha256(str(target.absolute()).encode("utf-8")).hexdigest()[:10]
    key = f"{folder or 'bank'}_{tag}"
    return BankNames(database=f"cl_{key}", owner=f"cl_owner_{key}", reader=f"cl_reader_{key}")


class _BankFile(msgspec.Struct, frozen=True, kw_only=True):
    """The JSON written at ``target`` (no secret in it)."""

    format: str
    database: str
    schema: str
    owner: str
    reader: str
    password_file: str
    server_version: str
    collate: str
    ctype: str


def _password_path(target: Path) -> Path:
    return target.with_name(target.name + ".password")


def _write_private(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` through a temp file created with ``mode`` (atomic)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


# ----------------------------------------------------------------------- connections


def _conninfo(dsn: str, **overrides: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.update(overrides)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


def _options(settings: Iterable[tuple[str, str]]) -> str:
    """A libpq ``options`` value setting each GUC (spaces and backslashes escaped)."""
    parts = []
    for name, value in settings:
        escaped = value.replace("\\", "\\\\").replace(" ", "\\ ")
        parts.append(f"-c {name}={escaped}")
    return " ".join(parts)


def _scram(con: psycopg.Connection[Any], password: str, role: str) -> str:
    """The SCRAM-SHA-256 verifier of ``password`` (the server never sees the password)."""
    raw = con.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return raw.decode("ascii")


def _ident(name: str) -> pgsql.Identifier:
    return pgsql.Identifier(name)


# ------------------------------------------------------------------------ the engine


class PostgresEngine:
    """The ``postgres`` engine over the server of one admin DSN (see the module doc).

    The DSN is used only as given here; nothing reads the environment but
    :func:`from_environment`.
    """

    name = "postgres"
    dialect = "postgres"

    def __init__(self, *, dsn: str) -> None:
        if not dsn.strip():
            raise UsageError(f"an empty {ENV_VAR}", hint="give a libpq connection string")
        self._dsn = dsn
        self._version: str | None = None

    # ------------------------------------------------------------- server

    def _connect(self, what: str, **overrides: str) -> psycopg.Connection[Any]:
        try:
            con = psycopg.connect(_conninfo(self._dsn, **overrides), autocommit=True)
        except psycopg.Error as exc:
            raise UsageError(
                f"cannot connect to the PostgreSQL server of {ENV_VAR} ({what}): "
                f"{_first_line(exc)}",
                hint=f"check {ENV_VAR} and that the server is running (docs/engines.md)",
            ) from None
        _configure(con)
        return con

    def version(self) -> str:
        """The server's ``server_version`` (e.g. ``15.18 (Debian 15.18-0+deb12u1)``)."""
        if self._version is None:
            with self._connect("version") as con:
                self._version = str(_scalar(con, "SHOW server_version"))
        return self._version

    def dialect_notes(self) -> str:
        """The prompt paragraph: which SQL the model must write (no server needed)."""
        return (
            "Write one PostgreSQL query (SELECT, WITH ... SELECT or VALUES). Unquoted "
            "identifiers fold to lower case; quote mixed-case names with double quotes and "
            "strings with single quotes. The tables are in the schema public. Integer "
            "division truncates (7 / 2 = 3): cast to numeric for an exact quotient; numeric "
            "keeps its scale; real is a 4-byte float. The session time zone is UTC: a "
            "timestamp with time zone is an instant, shown in a zone with AT TIME ZONE "
            "'<zone>'. Use date_trunc, EXTRACT, interval '1 day', || for concatenation, "
            "LIMIT/OFFSET, FILTER (WHERE ...) and window functions; there is no QUALIFY and "
            "no GROUP BY ALL. Clocks, random values and settings are not available: write "
            "dates as literals."
        )

    def _admin(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        overrides = {"application_name": "caseledger-admin"}
        if dbname is not None:
            overrides["dbname"] = dbname
        return self._connect("admin", **overrides)

    # -------------------------------------------------------------- build

    def build(
        self, schema_sql: str, seed_sql: str, target: Path, *, data: DataFiles | None = None
    ) -> None:
        """Create the bank's database, roles, target file and password file (see module doc).

        Atomic: on any failure (Ctrl-C included) the database, the roles and the
        files this call created are removed again. Raises BankError naming
        schema.sql or seed.sql and PostgreSQL's message when the bank's SQL fails.
        """
        target = Path(target)
        secret = _password_path(target)
        for path in (target, secret):
            if path.exists():
                raise BankError(f"refusing to overwrite {path}")
        names = bank_names(target)
        admin = self._admin()
        created: list[str] = []
        try:
            version = self._check_server(admin)
            self._check_free(admin, names)
            target.parent.mkdir(parents=True, exist_ok=True)
            owner_pw, reader_pw = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            q = pgsql.SQL
            admin.execute(
                q("CREATE ROLE {} LOGIN CONNECTION LIMIT 4 PASSWORD {}").format(
                    _ident(names.owner), pgsql.Literal(_scram(admin, owner_pw, names.owner))
                )
            )
            created.append("owner")
            admin.execute(q("GRANT {} TO CURRENT_USER").format(_ident(names.owner)))
            admin.execute(
                q("CREATE ROLE {} LOGIN NOINHERIT CONNECTION LIMIT {} PASSWORD {}").format(
                    _ident(names.reader),
                    pgsql.Literal(READER_CONNECTION_LIMIT),
                    pgsql.Literal(_scram(admin, reader_pw, names.reader)),
                )
            )
            created.append("reader")
            # Membership lets the admin terminate the reader's backends (drop, cleanup).
            admin.execute(q("GRANT {} TO CURRENT_USER").format(_ident(names.reader)))
            for setting, value in READER_SETTINGS:
                admin.execute(
                    q("ALTER ROLE {} SET {} = {}").format(
                        _ident(names.reader), _ident(setting), pgsql.Literal(value)
                    )
                )
            ctype = self._create_database(admin, names)
            created.append("database")
            self._load(names, owner_pw, schema_sql, seed_sql, version, data)
            admin.execute(q("ALTER ROLE {} NOLOGIN PASSWORD NULL").format(_ident(names.owner)))
            if _scalar(
                admin, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user"
            ):
                self._revoke_functions(names)
            _write_private(secret, reader_pw + "\n", 0o600)
            created.append("secret")
            body = _BankFile(
                format=FORMAT, database=names.database, schema=BANK_SCHEMA, owner=names.owner,
                reader=names.reader, password_file=secret.name, server_version=version,
                collate="C", ctype=ctype,
            )  # fmt: skip
            text = json.dumps(msgspec.to_builtins(body), indent=1, sort_keys=True) + "\n"
            _write_private(target, text, 0o644)
        except BaseException:
            with contextlib.suppress(Exception):
                admin.close()
            self._undo(names, created, secret)
            raise
        admin.close()

    def _check_server(self, admin: psycopg.Connection[Any]) -> str:
        number = int(_scalar(admin, "SHOW server_version_num"))
        version = str(_scalar(admin, "SHOW server_version"))
        if number < MIN_SERVER_VERSION:
            raise BankError(
                f"the postgres engine needs PostgreSQL 15 or newer; the server runs {version}",
                hint=f"point {ENV_VAR} at a newer server",
            )
        return version

    def _check_free(self, admin: psycopg.Connection[Any], names: BankNames) -> None:
        taken = admin.execute(
            "SELECT datname FROM pg_catalog.pg_database WHERE datname = %s UNION ALL "
            "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname IN (%s, %s)",
            [names.database, names.owner, names.reader],
        ).fetchall()
        if taken:
            shown = ", ".join(str(r[0]) for r in taken)
            raise BankError(
                f"the server already has {shown} but no bank file names it "
                "(a build that was killed before it could clean up?)",
                hint=f"drop them: DROP DATABASE {names.database}; DROP ROLE {names.reader}; "
                f"DROP ROLE {names.owner}",
            )

    def _create_database(self, admin: psycopg.Connection[Any], names: BankNames) -> str:
        """CREATE DATABASE with byte-order collation (DuckDB's); returns the ctype used."""
        for ctype in ("C.UTF-8", "C"):
            statement = pgsql.SQL(
                "CREATE DATABASE {} OWNER {} TEMPLATE template0 ENCODING 'UTF8' "
                "LC_COLLATE 'C' LC_CTYPE {}"
            ).format(_ident(names.database), _ident(names.owner), pgsql.Literal(ctype))
            try:
                admin.execute(statement)
            except psycopg.errors.InvalidParameterValue:
                continue  # this server has no C.UTF-8 locale
            return ctype
        raise BankError("the server accepts neither the C.UTF-8 nor the C locale")

    def _load(
        self,
        names: BankNames,
        owner_pw: str,
        schema_sql: str,
        seed_sql: str,
        version: str,
        data: DataFiles | None = None,
    ) -> None:
        """Run schema.sql and seed.sql (or copy the data files' rows) logged in as the
        owner, then grant the reader."""
        owner = self._connect(
            "bank owner", user=names.owner, password=owner_pw, dbname=names.database,
            application_name="caseledger-build",
            options=_options([("search_path", BANK_SCHEMA), ("TimeZone", "UTC")]),
        )  # fmt: skip
        q = pgsql.SQL
        try:
            for file_name, text in (("schema.sql", schema_sql), ("seed.sql", seed_sql)):
                if not text.strip():
                    continue
                try:
                    with owner.transaction():
                        owner.execute(text.encode("utf-8"))
                except psycopg.Error as exc:
                    raise BankError(
                        f"{file_name}{_position(exc, text)}: PostgreSQL error: {_first_line(exc)}",
                        hint=f"fix {file_name} so it runs on PostgreSQL {version}",
                    ) from None
            if data is not None:
                _copy_rows(owner, data)
            db, schema, reader = (
                _ident(names.database), _ident(BANK_SCHEMA), _ident(names.reader)
            )  # fmt: skip
            for statement in (
                q("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db),
                q("GRANT CONNECT ON DATABASE {} TO {}").format(db, reader),
                q("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(schema),
                q("GRANT USAGE ON SCHEMA {} TO {}").format(schema, reader),
                q("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, reader),
                q("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA {} FROM PUBLIC").format(schema),
                q("ANALYZE"),
            ):
                owner.execute(statement)
        finally:
            owner.close()

    def _revoke_functions(self, names: BankNames) -> None:
        """REVOKE EXECUTE FROM PUBLIC on every form of REVOKED_FUNCTIONS and dblink* (superuser)."""
        with self._admin(names.database) as con:
            rows = con.execute(
                "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p "
                "WHERE p.proname = ANY(%s) OR p.proname LIKE 'dblink%%' ORDER BY 1",
                [list(REVOKED_FUNCTIONS)],
            ).fetchall()
            for (signature,) in rows:
                con.execute(
                    pgsql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM PUBLIC").format(
                        pgsql.SQL(signature)  # a regprocedure the server printed itself
                    )
                )

    def _undo(self, names: BankNames, created: list[str], secret: Path) -> None:
        """Remove what a failed build created (on a fresh connection: the old may be broken)."""
        if "secret" in created:
            with contextlib.suppress(FileNotFoundError):
                secret.unlink()
        statements = []
        if "database" in created:
            statements.append(
                pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(names.database))
            )
        for kind, role in (("reader", names.reader), ("owner", names.owner)):
            if kind in created:
                statements.append(pgsql.SQL("DROP ROLE IF EXISTS {}").format(_ident(role)))
        if not statements:
            return
        with contextlib.suppress(UsageError, psycopg.Error), self._admin() as con:
            for statement in statements:
                con.execute(statement)

    def drop(self, target: Path) -> None:
        """Drop a built bank: its database (ending its sessions), its roles and its files.

        A server engine keeps a database per build: a temporary build (a recompute,
        a calibration variant) must be dropped when it is no longer needed.
        """
        target = Path(target)
        bank = _read_bank_file(target)
        names = BankNames(database=bank.database, owner=bank.owner, reader=bank.reader)
        with self._admin() as con:
            con.execute(
                pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(names.database))
            )
            for role in (names.reader, names.owner):
                con.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(_ident(role)))
        for path in (target.with_name(bank.password_file), target):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # ----------------------------------------------------------- reading

    def reader_conninfo(
        self, database: Path, settings: Iterable[tuple[str, str]] = (), app: str = "caseledger"
    ) -> str:
        """The libpq connection string of the bank's reader (with its password: never log it)."""
        bank = _read_bank_file(database)
        password = _read_password(database, bank)
        options = [("search_path", bank.schema), ("TimeZone", "UTC"), ("DateStyle", "ISO")]
        options += [("default_transaction_read_only", "on"), ("cursor_tuple_fraction", "1")]
        options += SESSION_PINS
        return _conninfo(
            self._dsn, user=bank.reader, password=password, dbname=bank.database,
            application_name=app, options=_options([*options, *settings]),
        )  # fmt: skip

    def _reader(self, database: Path, timeout_s: float) -> psycopg.Connection[Any]:
        info = self.reader_conninfo(
            database, [("statement_timeout", f"{int(timeout_s * 1000)}")], "caseledger-gold"
        )
        try:
            con = psycopg.connect(info, autocommit=True, prepare_threshold=None)
        except psycopg.Error as exc:
            raise BankError(
                f"{database}: cannot connect as the bank's reader: {_first_line(exc)}",
                hint="publish the bank again, or check the server of " + ENV_VAR,
            ) from None
        _configure(con)
        return con

    def tables(self, database: Path) -> tuple[TableSchema, ...]:
        """The bank's tables and views of its schema, columns in order, sorted by name."""
        bank = _read_bank_file(database)
        with self._reader(database, REFERENCE_TIMEOUT_S) as con:
            rows = con.execute(
                "SELECT c.relname::text, a.attname::text, a.atttypid::int8, a.atttypmod "
                "FROM pg_catalog.pg_class AS c "
                "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
                "JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
                "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
                [bank.schema],
            ).fetchall()
            types = _TypeNames().names(con, [(int(r[2]), int(r[3])) for r in rows])
        out: dict[str, list[Column]] = {}
        for (table, column, _, _), type_name in zip(rows, types, strict=True):
            out.setdefault(str(table), []).append(Column(name=str(column), type=type_name))
        return tuple(TableSchema(name=t, columns=tuple(c)) for t, c in sorted(out.items()))

    def reference(
        self, database: Path, sql: str
    ) -> tuple[tuple[Column, ...], list[tuple[Any, ...]]]:
        """Run a reference query as the reader (read-only): typed columns and raw rows.

        Raises EngineQueryError with PostgreSQL's message when it fails or is not
        exactly one query.
        """
        unsendable = _unsendable(sql)
        if unsendable is not None:
            raise EngineQueryError(f"cannot be sent to PostgreSQL: {unsendable}")
        with self._reader(database, REFERENCE_TIMEOUT_S) as con:
            try:
                con.execute("BEGIN READ ONLY")
                _declare(con, sql)
                columns: tuple[Column, ...] | None = None
                rows: list[tuple[Any, ...]] = []
                types = _TypeNames()
                while True:
                    cur = con.execute(f"FETCH FORWARD {_FETCH_MAX} FROM {_CURSOR}")
                    batch = cur.fetchall()
                    if columns is None:
                        columns = _describe(con, cur, types)
                    rows.extend(tuple(r) for r in batch)
                    if len(batch) < _FETCH_MAX:
                        break
            except (psycopg.Error, UnicodeError, ValueError) as exc:
                raise EngineQueryError(_first_line(exc)) from None
            finally:
                with contextlib.suppress(psycopg.Error):
                    con.execute("ROLLBACK")
        return columns or (), rows

    def executor(
        self, database: Path, *, timeout_s: float = 5.0, memory_limit: str = "512MB"
    ) -> PostgresExecutor:
        """A sandboxed executor over the bank (see :class:`PostgresExecutor`)."""
        return PostgresExecutor(
            self, Path(database), timeout_s=timeout_s, memory_limit=memory_limit
        )

    def admin_conninfo(self, **overrides: str) -> str:
        """The admin's connection string with ``overrides`` (for the executor's cleanup)."""
        return _conninfo(self._dsn, **overrides)


def _scalar(con: psycopg.Connection[Any], query: str) -> Any:
    row = con.execute(query.encode("ascii")).fetchone()
    if row is None:
        raise SandboxError(f"PostgreSQL returned no row for {query!r}")
    return row[0]


def _position(exc: psycopg.Error, text: str) -> str:
    """`` line N`` of the error's position in ``text`` (PostgreSQL counts characters from 1)."""
    raw = exc.diag.statement_position
    if not raw or not raw.isdigit():
        return ""
    return f" line {text[: int(raw) - 1].count(chr(10)) + 1}"


def _read_bank_file(database: Path) -> _BankFile:
    try:
        raw = Path(database).read_bytes()
    except FileNotFoundError:
        raise BankError(
            f"bank database {database} is missing", hint="publish the bank again"
        ) from None
    try:
        bank: _BankFile = msgspec.json.decode(raw, type=_BankFile)
    except msgspec.DecodeError as exc:
        raise BankError(f"{database}: not a PostgreSQL bank file: {exc}") from None
    if bank.format != FORMAT:
        raise BankError(f"{database}: unknown bank file format {bank.format!r}")
    return bank


def _read_password(database: Path, bank: _BankFile) -> str:
    path = Path(database).with_name(bank.password_file)
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise BankError(
            f"{path}: the reader's password file is missing", hint="publish the bank again"
        ) from None
    if mode & 0o077:
        raise BankError(
            f"{path}: the reader's password file is readable by others (mode {mode & 0o777:o})",
            hint=f"chmod 600 {path}",
        )
    return text


def _declare(con: psycopg.Connection[Any], sql: str) -> None:
    """DECLARE the cursor over ``sql`` through the extended protocol (one statement only)."""
    query = f"DECLARE {_CURSOR} NO SCROLL CURSOR FOR {sql}".encode()
    # binary=True sends it as a Parse/Bind/Execute: PostgreSQL refuses a second statement.
    con.execute(query, binary=True)


def _describe(
    con: psycopg.Connection[Any], cur: psycopg.Cursor[Any], types: _TypeNames
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
        self.types = _TypeNames()

    def connect(self) -> psycopg.Connection[Any]:
        if self.con is None or self.con.closed:
            self.con = psycopg.connect(self.conninfo, autocommit=True, prepare_threshold=None)
            _configure(self.con)
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
            message = f"cannot connect as the bank's reader: {_first_line(exc)}"
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
            _declare(con, req.sql)
            wanted = req.max_rows + 1
            size = _FETCH_FIRST
            done = False
            while not done and not budget.over:
                cur = con.execute(f"FETCH FORWARD {min(size, wanted)} FROM {_CURSOR}")
                batch = cur.fetchall()
                if not columns and cur.description is not None:
                    columns = _describe(con, cur, self.types)
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
                size = min(size * 4, _FETCH_MAX)
            if budget.over:
                stopped = (
                    "result_too_large",
                    f"the result is over the {req.max_result_bytes}-byte cap "
                    f"(stopped reading after {len(kept)} rows of {len(columns)} columns)",
                )
        except (psycopg.Error, MemoryError) as exc:
            stopped = classify_error(exc)
        except (UnicodeError, ValueError) as exc:
            stopped = ("refused", f"cannot be sent to PostgreSQL: {_first_line(exc)}")
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
        return ExecResult(
            ok=True, error_kind=None, error_message=None, columns=columns,
            rows=tuple(tuple(r) for r in kept), row_count=len(kept), truncated=truncated,
            sql_us=sql_us, cells_truncated=budget.cells_truncated or UNSET,
        )  # fmt: skip

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


def _worker_main(
    conn: Connection, conninfo: str, timeout_s: float, memory_bytes: int, parent_pid: int
) -> None:
    """Entry point of the worker process (the loop is ``ledger.harness.worker.serve``)."""

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


# ------------------------------------------------------------------ the executor (parent)

_DECODER: msgspec.msgpack.Decoder[Reply] = msgspec.msgpack.Decoder(Reply)
_ENCODER = msgspec.msgpack.Encoder()


def _unsendable(sql: str) -> str | None:
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
        self._bank = _read_bank_file(database)
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
            target=_worker_main,
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
        unsendable = _unsendable(sql)
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


def _copy_rows(owner: psycopg.Connection[Any], data: DataFiles) -> None:
    """COPY every data file's rows into the table of its name (the tables of a
    ``data.sqlite``: every table schema.sql created)."""
    rows = owner.execute(
        "SELECT c.relname, a.attname FROM pg_catalog.pg_attribute AS a "
        "JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid "
        "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY c.relname, a.attnum",
        [BANK_SCHEMA],
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(str(table), []).append(str(column))
    wanted = {t: t for t in tables} if data.kind == "data.sqlite" else data.tables()
    # Parents before children: PostgreSQL checks each foreign key as rows arrive.
    keys = owner.execute(
        "SELECT c.relname, p.relname FROM pg_catalog.pg_constraint AS k "
        "JOIN pg_catalog.pg_class AS c ON c.oid = k.conrelid "
        "JOIN pg_catalog.pg_class AS p ON p.oid = k.confrelid "
        "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE k.contype = 'f' AND n.nspname = %s",
        [BANK_SCHEMA],
    ).fetchall()
    from ledger.bank.data import load_hint, parents_first

    order = parents_first(sorted(wanted), [(str(c), str(p)) for c, p in keys])
    for table in order:
        name = wanted[table]
        if table not in tables:
            raise BankError(
                f"{name}: schema.sql creates no table {table!r}",
                hint="name each data file after a table that schema.sql creates",
            )
        columns = tuple(tables[table])
        statement = pgsql.SQL("COPY {} ({}) FROM STDIN").format(
            _ident(table), pgsql.SQL(", ").join(_ident(c) for c in columns)
        )
        try:
            with owner.transaction(), owner.cursor().copy(statement) as copy:
                for batch in data.rows(table, columns).batches():
                    for row in batch:
                        copy.write_row(row)
        except psycopg.Error as exc:
            raise BankError(
                f"{name}: cannot load table {table}: PostgreSQL error: {_first_line(exc)}",
                hint=load_hint(str(exc)),
            ) from None
