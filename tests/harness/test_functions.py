"""The function allow-list: generated from DuckDB's catalog, covering it, applied by the guard."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ledger.engines import functions
from ledger.engines.duckdb_worker import connect_sandboxed
from ledger.harness.guard import guard

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "ledger" / "engines" / functions.DATA_FILE
TABLES = ("orders", "customers")


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen", REPO / "tools" / "gen_function_allowlist.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _quiet_sqlglot() -> Iterator[None]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def _catalog_rows(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    rows = con.execute(
        "SELECT function_name, function_type FROM duckdb_functions() WHERE database_name = 'system'"
    ).fetchall()
    return {(str(n), str(t)) for n, t in rows}


# ------------------------------------------------------------ generated file vs catalog


def test_checked_in_file_is_what_the_generator_writes() -> None:
    tool = _tool()
    assert DATA.read_text(encoding="utf-8") == functions.render(tool.generate())


def test_generator_refuses_another_duckdb_version(monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool()
    monkeypatch.setattr(tool.duckdb, "__version__", "1.4.0")
    with pytest.raises(SystemExit, match=r"DuckDB 1\.4\.0 is running.*1\.5\.5 exactly"):
        tool.generate()


def test_every_catalog_function_is_allowed_or_denied() -> None:
    # "The lists cover the catalog": each (name, type) of DuckDB's catalog has exactly one
    # entry, allowed or denied with a category; nothing of the catalog is left unjudged.
    with duckdb.connect() as con:
        catalog_rows = _catalog_rows(con)
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    entries = {(f["name"], f["type"]): f for f in doc["functions"]}
    assert set(entries) == catalog_rows
    assert len(entries) == len(doc["functions"])
    for entry in entries.values():
        assert entry["allowed"] is (entry["category"] is None)
    assert doc["duckdb_version"] == duckdb.__version__ == "1.5.5"
    assert doc["extensions"] == ["core_functions", "icu", "json", "parquet"]


def test_the_sealed_worker_connection_has_the_same_catalog(tmp_path: Path) -> None:
    # The list is generated in memory; the worker's read-only, sealed database must not
    # know one function more (or fewer).
    path = tmp_path / "bank.duckdb"
    with duckdb.connect(str(path)) as build:
        build.execute("CREATE TABLE t (a INTEGER)")
    con = connect_sandboxed(path)
    try:
        sealed = _catalog_rows(con)
    finally:
        con.close()
    with duckdb.connect() as memory:
        assert sealed == _catalog_rows(memory)


def test_every_deny_rule_names_something_in_the_catalog() -> None:
    # No typos: an exact name exists in the catalog, a pattern matches at least one name.
    with duckdb.connect() as con:
        names = {functions.fold(n) for n, _ in _catalog_rows(con)}
    for rule in functions.DENY_RULES:
        matched = [n for n in names if functions.matches(rule, n)]
        assert matched, f"deny rule {rule.pattern!r} matches no DuckDB function"
        assert rule.reason
        assert rule.category


def test_brief_examples_are_denied_with_their_category() -> None:
    expected = {
        "json_serialize_plan": "sql_text",
        "json_serialize_sql": "sql_text",
        "json_execute_serialized_sql": "sql_text",
        "query": "sql_text",
        "query_table": "sql_text",
        "current_setting": "settings",
        "getvariable": "settings",
        "current_database": "catalog",
        "current_schema": "catalog",
        "current_schemas": "catalog",
        "pg_typeof": "catalog",
        "duckdb_databases": "catalog",
        "version": "environment",
        "write_log": "side_effects",
        "random": "non_reproducible",
        "uuid": "non_reproducible",
        "gen_random_uuid": "non_reproducible",
        "sleep_ms": "non_reproducible",
        "now": "non_reproducible",
        "get_current_timestamp": "non_reproducible",
        "read_csv": "files",
        "glob": "files",
    }
    denied = functions.catalog().denied
    assert {name: denied[name][0] for name in expected} == expected


def test_allowed_from_and_call_sets() -> None:
    cat = functions.catalog()
    assert cat.from_functions == {"unnest", "range", "generate_series"}
    for name in ("sum", "row_number", "lag", "regexp_extract", "list_transform", "date_trunc",
                 "struct_pack", "strftime", "quantile_cont", "+", "~~"):  # fmt: skip
        assert name in cat.calls, name
    for name in ("current_setting", "now", "read_csv", "duckdb_settings", "json_each"):
        assert name not in cat.calls, name


# ------------------------------------------------------------ the guard applies the list


def _denied_call_names() -> list[str]:
    cat = functions.catalog()
    names = {functions.fold(e.name) for e in cat.entries if not e.allowed}
    names -= cat.calls | cat.from_functions
    return sorted(n for n in names if re.fullmatch(r"[a-z_][a-z0-9_]*", n))


@pytest.mark.parametrize("name", _denied_call_names())
@pytest.mark.no_cover  # see pyproject.toml: repeats covered paths
def test_every_denied_function_is_refused_by_the_guard(name: str) -> None:
    # Generated from the catalog: whatever class sqlglot parses the call into, and with
    # whatever arity, a denied function never passes.
    # S608: the SQL is built from the catalog's own names on purpose, to probe the guard.
    for args in ("", "1", "'x'", "1, 2", "'a', 'b', 'c'"):
        call = f"{name}({args})"
        for sql in (f"SELECT {call}", f"SELECT * FROM orders WHERE {call} IS NULL"):  # noqa: S608
            assert not guard(sql, TABLES).passed, sql
        assert not guard(f"SELECT * FROM {call}", TABLES).passed  # noqa: S608


def _allowed_call_names() -> list[str]:
    cat = functions.catalog()
    return sorted(
        n for n in cat.calls if re.fullmatch(r"[a-z][a-z0-9_]*", n) and n not in cat.denied
    )


def test_allowed_functions_pass_the_guard() -> None:
    # Every allowed name, called with the first arity sqlglot accepts, passes: the guard's
    # mapping from sqlglot classes to DuckDB names loses none of them.
    refused = []
    for name in _allowed_call_names():
        verdicts = []
        arities = ("x", "x, y", "x, y, z", "", "x, y, z, w")
        if name == "age":  # age(x) is the age from today: refused by `deterministic` (issue 30)
            arities = arities[1:]
        for args in arities:
            try:
                # S608: built from the catalog's own names on purpose, to probe the guard
                verdict = guard(f"SELECT {name}({args}) FROM orders", TABLES)  # noqa: S608
            except RecursionError:  # pragma: no cover - never seen
                continue
            if verdict.violations and verdict.violations[0].check == "parse":
                continue
            verdicts.append(verdict)
            break
        if verdicts and not verdicts[0].passed:
            refused.append((name, verdicts[0].violations))
    assert refused == []


def test_unknown_function_is_refused_with_its_name() -> None:
    verdict = guard("SELECT no_such_fn(1)", TABLES)
    assert [(v.check, v.message) for v in verdict.violations] == [
        (
            "function_allowlist",
            "function no_such_fn() (line 1, col 8) is not a DuckDB 1.5.5 function the "
            "allow-list knows",
        )
    ]


def test_call_refusal_is_a_set_lookup() -> None:
    cat = functions.catalog()
    assert isinstance(cat.calls, frozenset)
    assert cat.call_refusal("LOWER") is None  # DuckDB folds function names
    assert cat.call_refusal("Current_Setting") == (
        "is denied (settings: reads configuration, including paths)"
    )
