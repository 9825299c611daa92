"""Issue 31: an engine difference at publish names the rows that differ, not the first rows
of each gold.

REAL is a 4-byte float in DuckDB and an 8-byte double in SQLite. Orders 101, 102 and 103
of the tiny bank have amounts 120.00, 80.50 and 300.00: divided by 3 as REAL, 40 and 100
are exact in both, 26.8333... is float32(26.8333...) = 26.83333396911621 on DuckDB and
26.833333333333332 on SQLite. So of three rows exactly order 102's differs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner
from support import TINY

from ledger.bank.publish import _difference
from ledger.cli import main
from ledger.events import Column, GoldResult

THREE = """
  - id: tiny-three
    dimension: basic
    difficulty: easy
    weight: 1
    question: 订单 101 到 103 的金额的三分之一各是多少？
    reference_sql: |
      SELECT order_id, CAST(amount AS REAL) / 3 AS third FROM orders
      WHERE order_id IN (101, 102, 103) ORDER BY order_id
    max_rows: 5
    required_ast: []
"""


def test_publish_lists_only_the_rows_that_differ(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    with (folder / "cases.yaml").open("a", encoding="utf-8") as f:
        f.write(THREE)
    ledger = tmp_path / "home" / "ledger.db"
    runner = CliRunner()
    assert runner.invoke(main, ["--ledger", str(ledger), "init"]).exit_code == 0
    done = runner.invoke(
        main, ["--ledger", str(ledger), "bank", "publish", str(folder), "--engine", "sqlite"]
    )
    assert done.exit_code == 2
    assert (
        "case tiny-three: field reference_sql: gold on sqlite differs from gold on duckdb: "
        'duckdb: 3 rows, 1 not in the other [[102, "26.83333396911621"]]; '
        'sqlite: 3 rows, 1 not in the other [[102, "26.833333333333332"]]'
    ) in done.output


def _gold(columns: tuple[Column, ...], rows: list[tuple[object, ...]]) -> GoldResult:
    return GoldResult(case_id="c", columns=columns, rows=tuple(rows), digest="d")


def test_difference_in_order_and_in_columns_is_named() -> None:
    n = (Column(name="n", type="BIGINT"),)
    order = _difference("duckdb", _gold(n, [(1,), (2,), (3,)]), "sqlite", [(1,), (3,), (2,)], n)
    assert order == "the same 3 rows in another order, from row 2: duckdb [[2]], sqlite [[3]]"
    two = (Column(name="n", type="BIGINT"), Column(name="m", type="BIGINT"))
    width = _difference("duckdb", _gold(n, [(1,)]), "sqlite", [(1, 2)], two)
    assert width == 'duckdb: 1 columns [["n"]]; sqlite: 2 columns [["n", "m"]]'
    # A column of another type class: every row differs, and the column is named.
    date = (Column(name="d", type="DATE"),)
    text = (Column(name="d", type="VARCHAR"),)
    kinds = _difference("duckdb", _gold(date, [("2026-01-01",)]), "sqlite", [("2026-01-01",)],
                        text)  # fmt: skip
    assert kinds == (
        "column 1 (d) is DATE on duckdb, VARCHAR on sqlite: "
        'duckdb: 1 rows [["2026-01-01"]]; sqlite: 1 rows [["2026-01-01"]]'
    )
