"""The throughput benchmark's workload (benchmarks/throughput_bench.py, issues 21 and 34).

The wrong answers must be the ones the benchmark says they are: each mutation is
checked here against SQL written out by hand, and each variant's rows on DuckDB
against rows worked out by hand (a small table, no bank needed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from throughput_bench import FLOOR_EVENTS, prepare, run_floor, variant

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "throughput_bench.py"

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


def test_the_peer_workload_has_a_quarter_distinct_texts(tmp_path: Path) -> None:
    """1,000 predictions over retail's first 10 cases: 250 distinct texts, each 4 times."""
    template, replay, predictions = prepare(tmp_path, 56, 21, "peer", 1000)
    assert len(predictions) == 1000
    texts = Counter(p["sql"] for p in predictions)
    assert len(texts) == 250
    assert set(texts.values()) == {4}
    per_case = Counter(p["case"] for p in predictions)
    assert sorted(per_case) == sorted(
        ["basic-01", "basic-02", "basic-03", "joins-01", "joins-02", "joins-03",
         "agg-01", "agg-02", "agg-03", "time-01"]
    )  # fmt: skip
    assert set(per_case.values()) == {100}
    for case in per_case:  # every attempt 1..100 of a case answered once
        attempts = sorted(p["attempt"] for p in predictions if p["case"] == case)
        assert attempts == list(range(1, 101))
        # a text is one case's: its 25 texts are that case's 100 answers
        assert len({p["sql"] for p in predictions if p["case"] == case}) == 25
    assert len(replay.read_text().splitlines()) == 1000
    assert (tmp_path / "retail-peer" / "cases.yaml").is_file()
    assert not (tmp_path / "retail-peer" / "calibration.yaml").exists()
    assert len(list((template / ".caseledger" / "banks").glob("*.duckdb"))) == 1


def _json_rows(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    """The --json rows of one round of the script with ``args`` (its ledgers kept in
    ``tmp_path``)."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--json", "--rounds", "1", *args,
         "--keep", str(tmp_path / "k")],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_json_prints_one_object_per_row_and_mode(tmp_path: Path) -> None:
    """--json on a tiny workload (1 round; 18 and 40 predictions): the shape, not a time."""
    rows = _json_rows(tmp_path, "--mode", "both", "--attempts", "1", "--peer-predictions", "40")
    assert [(r["mode"], r["row"]) for r in rows] == [
        ("distinct", "DuckDB execute-only"),
        ("distinct", "caseledger run"),
        ("peer", "DuckDB execute-only"),
        ("peer", "caseledger run"),
    ]
    for r in rows:
        assert list(r) == [
            "mode", "row", "bank", "predictions", "distinct_texts", "rounds", "verdicts",
            "predictions_per_s", "cpu_ms_per_prediction", "cpu_ratio",
        ]  # fmt: skip
        assert r["rounds"] == 1
        for key in ("predictions_per_s", "cpu_ms_per_prediction", "cpu_ratio"):
            spread = r[key]
            assert list(spread) == ["median", "min", "max"]
            # one round: the median is the range
            assert spread["min"] == spread["median"] == spread["max"]
            assert spread["median"] > 0
    # 18 cases x 1 attempt, every text new; 10 cases x 4 answers, one text each
    assert [(r["bank"], r["predictions"], r["distinct_texts"]) for r in rows] == [
        ("retail", 18, 18), ("retail", 18, 18), ("retail-peer", 40, 10), ("retail-peer", 40, 10),
    ]  # fmt: skip
    # the execute-only row is the ratio's base in its own round
    assert rows[0]["cpu_ratio"]["median"] == rows[2]["cpu_ratio"]["median"] == 1.0
    # workloads of another size than the recorded verdicts' are not compared
    assert [r["verdicts"] for r in rows] == ["n/a", "not checked", "n/a", "not checked"]


def test_the_floor_does_the_library_work_of_each_prediction(tmp_path: Path) -> None:
    """40 peer predictions over 10 cases (one text each, given 4 times): 40 answered, 10
    gold results read, six events stored per prediction, the workers asked for, each of
    the 10 answer texts and 10 reference texts read once (a reference answer's text has
    its own comment, so it is not the reference's). The rows-equal answers are bounded
    by hand from the workload's kinds below."""
    template, replay, predictions = prepare(tmp_path, 56, 21, "peer", 40)
    (db,) = (template / ".caseledger" / "banks").glob("*.duckdb")
    seconds, cpu, did = run_floor(db, tmp_path / "queries.json", replay, workers=3)
    assert FLOOR_EVENTS == 6
    assert [*did[:4], did[5]] == [40, 10, 240, 3, 20]
    assert seconds > 0
    assert cpu > 0
    # The floor compares rows as text, in the order of the answer's columns: a reference
    # answer's rows equal the gold's, a duplicated one's never do.
    kinds = Counter(p["kind"] for p in predictions)
    assert did[4] >= kinds["reference"]
    assert did[4] <= 40 - kinds["duplicated"]


def test_floor_adds_its_rows_between_the_two_others(tmp_path: Path) -> None:
    """--floor, and --floor-python naming an interpreter (here this one: the project's
    pinned sqlglot 30.31.0, pure Python), each add a row before caseledger's."""
    rows = _json_rows(
        tmp_path, "--mode", "peer", "--peer-predictions", "40", "--floor",
        "--floor-python", sys.executable,
    )  # fmt: skip
    assert [(r["row"], r["verdicts"]) for r in rows] == [
        ("DuckDB execute-only", "n/a"),
        ("library floor", "n/a"),
        ("library floor (sqlglot 30.31.0, pure)", "n/a"),
        ("caseledger run", "not checked"),
    ]
    assert all(r["predictions"] == 40 and r["distinct_texts"] == 10 for r in rows)
    assert rows[1]["cpu_ratio"]["median"] > 0
    # Only caseledger's row has the ratio to the library floor of its round, after the
    # keys every row has.
    assert [list(r)[10:] for r in rows] == [[], [], [], ["floor_ratio"]]
    assert list(rows[3]["floor_ratio"]) == ["median", "min", "max"]
    assert rows[3]["floor_ratio"]["median"] > 0
