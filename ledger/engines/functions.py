"""DuckDB's function catalog, judged: which functions a model's SQL may call.

The allow-list is generated from DuckDB 1.5.5's own catalog (``duckdb_functions()``
of a default in-memory database, the same catalog the worker's sealed connection
has) by ``tools/gen_function_allowlist.py`` and checked in as
``duckdb_functions.json`` beside this module. Every (name, function type) of the
catalog is either allowed or denied by the first rule of ``DENY_RULES`` that
matches its name; a function the catalog does not know is refused (fail closed).

Table functions are allowed only in FROM and only ``unnest``, ``range`` and
``generate_series`` (``ALLOWED_FROM``); PRAGMA functions never. Scalar,
aggregate, window and macro functions are allowed unless a rule denies them.
docs/protocol-and-guard.md lists the rules with their reasons.
The catalogs are data: this module imports no parser, so a SQL worker that only
executes never loads sqlglot (issue 34). ``ledger.harness.function_calls`` maps a sqlglot
function node to an engine's names for it and judges it against a catalog (the guard's
``function_allowlist`` check). The SQLite and PostgreSQL
catalogs (``sqlite_catalog``, ``postgres_catalog``) are built from the same parts
(``Catalog``, ``DenyRule``, ``name_denial``); ``DIALECT_NOTES`` is what the prompt tells
a model about DuckDB's SQL.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import string
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, ClassVar

import msgspec

__all__ = [
    "ALLOWED_FROM",
    "CALL_TYPES",
    "DATA_FILE",
    "DENY_RULES",
    "DIALECT_NOTES",
    "DUCKDB_VERSION",
    "SYNTAX_CALLS",
    "Catalog",
    "DenyRule",
    "FunctionEntry",
    "build_entries",
    "catalog",
    "denied_by",
    "document",
    "fold",
    "judge_entry",
    "matches",
    "name_denial",
    "render",
]

DUCKDB_VERSION = "1.5.5"

#: What the prompt's ``{{dialect}}`` tells a model about DuckDB's SQL (the bank's engine).
DIALECT_NOTES = """\
SQL dialect: DuckDB 1.5.5.
- The session time zone is UTC. TIMESTAMP values are naive and read as UTC;
  TIMESTAMPTZ values are instants. Convert with `ts AT TIME ZONE 'Asia/Shanghai'`
  (TIMESTAMPTZ -> local naive TIMESTAMP) or `local_ts AT TIME ZONE 'Asia/Shanghai'`
  (naive local TIMESTAMP -> TIMESTAMPTZ).
- Dates: `DATE '2026-09-01'`, `TIMESTAMP '2026-09-01 00:00:00'`, `INTERVAL 1 MONTH`,
  `date_trunc('month', ts)`, `date_part('year', d)`, `strftime(ts, '%Y-%m')`,
  `date_diff('day', a, b)`, `last_day(d)`. Prefer half-open ranges: `ts >= start AND ts < end`.
- Calendar spines: `generate_series(DATE '2026-01-01', DATE '2026-12-01', INTERVAL 1 MONTH)`
  or `range(...)` in FROM; `unnest([...])` for literal lists.
- Window functions: ROW_NUMBER/RANK/DENSE_RANK/LAG/LEAD/SUM(...) OVER (...); filter on
  them with QUALIFY. GROUP BY ALL, ORDER BY ALL, GROUPING SETS, ROLLUP and CUBE exist.
- `count(DISTINCT x)`, `sum(x) FILTER (WHERE ...)`, `coalesce`, `nullif`, `CASE WHEN`.
  Integer division `/` returns a DOUBLE; use `//` for integer division.
- NULL semantics are standard SQL: `x = NULL` is never true, `NOT IN` with a NULL matches
  nothing; use `IS NULL`, `IS DISTINCT FROM` and `NOT EXISTS`.
- The query must be a single read-only SELECT (WITH allowed) over the tables below; no
  DDL, DML, PRAGMA, SET, ATTACH, COPY or file functions.
"""
DATA_FILE = "duckdb_functions.json"

# Function types a call in an expression resolves to (window functions are aggregates
# in duckdb_functions()).
CALL_TYPES = frozenset({"scalar", "aggregate", "macro"})
# Table functions a FROM clause may call (DESIGN.md "Guard" fine print); VALUES is syntax.
ALLOWED_FROM: tuple[str, ...] = ("unnest", "range", "generate_series")

# Calls the parsers produce that are DuckDB syntax, not catalog functions: DuckDB
# implements them as operators or rewrites them (EXTRACT -> date_part). ``unnest``
# and ``unlist`` are the select-list UNNEST (a table function in the catalog).
SYNTAX_CALLS: frozenset[str] = frozenset(
    {
        *("cast", "try_cast", "extract", "coalesce", "case", "if", "ifnull", "nvl"),
        *("unnest", "unlist", "grouping", "grouping_id", "try", "exists", "struct"),
        *("array", "list", "map", "columns", "interval", "collate", "distinct"),
    }
)


class DenyRule(msgspec.Struct, frozen=True):
    """Names matching ``pattern`` (exact, or an fnmatch glob) are denied for ``reason``."""

    pattern: str
    category: str
    reason: str


# The documented deny list, first match wins. Categories: sql_text, settings, session,
# catalog, environment, files, side_effects, non_reproducible, internal.
DENY_RULES: tuple[DenyRule, ...] = (
    # ---- anything that takes, runs or returns SQL text or a plan
    DenyRule("json_serialize_sql", "sql_text", "parses SQL text given as a string"),
    DenyRule("json_serialize_plan", "sql_text", "plans and runs the binder on SQL text"),
    DenyRule("json_deserialize_sql", "sql_text", "turns a parse tree back into SQL text"),
    DenyRule("json_execute_serialized_sql", "sql_text", "executes a serialized statement"),
    DenyRule("query", "sql_text", "executes SQL text given as a string"),
    DenyRule("query_table", "sql_text", "reads a table named by a runtime string"),
    DenyRule("current_query", "sql_text", "returns the text of the running statement"),
    # ---- settings and variables
    DenyRule("current_setting", "settings", "reads configuration, including paths"),
    DenyRule("getvariable", "settings", "reads session variables"),
    # ---- session
    DenyRule("current_user", "session", "names the session user"),
    DenyRule("session_user", "session", "names the session user"),
    DenyRule("user", "session", "names the session user"),
    DenyRule("current_role", "session", "names the session role"),
    DenyRule("current_connection_id", "session", "an id of this connection"),
    DenyRule("current_query_id", "session", "an id of this statement"),
    DenyRule("current_transaction_id", "session", "an id of this transaction"),
    DenyRule("txid_current", "session", "an id of this transaction"),
    DenyRule("inet_*", "session", "client and server addresses of the session"),
    # ---- catalog introspection
    DenyRule("current_database", "catalog", "names the database (its file)"),
    DenyRule("current_catalog", "catalog", "names the database (its file)"),
    DenyRule("current_schema", "catalog", "names the current schema"),
    DenyRule("current_schemas", "catalog", "lists the search path"),
    DenyRule("in_search_path", "catalog", "inspects the search path"),
    DenyRule("duckdb_*", "catalog", "catalog and settings listings (databases, paths, settings)"),
    DenyRule("pragma_*", "catalog", "pragma listings (tables, storage, version)"),
    DenyRule("pg_*", "catalog", "PostgreSQL catalog compatibility functions"),
    DenyRule("has_*_privilege", "catalog", "PostgreSQL privilege introspection"),
    DenyRule("*_description", "catalog", "PostgreSQL catalog comments"),
    DenyRule("format_pg_type", "catalog", "PostgreSQL catalog compatibility"),
    DenyRule("format_type", "catalog", "PostgreSQL catalog compatibility"),
    DenyRule("map_to_pg_oid", "catalog", "PostgreSQL catalog compatibility"),
    DenyRule("get_block_size", "catalog", "storage information of an attached database"),
    DenyRule("database_*", "catalog", "database listings and sizes"),
    DenyRule("show*", "catalog", "catalog listings"),
    DenyRule("table_info", "catalog", "catalog listing"),
    DenyRule("storage_info", "catalog", "storage listing"),
    DenyRule("metadata_info", "catalog", "storage listing"),
    DenyRule("functions", "catalog", "catalog listing"),
    DenyRule("collations", "catalog", "catalog listing"),
    DenyRule("which_secret", "catalog", "names secrets"),
    # ---- the environment of the process
    DenyRule("version", "environment", "the engine's version"),
    DenyRule("platform", "environment", "the host platform"),
    DenyRule("user_agent", "environment", "the host and client"),
    DenyRule("extension_versions", "environment", "installed extensions"),
    # ---- files
    DenyRule("read_*", "files", "reads files"),
    DenyRule("glob", "files", "lists files"),
    DenyRule("sniff_csv", "files", "reads a file"),
    DenyRule("parquet_*", "files", "reads file metadata"),
    DenyRule("*_scan", "files", "scans a file or a client object"),
    DenyRule("copy_database", "files", "copies a database"),
    DenyRule("import_database", "files", "imports files"),
    DenyRule("add_parquet_key", "files", "registers an encryption key"),
    # ---- side effects on the session, the log or the database
    DenyRule("write_log", "side_effects", "writes to DuckDB's log"),
    DenyRule("setseed", "side_effects", "changes the session's random state"),
    DenyRule("nextval", "side_effects", "advances a sequence"),
    DenyRule("currval", "side_effects", "reads a sequence's session state"),
    DenyRule("checkpoint", "side_effects", "writes the database"),
    DenyRule("force_checkpoint", "side_effects", "writes the database"),
    DenyRule("enable_*", "side_effects", "changes session settings"),
    DenyRule("disable_*", "side_effects", "changes session settings"),
    DenyRule("truncate_duckdb_logs", "side_effects", "clears DuckDB's log"),
    DenyRule("verify_*", "side_effects", "changes session settings"),
    DenyRule("all_profiling_output", "side_effects", "profiler output of the session"),
    # ---- not reproducible: a clock, a random source or a delay
    DenyRule("random", "non_reproducible", "a random number"),
    DenyRule("uuid", "non_reproducible", "a random UUID"),
    DenyRule("uuidv4", "non_reproducible", "a random UUID"),
    DenyRule("uuidv7", "non_reproducible", "a time-based random UUID"),
    DenyRule("gen_random_uuid", "non_reproducible", "a random UUID"),
    DenyRule("sleep_ms", "non_reproducible", "stalls the worker"),
    DenyRule("now", "non_reproducible", "the clock"),
    DenyRule("today", "non_reproducible", "the clock"),
    DenyRule("current_date", "non_reproducible", "the clock"),
    DenyRule("current_localtime", "non_reproducible", "the clock"),
    DenyRule("current_localtimestamp", "non_reproducible", "the clock"),
    DenyRule("get_current_time", "non_reproducible", "the clock"),
    DenyRule("get_current_timestamp", "non_reproducible", "the clock"),
    DenyRule("transaction_timestamp", "non_reproducible", "the clock"),
    DenyRule("ago", "non_reproducible", "the clock (now() minus an interval)"),
    DenyRule("approx_*", "non_reproducible", "an estimate that varies with the row order"),
    DenyRule("list_approx_*", "non_reproducible", "an estimate (an approximate aggregate)"),
    DenyRule("reservoir_*", "non_reproducible", "a random sample (reservoir sampling)"),
    # ---- internals of the engine or of a client
    DenyRule("__internal_*", "internal", "internal to DuckDB's optimizer"),
    DenyRule("vector_type", "internal", "an engine debugging function"),
    DenyRule("stats", "internal", "storage statistics of an expression"),
    DenyRule("test_*", "internal", "engine test fixtures"),
    DenyRule("python_map_function", "internal", "runs client code"),
)


class FunctionEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One (name, function type) of the catalog and the verdict on it."""

    name: str
    type: str
    allowed: bool
    category: str | None = None
    rule: str | None = None


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def fold(name: str) -> str:
    """Fold a function name the way DuckDB looks functions up (ASCII letters only).

    >>> fold("formatReadableSize")
    'formatreadablesize'
    """
    return name.translate(_ASCII_LOWER)


def matches(rule: DenyRule, name: str) -> bool:
    """Whether a deny rule's pattern (a name, or a glob with * ? [) covers ``name``."""
    if any(ch in rule.pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name, rule.pattern)
    return name == rule.pattern


def denied_by(rule: DenyRule, name: str, function_type: str) -> FunctionEntry:
    """The entry (name, type) denied by ``rule``: its category, its pattern as the rule."""
    return FunctionEntry(
        name=name, type=function_type, allowed=False, category=rule.category, rule=rule.pattern
    )


def name_denial(rules: Iterable[DenyRule], name: str, function_type: str) -> FunctionEntry | None:
    """The entry denied by the first of ``rules`` that covers ``name`` (folded), else None.

    Every engine's allow-list judges a name this way first (DuckDB, SQLite,
    PostgreSQL); what happens to a name no rule denies depends on the engine's
    function types, so each engine's judge goes on with its own type rules.

    >>> name_denial(DENY_RULES, "Current_Setting", "scalar").rule
    'current_setting'
    >>> name_denial(DENY_RULES, "lower", "scalar") is None
    True
    """
    folded = fold(name)
    for rule in rules:
        if matches(rule, folded):
            return denied_by(rule, name, function_type)
    return None


def judge_entry(name: str, function_type: str) -> FunctionEntry:
    """The verdict on one DuckDB catalog entry: the first deny rule, else the type's rule.

    >>> judge_entry("current_setting", "scalar").category
    'settings'
    >>> judge_entry("lower", "scalar").allowed, judge_entry("range", "table").allowed
    (True, True)
    >>> judge_entry("json_each", "table").category
    'table_function'
    """
    denied = name_denial(DENY_RULES, name, function_type)
    if denied is not None:
        return denied
    folded = fold(name)
    # DuckDB: a pragma is never a query function; a table function only when allowed in FROM.
    if function_type == "pragma":
        return FunctionEntry(name=name, type=function_type, allowed=False, category="pragma")
    if function_type in ("table", "table_macro") and folded not in ALLOWED_FROM:
        return FunctionEntry(
            name=name, type=function_type, allowed=False, category="table_function"
        )
    return FunctionEntry(name=name, type=function_type, allowed=True)


def build_entries(rows: Iterable[tuple[str, str]]) -> list[FunctionEntry]:
    """Judge every distinct (name, function_type) of a catalog, sorted by name then type."""
    return [judge_entry(name, kind) for name, kind in sorted(set(rows))]


def document(
    entries: list[FunctionEntry], *, duckdb_version: str, extensions: list[str]
) -> dict[str, Any]:
    """The checked-in JSON document (a plain dict with a fixed key order)."""
    return {
        "generated_by": "tools/gen_function_allowlist.py",
        "duckdb_version": duckdb_version,
        "extensions": sorted(extensions),
        "deny_rules": [msgspec.to_builtins(r) for r in DENY_RULES],
        "functions": [msgspec.to_builtins(e) for e in entries],
    }


def render(doc: Mapping[str, Any]) -> str:
    """The exact text of the data file: one function per line, so diffs stay reviewable."""
    head = {k: v for k, v in doc.items() if k != "functions"}
    lines = [json.dumps(head, indent=1, ensure_ascii=False)[:-2] + ","]
    lines.append(' "functions": [')
    rows = [json.dumps(f, ensure_ascii=False, separators=(", ", ": ")) for f in doc["functions"]]
    lines.append(",\n".join(f"  {row}" for row in rows))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


class Catalog:
    """The judged catalog as set lookups (the guard's hot path).

    ``calls``: names a scalar, aggregate, window or macro call may use;
    ``from_functions``: table functions allowed in FROM; ``denied``: name ->
    (category, reason) of the first denied entry of that name.
    """

    #: Names the engine's grammar calls like functions (``CAST``, ``CASE``, ...): allowed.
    syntax_calls: ClassVar[frozenset[str]] = SYNTAX_CALLS

    def __init__(self, doc: Mapping[str, Any]) -> None:
        entries = [msgspec.convert(e, FunctionEntry) for e in doc["functions"]]
        reasons = {r["pattern"]: r["reason"] for r in doc["deny_rules"]}
        # An engine's catalog may name only its own version (``engine_version``).
        self.duckdb_version: str = doc.get("duckdb_version", doc.get("engine_version", ""))
        # Another engine's catalog names itself (``engine``), else it is DuckDB's.
        self.engine_label: str = doc.get("engine", "DuckDB")
        self.engine_version: str = doc.get("engine_version", self.duckdb_version)
        self.entries: tuple[FunctionEntry, ...] = tuple(entries)
        self.known: frozenset[str] = frozenset(fold(e.name) for e in entries)
        self.calls: frozenset[str] = frozenset(
            fold(e.name) for e in entries if e.allowed and e.type in CALL_TYPES
        )
        self.from_functions: frozenset[str] = frozenset(
            fold(e.name) for e in entries if e.allowed and e.type in ("table", "table_macro")
        )
        denied: dict[str, tuple[str, str]] = {}
        for e in entries:
            if not e.allowed and e.category is not None:
                why = reasons.get(e.rule or "", _TYPE_REASONS.get(e.category, e.category))
                denied.setdefault(fold(e.name), (e.category, why))
        self.denied: Mapping[str, tuple[str, str]] = denied

    def call_refusal(self, name: str) -> str | None:
        """Why a scalar/aggregate/window call of ``name`` is refused, or None when allowed.

        >>> catalog().call_refusal("lower") is None
        True
        >>> catalog().call_refusal("current_setting")
        'is denied (settings: reads configuration, including paths)'
        >>> catalog().call_refusal("no_such_function")
        'is not a DuckDB 1.5.5 function the allow-list knows'
        """
        folded = fold(name)
        if folded in self.calls or folded in self.syntax_calls:
            return None
        found = self.denied.get(folded)
        if found is not None:
            return f"is denied ({found[0]}: {found[1]})"
        return f"is not a {self.engine_label} {self.engine_version} function the allow-list knows"


_TYPE_REASONS = {
    "table_function": "a table function; only unnest, range and generate_series in FROM",
    "pragma": "a PRAGMA, not a query function",
}


@functools.cache
def catalog() -> Catalog:
    """The checked-in catalog, loaded once."""
    text = resources.files("ledger.engines").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return Catalog(json.loads(text))
