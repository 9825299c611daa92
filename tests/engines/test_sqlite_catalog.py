"""The SQLite function allow-list: generated from the linked SQLite, judged by rule, used by
the guard and the worker's authorizer."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledger.engines import sqlite_catalog
from ledger.engines.functions import render
from ledger.harness import determinism

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "ledger" / "engines" / sqlite_catalog.DATA_FILE


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_sqlite", REPO / "tools" / "gen_sqlite_allowlist.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _linked_functions() -> set[str]:
    con = sqlite3.connect(":memory:")
    try:
        return {str(r[0]) for r in con.execute("PRAGMA function_list").fetchall()}
    finally:
        con.close()


def test_checked_in_file_is_what_the_generator_writes() -> None:
    assert DATA.read_text(encoding="utf-8") == render(_tool().generate())


def test_check_mode_says_up_to_date_and_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    before = DATA.stat().st_mtime_ns
    assert _tool().main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert DATA.stat().st_mtime_ns == before


def test_the_file_names_the_sqlite_it_came_from() -> None:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    assert (doc["engine"], doc["engine_version"]) == ("SQLite", sqlite3.sqlite_version)


def test_every_linked_function_is_judged() -> None:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    judged = {f["name"] for f in doc["functions"]}
    assert _linked_functions() <= judged


# Denied by a rule, each with the category the rule gives (stated by hand).
DENIED = {
    "load_extension": "extensions",
    "fts3_tokenizer": "extensions",
    "random": "non_reproducible",
    "randomblob": "non_reproducible",
    "current_timestamp": "non_reproducible",
    "current_date": "non_reproducible",
    "current_time": "non_reproducible",
    "sqlite_version": "environment",
    "sqlite_source_id": "environment",
    "sqlite_compileoption_get": "environment",
    "sqlite_compileoption_used": "environment",
    "sqlite_log": "side_effects",
    "changes": "session",
    "total_changes": "session",
    "last_insert_rowid": "session",
    "optimize": "side_effects",
    "snippet": "full_text",
}


@pytest.mark.parametrize(("name", "category"), sorted(DENIED.items()))
def test_dangerous_or_non_reproducible_functions_are_denied(name: str, category: str) -> None:
    cat = sqlite_catalog.catalog()
    assert name in _linked_functions()  # the rule is about a function this SQLite has
    assert name not in cat.calls
    assert cat.denied[name][0] == category
    assert cat.call_refusal(name) == f"is denied ({category}: {cat.denied[name][1]})"


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("readfile", "files"),
        ("writefile", "files"),
        ("edit", "files"),
        ("sqlite_offset", "internal"),
        ("sqlite_rename_column", "internal"),
        ("fts5_source_id", "environment"),
    ],
)
def test_rules_deny_functions_this_build_lacks(name: str, category: str) -> None:
    # The shell's file functions and the offset function are not in this library; a
    # build that links them gets them denied by the same rules.
    entry = sqlite_catalog.judge_entry(name, "scalar")
    assert (entry.allowed, entry.category) == (False, category)


ALLOWED = [
    *("instr", "iif", "substr", "printf", "group_concat", "total", "sum", "count"),
    *("json_extract", "json_object", "json_group_array", "->", "->>"),
    *("unlikely", "likely", "likelihood", "strftime", "date", "julianday", "unixepoch"),
    *("row_number", "rank", "lag", "ntile", "zeroblob", "typeof", "like", "glob"),
]


@pytest.mark.parametrize("name", ALLOWED)
def test_ordinary_functions_are_allowed(name: str) -> None:
    assert name in sqlite_catalog.catalog().calls
    assert sqlite_catalog.catalog().call_refusal(name.upper()) is None


@pytest.mark.parametrize("module", ["json_each", "json_tree", "dbstat", "fts5", "rtree"])
def test_table_valued_functions_are_denied(module: str) -> None:
    cat = sqlite_catalog.catalog()
    assert module not in cat.from_functions
    entries = [e for e in cat.entries if e.name == module and e.type == "table"]
    assert [e.allowed for e in entries] == [False]


def test_an_unknown_function_is_refused_naming_sqlite() -> None:
    why = sqlite_catalog.catalog().call_refusal("list_value")
    assert why == (f"is not a SQLite {sqlite3.sqlite_version} function the allow-list knows")


@pytest.mark.parametrize(
    ("sql", "found"),
    [
        ("SELECT date('now')", ["now"]),
        ("SELECT datetime(ts, 'localtime') FROM t", ["localtime"]),
        ("SELECT strftime('%Y', 'NOW') FROM t", ["NOW"]),
        ("SELECT julianday(' now ') - julianday(ts) FROM t", [" now "]),
        ("SELECT date(ts, 'utc', 'start of month') FROM t", ["utc"]),
        ("SELECT unixepoch('now')", ["now"]),
        ("SELECT date(ts, 'start of month', '+1 month') FROM t", []),
        ("SELECT ts FROM t WHERE zone = 'UTC' OR label = 'now'", []),
        ("SELECT 'now' AS word", []),
    ],
)
def test_clock_and_zone_arguments_are_found(sql: str, found: list[str]) -> None:
    # Issue 30: the guard's deterministic check (ledger.harness.determinism) owns the rule.
    assert determinism.refusals(sql, "sqlite") == tuple(
        f"the argument '{w}' reads the clock or the host's time zone; results would differ "
        "on re-execution"
        for w in found
    )
