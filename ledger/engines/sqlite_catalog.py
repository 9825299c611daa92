"""SQLite's function catalog, judged: which functions a model's SQL may call on SQLite.

The allow-list is generated from the linked SQLite's own catalog (``PRAGMA
function_list`` and ``PRAGMA module_list`` of a default in-memory connection)
by ``tools/gen_sqlite_allowlist.py`` and checked in as ``sqlite_functions.json``
beside this module, in the format of DuckDB's list
(``ledger.engines.functions``). Every (name, type) is either allowed or denied
by the first rule of ``DENY_RULES`` that matches its name; a function the list
does not know is refused (fail closed), so a newer SQLite with more functions
gains nothing until the list is regenerated and reviewed.

Two consumers read the same list: the SQLite worker's authorizer (a call of a
name that is not allowed is refused before the statement runs) and the guard
(:class:`SQLiteCatalog`, a :class:`ledger.engines.functions.Catalog`).

Table-valued functions (eponymous virtual tables: ``json_each``,
``json_tree``, ``pragma_*``, ``dbstat``, ...) are all denied: SQLite registers
one by writing its schema entry, which the authorizer sees as an update of
``sqlite_master`` and cannot tell apart from a schema write.

The date and time functions take the clock or the host's time zone from an
*argument* (``date('now')``, ``datetime(x, 'localtime')``), which no name rule
can deny: the guard's ``deterministic`` check (``ledger.harness.determinism``)
judges those arguments (docs/engines.md "SQLite").
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable
from importlib import resources
from typing import Any

import msgspec

from ledger.engines.functions import Catalog, DenyRule, FunctionEntry, fold, name_denial

__all__ = [
    "DATA_FILE",
    "DENY_RULES",
    "SQLiteCatalog",
    "allowed_calls",
    "build_entries",
    "catalog",
    "document",
    "fold",
    "judge_entry",
    "read_catalog",
]

DATA_FILE = "sqlite_functions.json"

# The deny list, first match wins. Categories as DuckDB's list, plus extensions,
# full_text and table_function.
DENY_RULES: tuple[DenyRule, ...] = (
    # ---- native code and files
    DenyRule("load_extension", "extensions", "loads a shared library (native code)"),
    DenyRule("readfile", "files", "reads a file (a sqlite3 shell function)"),
    DenyRule("writefile", "files", "writes a file (a sqlite3 shell function)"),
    DenyRule("edit", "files", "runs an editor (a sqlite3 shell function)"),
    DenyRule("fts3_tokenizer", "extensions", "registers a tokenizer by raw pointer"),
    # ---- the environment of the process
    DenyRule("sqlite_version", "environment", "the engine's version"),
    DenyRule("sqlite_source_id", "environment", "the engine's build"),
    DenyRule("sqlite_compileoption_*", "environment", "the engine's compile options"),
    DenyRule("fts5_source_id", "environment", "the engine's build"),
    # ---- storage internals and side effects
    DenyRule("sqlite_offset", "internal", "the file offset of a row: page layout, not data"),
    DenyRule("sqlite_log", "side_effects", "writes to SQLite's error log"),
    DenyRule("sqlite_*", "internal", "internal to SQLite"),
    # ---- session state
    DenyRule("changes", "session", "rows changed by this connection's last write"),
    DenyRule("total_changes", "session", "rows changed by this connection"),
    DenyRule("last_insert_rowid", "session", "this connection's last insert"),
    # ---- not reproducible: a clock or a random source
    DenyRule("random", "non_reproducible", "a random number"),
    DenyRule("randomblob", "non_reproducible", "random bytes"),
    DenyRule("current_date", "non_reproducible", "the clock"),
    DenyRule("current_time", "non_reproducible", "the clock"),
    DenyRule("current_timestamp", "non_reproducible", "the clock"),
    # ---- full-text search and R*Tree internals (a bank has no such tables)
    DenyRule("optimize", "side_effects", "merges a full-text index (writes its shadow tables)"),
    DenyRule("fts*", "full_text", "full-text search internals"),
    DenyRule("bm25", "full_text", "full-text search auxiliary function"),
    DenyRule("highlight", "full_text", "full-text search auxiliary function"),
    DenyRule("snippet", "full_text", "full-text search auxiliary function"),
    DenyRule("offsets", "full_text", "full-text search auxiliary function"),
    DenyRule("matchinfo", "full_text", "full-text search auxiliary function"),
    DenyRule("match", "full_text", "the MATCH operator of full-text tables"),
    DenyRule("rtree*", "internal", "R*Tree internals"),
)  # fmt: skip

# PRAGMA function_list's type letter -> the function type of the shared format. Window
# functions are listed as aggregates, as in DuckDB's list (a call either way).
_TYPES = {"s": "scalar", "a": "aggregate", "w": "aggregate"}

_TABLE_REASON = (
    "a table-valued function (virtual table): SQLite registers it by writing its schema "
    "entry, so the worker's authorizer refuses every one"
)

# Calls sqlglot produces that are SQLite syntax, not catalog functions.
SYNTAX_CALLS: frozenset[str] = frozenset({"cast", "case", "exists", "collate", "distinct"})


def judge_entry(name: str, function_type: str) -> FunctionEntry:
    """The verdict on one catalog entry: the first deny rule, else the type's rule.

    >>> judge_entry("load_extension", "scalar").category
    'extensions'
    >>> judge_entry("instr", "scalar").allowed, judge_entry("json_each", "table").allowed
    (True, False)
    """
    denied = name_denial(DENY_RULES, name, function_type)
    if denied is not None:
        return denied
    # SQLite: every table-valued function is denied (see the module docstring), so,
    # unlike DuckDB's list, none is allowed in FROM and there is no pragma type.
    if function_type == "table":
        return FunctionEntry(
            name=name, type=function_type, allowed=False, category="table_function"
        )
    return FunctionEntry(name=name, type=function_type, allowed=True)


def build_entries(rows: Iterable[tuple[str, str]]) -> list[FunctionEntry]:
    """Judge every distinct (name, function type), sorted by name then type."""
    return [judge_entry(name, kind) for name, kind in sorted(set(rows))]


def read_catalog(con: sqlite3.Connection) -> list[tuple[str, str]]:
    """(name, function type) of every function and virtual table module ``con`` knows."""
    # The PRAGMA statements, not their pragma_* tables: reading one registers it as a module.
    rows = [
        (str(r[0]), _TYPES.get(str(r[2]), str(r[2])))
        for r in con.execute("PRAGMA function_list").fetchall()
    ]
    rows += [(str(r[0]), "table") for r in con.execute("PRAGMA module_list").fetchall()]
    return rows


def document(entries: list[FunctionEntry], *, sqlite_version: str) -> dict[str, Any]:
    """The checked-in JSON document (a plain dict with a fixed key order)."""
    return {
        "generated_by": "tools/gen_sqlite_allowlist.py",
        "engine": "SQLite",
        "engine_version": sqlite_version,
        "deny_rules": [msgspec.to_builtins(r) for r in DENY_RULES],
        "functions": [msgspec.to_builtins(e) for e in entries],
    }


class SQLiteCatalog(Catalog):
    """The judged SQLite catalog as set lookups (the guard's and the authorizer's).

    ``Catalog`` still requires the key ``duckdb_version``: :func:`catalog` passes
    the SQLite version under it too. :meth:`Catalog.call_refusal` judges with
    SQLite's syntax calls, and its refusals name SQLite (the file's ``engine``):

    >>> catalog().call_refusal("instr") is None
    True
    >>> catalog().call_refusal("random")
    'is denied (non_reproducible: a random number)'
    >>> catalog().call_refusal("list_value")
    'is not a SQLite ... function the allow-list knows'
    """

    syntax_calls = SYNTAX_CALLS


@functools.cache
def catalog() -> SQLiteCatalog:
    """The checked-in SQLite catalog, loaded once."""
    text = resources.files("ledger.engines").joinpath(DATA_FILE).read_text(encoding="utf-8")
    doc = json.loads(text)
    return SQLiteCatalog({**doc, "duckdb_version": doc["engine_version"]})


@functools.cache
def allowed_calls() -> frozenset[str]:
    """Folded names the worker's authorizer lets a statement call."""
    return catalog().calls
