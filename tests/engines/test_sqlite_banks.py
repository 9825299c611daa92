"""The built-in banks on SQLite: schema, seed and reference SQL transpiled from DuckDB with
sqlglot statement by statement (``ledger.engines.transpile``, the publish path), built with
the SQLite engine; every reference runs through the gold's path (reference()) and the worker
with equal results, and the hand-computed numbers of tests/banks hold on SQLite."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import yaml
from test_retail_traps import EXPECTED as RETAIL_EXPECTED
from test_sales_fixture import EXPECTED as SALES_EXPECTED

from ledger.engines.base import EngineQueryError
from ledger.engines.cells import encode_row
from ledger.engines.sqlite import SQLiteEngine, SQLiteExecutor
from ledger.engines.sqlite_sandbox import split_statements
from ledger.engines.transpile import transpile

REPO = Path(__file__).resolve().parents[2]
BANKS = REPO / "ledger" / "banks"
ENGINE = SQLiteEngine()

# Reference SQL sqlglot cannot rewrite into an equivalent SQLite query (for the lead):
# Every reference SQL of both banks transpiles: retail time-01's month grid,
# generate_series(..., INTERVAL 1 MONTH), which sqlglot alone writes as a table function
# SQLite lacks, is rewritten by ledger.engines.transpile as a recursive CTE.
UNTRANSPILABLE: frozenset[str] = frozenset()


def _plain(sql: str) -> list[str]:
    """What sqlglot alone writes, statement by statement."""
    return sqlglot.transpile(sql, read="duckdb", write="sqlite")


def _to_sqlite(sql: str) -> list[str]:
    """The publish path's rewrite (sqlglot, TIMESTAMPTZ literals as UTC text), per statement."""
    return [text for _, text in split_statements(transpile(sql, "duckdb", "sqlite"))]


def _cases(bank: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((BANKS / bank / "cases.yaml").read_text(encoding="utf-8"))
    return list(doc["cases"])


def _build(bank: str, folder: Path) -> Path:
    schema = (BANKS / bank / "schema.sql").read_text(encoding="utf-8")
    seed = (BANKS / bank / "seed.sql").read_text(encoding="utf-8")
    target = folder / f"{bank}.sqlite"
    ENGINE.build(transpile(schema, "duckdb", "sqlite"), transpile(seed, "duckdb", "sqlite"), target)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sqlite-banks")
    return {bank: _build(bank, folder) for bank in ("sales-fixture", "retail")}


@pytest.fixture(scope="module")
def executors(built: dict[str, Path]) -> Iterator[dict[str, SQLiteExecutor]]:
    opened = {bank: ENGINE.executor(path) for bank, path in built.items()}
    try:
        yield opened
    finally:
        for ex in opened.values():
            ex.close()


def _value(v: Any) -> Any:
    """A value comparable across engines: numbers by value, dates and times as SQLite text."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | Decimal):
        return Decimal(v)
    if isinstance(v, float):
        return Decimal(repr(v))
    if isinstance(v, datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, date):
        return v.isoformat()
    raise AssertionError(f"unexpected value {v!r}")


def _rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(_value(v) for v in row) for row in rows]


def test_plain_sqlglot_turns_a_timestamptz_literal_into_a_number() -> None:
    # Why the publish path rewrites instants itself: SQLite reads sqlglot's cast with
    # NUMERIC affinity, so every instant of the sales fixture would be the number 2026.
    literal = "SELECT TIMESTAMPTZ '2026-09-01 00:00:00+08:00' AS t"
    (sql,) = _plain(literal)
    assert sql == "SELECT CAST('2026-09-01 00:00:00+08:00' AS TIMESTAMPTZ) AS t"
    con = sqlite3.connect(":memory:")
    try:
        assert con.execute(sql).fetchall() == [(2026,)]
        (fixed,) = _to_sqlite(literal)
        assert con.execute(fixed).fetchall() == [("2026-08-31 16:00:00",)]  # 00:00 +08 in UTC
    finally:
        con.close()


def test_sales_rows_are_instants_in_utc(built: dict[str, Path]) -> None:
    _, rows = ENGINE.reference(
        built["sales-fixture"], "SELECT sale_id, deal_time, amount FROM sales ORDER BY sale_id"
    )
    assert rows == [
        ("S01", "2026-08-31 16:00:00", 100.0),  # the first second of September in Shanghai
        ("S02", "2026-09-30 15:59:59", 200.0),
        ("S03", "2026-09-15 04:00:00", 300.0),
        ("S04", "2026-09-15 04:00:00", 9000.0),
        ("S05", "2026-09-30 16:00:00", 700.0),  # the right endpoint, excluded
        ("S06", "2026-09-12 04:00:00", 500.0),
    ]


CASES = [(bank, case) for bank in ("sales-fixture", "retail") for case in _cases(bank)]


@pytest.mark.parametrize(("bank", "case"), CASES, ids=[f"{b}:{c['id']}" for b, c in CASES])
def test_every_reference_runs_alike_on_the_gold_path_and_the_worker(
    built: dict[str, Path],
    executors: dict[str, SQLiteExecutor],
    bank: str,
    case: dict[str, Any],
) -> None:
    statements = _to_sqlite(case["reference_sql"])
    assert len(statements) == 1
    (sql,) = statements
    result = executors[bank].execute(sql, max_rows=case["max_rows"])
    if case["id"] in UNTRANSPILABLE:
        with pytest.raises(EngineQueryError) as caught:
            ENGINE.reference(built[bank], sql)
        assert (result.error_kind, result.error_message) == ("sql_runtime", str(caught.value))
        return
    columns, rows = ENGINE.reference(built[bank], sql)
    assert result.ok, result.error_message
    assert result.columns == columns
    assert result.rows == tuple(tuple(encode_row(r)) for r in rows)
    assert result.truncated is False


def _expected(bank: str) -> dict[str, list[tuple[Any, ...]]]:
    return SALES_EXPECTED if bank == "sales-fixture" else RETAIL_EXPECTED


HAND = [
    (bank, case)
    for bank, case in CASES
    if case["id"] in _expected(bank) and case["id"] not in UNTRANSPILABLE
]


@pytest.mark.parametrize(("bank", "case"), HAND, ids=[f"{b}:{c['id']}" for b, c in HAND])
def test_the_hand_computed_numbers_hold_on_sqlite(
    built: dict[str, Path], bank: str, case: dict[str, Any]
) -> None:
    (sql,) = _to_sqlite(case["reference_sql"])
    _, rows = ENGINE.reference(built[bank], sql)
    want = _rows(_expected(bank)[case["id"]])
    got = _rows(rows)
    if case["row_order_significant"]:
        assert got == want
    else:
        assert Counter(got) == Counter(want)


def test_every_case_has_hand_numbers_or_is_listed() -> None:
    for bank, case in CASES:
        assert case["id"] in _expected(bank) or case["id"] in UNTRANSPILABLE
