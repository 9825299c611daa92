"""Issue 15 from the command line: publishing for another engine, the differences it
refuses or lists, and where the engine shows (bank list, runs, report, gate, calibrate)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger.cli import main

TINY = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tiny-bank"

# REAL is a 4-byte float in DuckDB and an 8-byte double in SQLite: order 102's 80.50
# divided by 3 is float32(26.8333...) = 26.83333396911621 on DuckDB and
# 26.833333333333332 on SQLite (float cells are stored as decimal strings). sqlglot
# keeps DuckDB's exact `/` when it rewrites for SQLite, so integer division would not
# show a difference here.
REAL_CASE = """
  - id: tiny-real
    dimension: basic
    difficulty: easy
    weight: 1
    question: 订单 102 的金额的三分之一是多少？
    reference_sql: |
      SELECT CAST(amount AS REAL) / 3 AS third FROM orders WHERE order_id = 102
    abs_tolerance: 0
    rel_tolerance: 0
    max_rows: 5
    required_ast: []
"""


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    with (folder / "cases.yaml").open("a", encoding="utf-8") as f:
        f.write(REAL_CASE)
    return folder


def _cli(ledger: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--ledger", str(ledger), *args])


@pytest.mark.slow
def test_publish_for_sqlite_refuses_then_lists_the_real_width(bank: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "home" / "ledger.db"
    assert _cli(ledger, "init").exit_code == 0
    refused = _cli(ledger, "bank", "publish", str(bank), "--engine", "sqlite")
    assert refused.exit_code == 2
    assert "case tiny-real: field reference_sql: gold on sqlite differs from gold on duckdb" in (
        refused.output
    )
    assert 'duckdb: 1 rows [["26.83333396911621"]]; sqlite: 1 rows [["26.833333333333332"]]' in (
        refused.output
    )
    # The three other cases agree on both engines (instants with offsets included).
    assert "tiny-01" not in refused.output
    assert "tiny-02" not in refused.output
    log = _cli(ledger, "log")
    assert "bank.published" not in log.output

    done = _cli(
        ledger, "bank", "publish", str(bank), "--engine", "sqlite", "--accept-engine-differences"
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("published: tiny@v1 on sqlite sha256:")
    listed_difference = (
        'gold differs from duckdb: tiny-real: duckdb: 1 rows [["26.83333396911621"]]'
    )
    assert listed_difference in done.output

    listed = _cli(ledger, "bank", "list")
    assert "  tiny@v1:sqlite " in listed.output

    ran = _cli(ledger, "run", "--bank", "tiny:sqlite", "--adapter", "reference", "--run-id", "r")
    assert ran.exit_code == 0, ran.output
    assert "result-correct: 4/4 planned attempts" in ran.output
    runs = _cli(ledger, "runs")
    assert "tiny@v1:sqlite" in runs.output

    report = json.loads(_cli(ledger, "report", "--format", "json").stdout)
    (section,) = report["sections"]
    assert section["title"].endswith("on sqlite - scorer 2.x")
    engine = section["bank"]["engine"]
    assert engine["name"] == "sqlite"
    assert engine["transpiled_from"] == "duckdb"
    assert [d.split(":")[0] for d in engine["differences"]] == ["tiny-real"]

    calibrate = _cli(ledger, "calibrate", "--bank", "tiny:sqlite")
    assert calibrate.exit_code == 2
    assert "runs on sqlite: calibration (mutants, variant databases) runs on DuckDB" in (
        calibrate.output
    )


@pytest.mark.slow
def test_gate_refuses_two_engines(bank: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "home" / "ledger.db"
    assert _cli(ledger, "init").exit_code == 0
    for extra in ([], ["--engine", "sqlite", "--accept-engine-differences"]):
        assert _cli(ledger, "bank", "publish", str(bank), *extra).exit_code == 0
    for run_id, ref in (("on-duck", "tiny:duckdb"), ("on-lite", "tiny:sqlite")):
        ran = _cli(ledger, "run", "--bank", ref, "--adapter", "reference", "--run-id", run_id)
        assert ran.exit_code == 0, ran.output
    gate = _cli(ledger, "gate", "--baseline", f"{ledger}:on-duck", "--current", f"{ledger}:on-lite")
    assert gate.exit_code == 2
    assert "could not judge: engine differs: baseline duckdb, current sqlite" in gate.output


def test_validate_for_sqlite_refuses_then_lists_the_real_width(bank: Path, tmp_path: Path) -> None:
    # bank validate needs no ledger and writes none (docs/cli.md).
    ledger = tmp_path / "nowhere" / "ledger.db"
    difference = (
        'tiny-real: duckdb: 1 rows [["26.83333396911621"]]; sqlite: 1 rows [["26.833333333333332"]]'
    )
    refused = _cli(ledger, "bank", "validate", str(bank), "--engine", "sqlite")
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr.splitlines()[-3:] == [
        "error: bank tiny@v1 on sqlite: 1 problem",
        "  cases.yaml: case tiny-real: field reference_sql: gold on sqlite differs from gold on "
        f"duckdb: {difference.removeprefix('tiny-real: ')}",
        "  hint: fix the reference SQL so both engines agree, or pass "
        "--accept-engine-differences to publish with the differences listed",
    ]

    done = _cli(
        ledger, "bank", "validate", str(bank), "--engine", "sqlite", "--accept-engine-differences"
    )
    assert done.exit_code == 0, done.output
    first, *rest = done.stdout.splitlines()
    assert first.startswith("ok: tiny@v1 sha256:")
    # the same difference publish lists, and nothing else
    assert rest == [f"  gold differs from duckdb: {difference}"]
    assert not ledger.parent.exists()
