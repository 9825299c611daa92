"""Rescoring under a test scorer version and ``verify --recompute`` (issue 7 item 3)."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from ledger_audit import TAMPERED, TEST_SCORER
from report_testkit import FENCED_CASE, RENAMED_CASE, operator

from ledger.cli import main
from ledger.events import ScoreComputed
from ledger.harness import score as score_mod
from ledger.store import Draft, Ledger

TEST_VERSION = "2.1.0-test"


class NamesNotScored(score_mod.Scorer):
    """Test scorer: one rule changed: the column names item is awarded whenever executed."""

    version = TEST_VERSION

    def result_items(self, items, c, truncated):
        super().result_items(items, c, truncated)
        items["column_names"] = Fraction(self.points.column_names)


@pytest.fixture
def test_scorer(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """Registers 2.1.0-test for this test only (never in the shipped registry)."""
    request.node.add_marker(TEST_SCORER)  # its scores cannot be re-derived after the test
    monkeypatch.setitem(score_mod.SCORERS, TEST_VERSION, NamesNotScored())
    return TEST_VERSION


def cli(ledger: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--ledger", str(ledger), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def report(ledger: Path, *args: str) -> bytes:
    code, out, err = cli(ledger, "report", "--format", "json", *args)
    assert code == 0, err
    return out.encode()


def size_of(ledger: Path) -> int:
    with Ledger.open(ledger, readonly=True) as led:
        return led.size()


def _scores(rep: dict) -> dict:
    out = {}
    for section in rep["sections"]:
        for c in section["caseruns"]:
            score = dict(c["score"]) if c["score"] else None
            if score:
                score.pop("scorer_version")
            out[(c["run"], c["case"], c["attempt"])] = score
    return out


def test_rescore_appends_and_old_report_keeps_its_bytes(real_ledger: Path, test_scorer: str):
    old_size = size_of(real_ledger)
    old = report(real_ledger)
    code, out, _ = cli(real_ledger, "rescore", "--scorer", test_scorer)
    assert code == 0
    # 7 self-test attempts + 20 scored model attempts; the missing recording has no score
    assert out.strip() == (
        "rescored 27 attempts of 2 runs under scorer 2.1.0-test (re-executed 0); "
        "skipped: no_recorded_score 1"
    )
    assert size_of(real_ledger) == old_size + 27
    # the old report, at the old size, keeps its exact bytes
    assert report(real_ledger, "--at-size", str(old_size)) == old
    # a second rescore appends nothing
    code, out, _ = cli(real_ledger, "rescore", "--scorer", test_scorer)
    assert "rescored 0 attempts" in out
    assert "already_scored 27" in out
    assert size_of(real_ledger) == old_size + 27

    new = json.loads(report(real_ledger, "--scorer", test_scorer))
    before = json.loads(old)
    old_scores, new_scores = _scores(before), _scores(new)
    changed = {k for k in old_scores if old_scores[k] != new_scores[k]}
    # exactly the attempt whose column was renamed: names item 0 -> 5, total 95 -> 100
    assert changed == {("model-a", *RENAMED_CASE)}
    key = ("model-a", *RENAMED_CASE)
    assert (old_scores[key]["total"], new_scores[key]["total"]) == ("95.00", "100.00")
    assert new_scores[("model-a", *FENCED_CASE)]["total"] == "95.00"  # the fence rule is unchanged
    run_old, run_new = before["sections"][0]["runs"][0], new["sections"][0]["runs"][0]
    assert run_new["scorer_version"] == test_scorer
    # sf-01 (basic) mean: (95 + 95 + 100) / 3 = 96.67 -> (100 + 95 + 100) / 3 = 98.33
    assert run_old["cases"][0]["mean"] == "96.67"
    assert run_new["cases"][0]["mean"] == "98.33"
    for d, value in run_old["scores"]["dimensions"].items():
        if d != "basic":
            assert run_new["scores"]["dimensions"][d] == value
    assert run_new["scores"]["dimensions"]["basic"] != run_old["scores"]["dimensions"]["basic"]
    # result-correct ignores names; format_ok needs the names item: 16 -> 17 of 21
    assert (run_old["quality"]["format_ok_rate"], run_new["quality"]["format_ok_rate"]) == (
        "0.7619",
        "0.8095",
    )
    run_old["quality"].pop("format_ok_rate")
    run_new["quality"].pop("format_ok_rate")
    assert run_new["quality"] == run_old["quality"]

    # every recorded score, old and new, re-derives from its evidence
    code, out, err = cli(real_ledger, "verify", "--recompute")
    assert code == 0, err
    assert "scores recomputed" in out


def _forge(ledger_path: Path) -> int:
    """Append a copy of a real ScoreComputed with its total changed, signed by the operator."""
    with Ledger.open(ledger_path) as ledger:
        original = next(
            row.event()
            for row in ledger.events_of_type(ScoreComputed)
            if row.event().stream == "model-a"
        )
        fields = msgspec.structs.asdict(original)
        for name in ("stream", "stream_seq", "stream_prev", "at"):
            fields.pop(name)
        fields["total"] = Decimal("42.00")
        (seq,) = ledger.append([Draft(ScoreComputed, "model-a", fields)], operator())
    return seq


@TAMPERED
def test_verify_recompute_names_the_forged_seq(real_ledger: Path):
    code, _, err = cli(real_ledger, "verify", "--recompute")
    assert code == 0, err
    forged = _forge(real_ledger)
    # the forged event is signed by a registered key: plain verify passes
    code, _, _ = cli(real_ledger, "verify")
    assert code == 0
    code, _, err = cli(real_ledger, "verify", "--recompute")
    assert code == 1
    assert f"seq {forged}:" in err
    assert "total" in err


@TEST_SCORER
def test_verify_recompute_with_an_unknown_scorer_could_not_check(real_ledger, monkeypatch):
    monkeypatch.setitem(score_mod.SCORERS, TEST_VERSION, NamesNotScored())
    assert cli(real_ledger, "rescore", "--scorer", TEST_VERSION, "--run", "self-test")[0] == 0
    monkeypatch.delitem(score_mod.SCORERS, TEST_VERSION)
    code, _, err = cli(real_ledger, "verify", "--recompute")
    assert code == 2
    assert "unknown scorer version '2.1.0-test'" in err


def test_rescore_refuses_unknown_version_and_run(real_ledger: Path):
    size = size_of(real_ledger)
    code, _, err = cli(real_ledger, "rescore", "--scorer", "9.9.9")
    assert code == 2
    assert "unknown scorer version" in err
    code, _, err = cli(real_ledger, "rescore", "--scorer", "2.0.0", "--run", "nope")
    assert code == 2
    assert "no run nope" in err
    assert size_of(real_ledger) == size


@pytest.mark.slow
def test_rescore_reexecute_records_new_executions(real_ledger: Path, test_scorer: str):
    size = size_of(real_ledger)
    code, out, err = cli(
        real_ledger, "rescore", "--scorer", test_scorer, "--run", "self-test", "--reexecute"
    )
    assert code == 0, err
    assert "rescored 7 attempts of 1 runs" in out
    assert "re-executed 7" in out
    assert size_of(real_ledger) == size + 14  # a SqlExecuted and a ScoreComputed each
    code, _, err = cli(real_ledger, "verify", "--recompute")
    assert code == 0, err
