"""The throughput benchmark's workload (benchmarks/throughput_bench.py, issue 21).

The wrong answers must be the ones the benchmark says they are: each mutation is
checked here against SQL written out by hand, and each variant's rows on DuckDB
against rows worked out by hand (a small table, no bank needed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from throughput_bench import variant

REF = """
SELECT region, count(*) AS n
FROM orders
WHERE placed_at >= TIMESTAMP '2025-12-31 00:00:00' AND day < DATE '2026-02-28'
GROUP BY region
ORDER BY region;
"""


def test_each_mutation_is_the_sql_written_out() -> None:
    ref = REF.strip().rstrip(";").strip()
    assert variant("reference", REF, ["region", "n"]) == ("reference", ref)
    # a day later, across a year and a month end; the time of day is kept
    kind, shifted = variant("shifted", REF, ["region", "n"])
    assert kind == "shifted"
    assert "TIMESTAMP '2026-01-01 00:00:00'" in shifted
    assert "DATE '2026-03-01'" in shifted
    assert variant("distinct", REF, []) == ("distinct", ref.replace("SELECT", "SELECT DISTINCT"))
    assert variant("duplicated", REF, []) == (
        "duplicated",
        f"SELECT * FROM ({ref}) AS q1 UNION ALL SELECT * FROM ({ref}) AS q2",  # noqa: S608
    )
    assert variant("reordered", REF, ["region", 'a"b']) == (
        "reordered",
        f'SELECT "a""b", "region" FROM ({ref}) AS q',  # noqa: S608
    )


def test_distinct_goes_to_the_first_select_without_one() -> None:
    sql = "select distinct a from t union all select b from u"
    # the first SELECT already has DISTINCT: the next one gets it
    assert (
        variant("distinct", sql, [])[1]
        == "select distinct a from t union all SELECT DISTINCT b from u"
    )


def test_without_a_date_a_shift_duplicates_the_rows() -> None:
    assert variant("shifted", "SELECT 1 AS x", ["x"]) == (
        "duplicated",
        "SELECT * FROM (SELECT 1 AS x) AS q1 UNION ALL SELECT * FROM (SELECT 1 AS x) AS q2",
    )


@pytest.mark.parametrize(
    ("kind", "rows"),
    [
        ("reference", [("east", 2), ("west", 1)]),
        ("distinct", [("east", 2), ("west", 1)]),  # no duplicate rows to remove
        ("duplicated", [("east", 2), ("east", 2), ("west", 1), ("west", 1)]),
        ("reordered", [(1, "west"), (2, "east")]),
        ("shifted", [("east", 1), ("west", 1)]),  # the 2025-12-31 order drops out
    ],
)
def test_the_variants_give_the_rows_worked_out_by_hand(kind: str, rows: list[tuple]) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE orders (region VARCHAR, placed_at TIMESTAMP, day DATE)")
    con.execute(
        "INSERT INTO orders VALUES ('east', '2025-12-31 00:00:00', '2025-12-31'), "
        "('east', '2026-01-05 10:00:00', '2026-01-05'), "
        "('west', '2026-02-01 09:00:00', '2026-02-01'), "
        "('west', '2025-12-30 00:00:00', '2025-12-30')"
    )
    _, sql = variant(kind, REF, ["region", "n"])
    assert sorted(con.execute(sql).fetchall()) == sorted(rows)
