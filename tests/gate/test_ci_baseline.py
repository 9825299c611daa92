"""The project's own CI gate: the demo's pinned baselines, recomputed by the current code.

Each folder of tests/baselines/demo/ freezes one recorded demo profile. Here
every recorded score is re-derived from its evidence by the current scorer and
the metrics are re-read by the current projections/metrics.py; the result must
equal the pinned scorecard and pass the gate with zero tolerance. A scorer or
metric change that moves a number fails this test until someone runs
``caseledger baseline pin tests/baselines/demo/<profile>`` on purpose.
Issue 8 "What it must show" 3 is the monkeypatch test at the bottom.
"""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.app import baseline
from ledger.app.baseline_check import check_baseline
from ledger.cli import main
from ledger.harness import score as score_mod
from projections import gate, metrics

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "tests" / "baselines" / "demo"
PROFILES = ("northwind-sql-pro", "harbor-coder-14b", "lumen-mini")
ZERO = {m.name: metrics.Tolerance(Decimal(0), False) for m in metrics.METRICS}


@pytest.mark.parametrize("profile", PROFILES)
def test_pinned_scorecard_is_what_the_current_code_computes(profile: str) -> None:
    bundle = baseline.read_bundle(DEMO / profile)
    baseline.verify_bundle(bundle)
    recomputed = baseline.recompute_scorecard(bundle)
    assert bundle.pinned is not None
    assert baseline.stale_fields(bundle.pinned, recomputed) == []
    verdict = gate.judge(bundle.pinned, recomputed, gate.GateOptions(tolerances=ZERO))
    assert (verdict.verdict, verdict.problems) == ("pass", [])


@pytest.mark.parametrize("profile", PROFILES)
def test_baseline_check_require_full(profile: str) -> None:
    result = CliRunner().invoke(
        main,
        ["baseline", "check", str(DEMO / profile), "--require-full",
         "--require-fields", "generation_ms,invocation,request_id"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "baseline check: OK" in result.output


def test_pinned_numbers_match_the_demo_story() -> None:
    # Worked out from the recordings (ledger/demo/*.jsonl): 18 cases x 3 attempts;
    # northwind misses basic-02 attempt 2 and one more; harbor doubles joins-02 etc.
    cards = {p: baseline.read_bundle(DEMO / p).pinned for p in PROFILES}
    assert {p: c["denominators"]["n"] for p, c in cards.items()} == dict.fromkeys(PROFILES, 54)
    assert cards["northwind-sql-pro"]["metrics"]["result_correct_rate"] == "0.9630"  # 52/54
    assert cards["lumen-mini"]["metrics"]["result_correct_rate"] == "0.8148"  # 44/54
    assert cards["lumen-mini"]["metrics"]["failure_rate.provider"] == "0.0370"  # 2/54


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    """A private copy of one demo baseline (pinning rewrites it)."""
    dst = tmp_path / "lumen-mini"
    shutil.copytree(DEMO / "lumen-mini", dst)
    return dst


def test_redefined_metric_fails_until_repinned(copied: Path, monkeypatch) -> None:
    redefined = tuple(
        m._replace(path=("quality", "format_ok_rate")) if m.name == "result_correct_rate" else m
        for m in metrics.METRICS
    )
    monkeypatch.setattr(metrics, "METRICS", redefined)
    result = check_baseline(copied, require_full=True)
    assert not result.ok
    assert "metrics.result_correct_rate: pinned 0.8148, recomputed 0.9259" in result.errors[0]
    cli = CliRunner().invoke(main, ["baseline", "check", str(copied), "--require-full"])
    assert cli.exit_code == 1
    pin = CliRunner().invoke(main, ["baseline", "pin", str(copied)])
    assert pin.exit_code == 0
    assert "result_correct_rate: pinned 0.8148, recomputed 0.9259" in pin.output
    assert check_baseline(copied, require_full=True).ok


def test_renamed_metric_fails_until_repinned(copied: Path, monkeypatch) -> None:
    renamed = tuple(
        m._replace(name="correct_rate") if m.name == "result_correct_rate" else m
        for m in metrics.METRICS
    )
    monkeypatch.setattr(metrics, "METRICS", renamed)
    errors = check_baseline(copied).errors
    assert len(errors) == 1
    assert "metrics.correct_rate: not pinned, recomputed 0.8148" in errors[0]
    assert "metrics.result_correct_rate: pinned 0.8148, no longer computed" in errors[0]
    baseline.pin(copied)
    assert check_baseline(copied).ok


def test_scorer_change_that_moves_a_number_fails(copied: Path, monkeypatch) -> None:
    # Rows worth 40 instead of 45 and order 15 instead of 10: totals of partly wrong
    # answers move, so the model score moves; result-correct does not.
    scorer = score_mod.SCORERS[score_mod.SCORER_VERSION]
    monkeypatch.setattr(scorer, "points", score_mod.Points(rows=40, order=15))
    bundle = baseline.read_bundle(copied)
    recomputed = baseline.recompute_scorecard(bundle)
    stale = baseline.stale_fields(bundle.pinned, recomputed)
    assert any(s.startswith("metrics.model_score:") for s in stale)
    assert not any(s.startswith("metrics.result_correct_rate:") for s in stale)
    assert not check_baseline(copied).ok
    baseline.pin(copied)
    assert check_baseline(copied).ok
