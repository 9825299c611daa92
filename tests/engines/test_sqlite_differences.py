"""The same SQL judged on SQLite and on DuckDB gets the verdict of its own engine.

Three differences measured on real BIRD predictions (issue 15): integer division, REAL
(an 8-byte double in SQLite, a 4-byte float in DuckDB) and functions one engine has and the
other lacks. One bank, built by each engine from the same SQL; a gold per engine from the
same reference SQL; the model's SQL through each engine's guard, sandboxed executor and
the scorer's comparator. Every number is worked out by hand below.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import pytest

from ledger.engines import Executor, get_engine
from ledger.engines.duckdb_worker import ExecResult
from ledger.harness.compare import compare
from ledger.harness.guard import guard

# Nine visits, seven returned: the share is 7/9, as a percentage 700/9 = 77.777...
SCHEMA = "CREATE TABLE visits (id INTEGER, returned INTEGER);"
SEED = "INSERT INTO visits VALUES (1, 1), (2, 1), (3, 0), (4, 1), (5, 1), (6, 1), (7, 0), (8, 1), (9, 1);"  # noqa: E501
PCT = 700 / 9  # the double nearest 77.777...: 77.77777777777777
PCT_FLOAT32 = struct.unpack("f", struct.pack("f", PCT))[0]  # 77.77777862548828
TABLES = {"visits"}


@dataclass(frozen=True)
class Judged:
    """One engine's verdict on a model's SQL."""

    guard_passed: bool
    executed: ExecResult | None
    correct: bool


@pytest.fixture(scope="module")
def executors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Executor]]:
    folder = tmp_path_factory.mktemp("engine-differences")
    opened: dict[str, Executor] = {}
    try:
        for name in ("sqlite", "duckdb"):
            engine = get_engine(name)
            target = folder / f"bank.{name}"
            engine.build(SCHEMA, SEED, target)
            opened[name] = engine.executor(target)
        yield opened
    finally:
        for ex in opened.values():
            ex.close()


def _run(executors: dict[str, Executor], engine: str, sql: str) -> ExecResult:
    return executors[engine].execute(sql, max_rows=10)


def _judge(executors: dict[str, Executor], engine: str, gold_sql: str, sql: str) -> Judged:
    """Guard in the engine's dialect, execute in its worker, compare with its own gold."""
    gold = _run(executors, engine, gold_sql)
    assert gold.ok, gold.error_message
    if not guard(sql, TABLES, engine=engine).passed:
        return Judged(False, None, False)
    actual = _run(executors, engine, sql)
    if not actual.ok:
        return Judged(True, actual, False)
    c = compare(
        gold.columns,
        gold.rows,
        actual.columns,
        actual.rows,
        abs_tolerance=Decimal(0),
        rel_tolerance=Decimal(0),
        order_significant=False,
    )
    return Judged(True, actual, c.mapped and c.column_count_ok and c.f1 == 1)


GOLD_PCT = "SELECT 100.0 * SUM(returned) / COUNT(*) AS pct FROM visits"


def test_the_gold_is_the_same_on_both_engines(executors: dict[str, Executor]) -> None:
    for engine in ("sqlite", "duckdb"):
        result = _run(executors, engine, GOLD_PCT)
        assert result.rows == ((repr(PCT),),)
        assert repr(PCT) == "77.77777777777777"


def test_integer_division_is_wrong_on_sqlite_only(executors: dict[str, Executor]) -> None:
    sql = "SELECT SUM(returned) * 100 / COUNT(*) AS pct FROM visits"
    on_sqlite = _judge(executors, "sqlite", GOLD_PCT, sql)
    on_duckdb = _judge(executors, "duckdb", GOLD_PCT, sql)
    assert on_sqlite.executed is not None
    assert on_duckdb.executed is not None
    # SQLite: 700 / 9 between integers is 77; DuckDB's / divides exactly.
    assert on_sqlite.executed.rows == ((77,),)
    assert on_sqlite.executed.columns[0].type == "BIGINT"
    assert on_duckdb.executed.rows == ((repr(PCT),),)
    assert (on_sqlite.correct, on_duckdb.correct) == (False, True)


def test_real_is_a_double_on_sqlite_and_a_float_on_duckdb(executors: dict[str, Executor]) -> None:
    sql = "SELECT CAST(SUM(returned) AS REAL) * 100 / COUNT(*) AS pct FROM visits"
    on_sqlite = _judge(executors, "sqlite", GOLD_PCT, sql)
    on_duckdb = _judge(executors, "duckdb", GOLD_PCT, sql)
    assert on_sqlite.executed is not None
    assert on_duckdb.executed is not None
    assert on_sqlite.executed.rows == ((repr(PCT),),)
    # DuckDB computes in FLOAT: 700/9 rounded to 4 bytes, 77.77777862548828
    assert on_duckdb.executed.rows == ((repr(PCT_FLOAT32),),)
    assert repr(PCT_FLOAT32) == "77.77777862548828"
    assert (on_sqlite.correct, on_duckdb.correct) == (True, False)
    tenth = "SELECT CAST(0.1 AS REAL) AS x"
    assert _run(executors, "sqlite", tenth).rows == (("0.1",),)
    assert _run(executors, "duckdb", tenth).rows == (("0.10000000149011612",),)


def test_iif_exists_on_sqlite_only(executors: dict[str, Executor]) -> None:
    gold = "SELECT CASE WHEN SUM(returned) > 5 THEN 'many' ELSE 'few' END AS label FROM visits"
    sql = "SELECT iif(SUM(returned) > 5, 'many', 'few') AS label FROM visits"
    on_sqlite = _judge(executors, "sqlite", gold, sql)
    on_duckdb = _judge(executors, "duckdb", gold, sql)
    assert on_sqlite.executed is not None
    assert on_sqlite.executed.rows == (("many",),)  # 7 > 5
    assert (on_sqlite.correct, on_duckdb.correct) == (True, False)
    # sqlglot reads iif as IF and DuckDB's guard lets it pass; DuckDB's worker, reading the
    # SQL with DuckDB's own parser, refuses the unknown function.
    assert on_duckdb.executed is not None
    assert on_duckdb.executed.error_kind == "refused"
    assert "iif" in (on_duckdb.executed.error_message or "")


def test_list_value_exists_on_duckdb_only(executors: dict[str, Executor]) -> None:
    gold = "SELECT 2 AS n"
    sql = "SELECT len(list_value(1, 2)) AS n"
    assert _judge(executors, "duckdb", gold, sql).correct is True
    on_sqlite = _judge(executors, "sqlite", gold, sql)
    assert (on_sqlite.guard_passed, on_sqlite.correct) == (False, False)
    direct = _run(executors, "sqlite", "SELECT list_value(1, 2) AS l")
    assert (direct.error_kind, direct.error_message) == (
        "sql_runtime",
        "no such function: list_value",
    )
