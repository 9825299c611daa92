"""``caseledger calibrate``: deterministic report bytes, exit codes, and the recorded run."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from calkit import FIXTURE, RETAIL, copy_bank
from click.testing import CliRunner

from ledger.cli import main
from ledger.events import (
    CalibrationControlChecked,
    CalibrationFinished,
    CalibrationMutantJudged,
    RunFinished,
    RunStarted,
)
from ledger.store import Ledger

pytestmark = pytest.mark.slow


def cli(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(home / "ledger.db"), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "led"
    assert cli(home, "init")[0] == 0
    return home


def test_help() -> None:
    result = CliRunner().invoke(main, ["calibrate", "--help"])
    assert result.exit_code == 0
    assert "--bank" in result.stdout


def test_two_runs_give_the_same_report_bytes_and_are_recorded(home: Path) -> None:
    code1, out1, err1 = cli(home, "calibrate", "--bank", str(FIXTURE), "--json")
    code2, out2, err2 = cli(home, "calibrate", "--bank", str(FIXTURE), "--json")
    assert (code1, code2) == (0, 0)
    assert out1 == out2
    report = json.loads(out1)
    assert report["kill_rate"] == "1.0000"  # a decimal string, as in reports and events
    assert report["survivors"] == []
    assert report["positive_controls"]["passed"] == report["positive_controls"]["total"] == 9
    assert report["killed"] + report["equivalent"] + report["blocked"] == report["applicable"]
    assert "calibration-" in err1
    assert err1 != err2  # two runs, two run ids

    with Ledger.open(home / "ledger.db", readonly=True) as ledger:
        started = [s.event() for s in ledger.events_of_type(RunStarted)]
        assert [(e.run_kind, e.adapter_kind) for e in started] == [
            ("calibration", "calibration")
        ] * 2
        run_id = started[0].stream  # type: ignore[union-attr]
        stream = [s.event() for s in ledger.stream_events(run_id)]
    judged = [e for e in stream if isinstance(e, CalibrationMutantJudged)]
    assert len(judged) == len(report["mutants"])
    assert sum(isinstance(e, CalibrationControlChecked) for e in stream) == 9
    finished = next(e for e in stream if isinstance(e, CalibrationFinished))
    assert finished.kill_rate == Decimal("1.0000")
    assert isinstance(stream[-1], RunFinished)
    assert stream[-1].status == "completed"
    assert cli(home, "verify")[0] == 0


WRONG_CONTROL = """
cases:
  sf-01:
    alternative_sql:
      - SELECT COUNT(*), SUM(amount) FROM sales WHERE region = '区域甲'
"""


def test_a_rejected_positive_control_fails_calibration(home: Path, tmp_path: Path) -> None:
    folder = copy_bank(FIXTURE, tmp_path / "bank", calibration=WRONG_CONTROL)
    code, out, _ = cli(home, "calibrate", "--bank", str(folder))
    assert code == 1
    assert "FAILED positive control sf-01 alternative_sql[0]: base (wrong result)" in out
    assert out.rstrip().endswith("calibration FAILED")


def test_unknown_bank_could_not_check(home: Path) -> None:
    code, _, err = cli(home, "calibrate", "--bank", "nope@v1")
    assert code == 2
    assert "no published bank 'nope@v1'" in err


def test_retail_reaches_95_percent_with_every_survivor_reviewed(home: Path) -> None:
    code, out, _ = cli(home, "calibrate", "--bank", str(RETAIL), "--json")
    assert code == 0
    report = json.loads(out)
    assert Decimal(str(report["kill_rate"])) >= Decimal("0.95")
    assert report["survivors"] == []
    assert all(e["review"] for e in report["equivalents"])
    assert report["unused_reviews"] == []
    assert report["positive_controls"]["passed"] == report["positive_controls"]["total"] > 0
