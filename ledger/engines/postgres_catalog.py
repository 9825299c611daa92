"""PostgreSQL's function catalog judged into an allow-list (``postgres_functions.json``).

Part of the PostgreSQL engine (``ledger.engines.postgres``): the deny rules by name
and signature, the grammar functions, the judging of one catalog function, and the
checked-in allow-list read as a ``ledger.engines.functions.Catalog``
(``tools/gen_postgres_allowlist.py`` writes it from a live server).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from ledger.engines.functions import Catalog, DenyRule, FunctionEntry, denied_by, fold, name_denial

DATA_FILE = "postgres_functions.json"


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
    """The checked-in PostgreSQL allow-list as a :class:`ledger.engines.functions.Catalog`.

    The file names the server version ``server_version``; Catalog reads the
    version from ``duckdb_version``, so it is passed under that key too.
    """
    text = resources.files("ledger.engines").joinpath(DATA_FILE).read_text(encoding="utf-8")
    doc = json.loads(text)
    return Catalog({**doc, "duckdb_version": doc["server_version"]})
