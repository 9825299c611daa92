"""Issue 32: ``caseledger gate --significance`` (and ``gate_significance = true``).

A real ledger on the built-in sales-fixture bank (7 cases), one attempt per case, replay
runs: ``base`` answers every case with its reference SQL; ``small`` answers sf-02 wrongly
(one case worse); ``large`` answers sf-01..sf-06 wrongly (six cases worse). Worked by
hand (docs/statistics.md), the paired result-correct difference baseline - current:

* small: d = 1 on sf-02, 0 elsewhere: difference 1/7 = 0.1429; SE_d = sqrt((6 (1/7)^2 +
  (6/7)^2) / 6 / 7) = 1/7 = 0.1429; one non-zero d_i: both sign assignments reach |sum| 1,
  p = 2/2 = 1.0000: not significant, so --significance lets it pass;
* large: d = 1 on six cases: difference 6/7 = 0.8571; SE_d = 1/7 again; of the 2^6 sign
  assignments only all-plus and all-minus reach |sum| 6: p = 2/64 = 0.03125 -> 0.0313 <
  0.05: significant, so it fails with and without --significance.

Both are far beyond the result-correct tolerance (0.02), so without --significance both fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from gatekit import _answer, fixed_clock

from ledger.cli import main
from ledger.keys import Signer
from ledger.store import Ledger

RUNS = {"base": set(), "small": {"sf-02"}, "large": {f"sf-0{i}" for i in range(1, 7)}}


def _replay(refs: dict[str, str], wrong: set[str]) -> str:
    lines = []
    for case_id in sorted(refs):
        sql = "SELECT 1 AS wrong" if case_id in wrong else refs[case_id]
        line = {
            "case": case_id,
            "attempt": 1,
            "output": _answer(sql),
            "generation_ms": 1000,
            "usage": {"input": 1000, "output": 100},
            "request_id": f"req-{case_id}",
        }
        lines.append(json.dumps(line) + "\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def ledger_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ledger.adapters.base import build_adapter
    from ledger.app.evaluate import bank_context
    from ledger.bank.publish import publish
    from ledger.bank.registry import BUILTIN_DIR
    from ledger.run.runner import RunPlan, run

    folder = tmp_path_factory.mktemp("significance")
    signer = Signer.from_seed("significance-operator", bytes(range(32)))
    path = folder / "ledger.db"
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        bank = publish(ledger, signer, BUILTIN_DIR / "sales-fixture", folder, cwd=folder)
        ctx = bank_context(bank.published, path, folder)
        refs = bank.published.references()
        assert len(refs) == 7  # the 7-case bank the issue asks for
        for run_id, wrong in RUNS.items():
            replay = folder / f"{run_id}.jsonl"
            replay.write_text(_replay(refs, wrong), "utf-8")
            adapter = build_adapter(
                "replay", {"replay_file": str(replay), "tools": "off"}, cases=None
            )
            try:
                plan = RunPlan(run_id=run_id, profile="replay", attempts=1)
                run(ledger, signer, ctx, adapter, plan, clock=fixed_clock)
            finally:
                adapter.close()
    return path


def _gate(
    ledger_path: Path, current: str, *extra: str, cwd: Path | None = None
) -> tuple[int, dict[str, Any]]:
    args = ["gate", "--baseline", f"{ledger_path}:base", "--current", f"{ledger_path}:{current}"]
    done = CliRunner().invoke(main, [*args, "--json", *extra])
    assert done.exit_code in (0, 1, 2), done.output
    return done.exit_code, json.loads(done.stdout)


def _row(verdict: dict[str, Any], metric: str) -> dict[str, Any]:
    return next(r for r in verdict["metrics"] if r["metric"] == metric)


def test_a_small_regression_fails_on_tolerance_and_passes_with_significance(
    ledger_path: Path,
) -> None:
    code, verdict = _gate(ledger_path, "small")
    assert (code, verdict["verdict"]) == (1, "regression")
    row = _row(verdict, "result_correct_rate")
    assert (row["baseline"], row["current"], row["delta"], row["verdict"]) == (
        "1.0000", "0.8571", "-0.1429", "regression",
    )  # fmt: skip
    # The interval beside the metric (today's rule otherwise): base 7/7 has SE 0; small
    # 6/7 has SE 1/7 and 6/7 + 1.96/7 > 1, clipped.
    assert row["baseline_interval"] == {"low": "1.0000", "high": "1.0000"}
    assert row["current_interval"] == {"low": "0.5771", "high": "1.0000"}
    assert "rule" not in row
    assert "significance" not in verdict

    code, verdict = _gate(ledger_path, "small", "--significance")
    assert (code, verdict["verdict"], verdict["regressions"]) == (0, "pass", [])
    assert verdict["alpha"] == "0.05"
    assert verdict["significance"] == {
        "a": "base", "b": "small", "cases": 7, "difference": "0.1429", "se": "0.1429",
        "interval": {"low": "-0.1371", "high": "0.4229"}, "p_value": "1.0000",
        "test": "exact_sign_flip", "significant": False, "a_better": 1, "b_better": 0,
        "mdd": "0.4002",
    }  # fmt: skip
    row = _row(verdict, "result_correct_rate")
    assert (row["verdict"], row["rule"]) == ("pass", "significance")
    assert "not a significant worsening at alpha 0.05" in row["note"]
    # Every quality metric that was beyond its tolerance was decided by the same rule.
    assert all(
        r["rule"] == "significance"
        for r in verdict["metrics"]
        if r["metric"] in ("model_score", "dimension.aggregation_metrics")
    )


def test_a_large_regression_fails_with_and_without_significance(ledger_path: Path) -> None:
    code, verdict = _gate(ledger_path, "large")
    assert (code, verdict["verdict"]) == (1, "regression")
    assert "result_correct_rate" in verdict["regressions"]
    code, verdict = _gate(ledger_path, "large", "--significance")
    assert (code, verdict["verdict"]) == (1, "regression")
    assert "result_correct_rate" in verdict["regressions"]
    sig = verdict["significance"]
    assert (sig["difference"], sig["se"], sig["p_value"], sig["significant"]) == (
        "0.8571", "0.1429", "0.0313", True,
    )  # fmt: skip
    assert (sig["a_better"], sig["b_better"]) == (6, 0)
    row = _row(verdict, "result_correct_rate")
    assert (row["verdict"], row["rule"], row["delta"]) == ("regression", "significance", "-0.8571")


def test_the_text_names_the_rule_and_a_stricter_alpha_lets_the_large_one_pass(
    ledger_path: Path,
) -> None:
    args = ["gate", "--baseline", f"{ledger_path}:base", "--current", f"{ledger_path}:large"]
    done = CliRunner().invoke(main, [*args, "--significance"])
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert lines[-2] == (
        "significance: paired result-correct difference baseline - current 0.8571 over 7 "
        "cases, p = 0.0313 (exact_sign_flip), alpha 0.05: a significant worsening"
    )
    head = next(line for line in lines if line.startswith("metric "))
    assert head.split()[-1] == "rule"
    # 0.0313 is not below alpha 0.01: under that level even six cases are not enough.
    done = CliRunner().invoke(main, [*args, "--significance", "--alpha", "0.01"])
    assert done.exit_code == 0, done.stdout
    assert done.stdout.splitlines()[-1] == (
        "gate: PASS: no metric significantly worse beyond its tolerance (exit 0)"
    )
    done = CliRunner().invoke(main, [*args, "--significance", "--alpha", "2"])
    assert done.exit_code == 2
    assert "alpha must be between 0 and 1" in done.stderr


def test_gate_significance_in_the_configuration(
    ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.caseledger.gate]\ngate_significance = true\n", "utf-8"
    )
    monkeypatch.chdir(tmp_path)
    code, verdict = _gate(ledger_path, "small")
    assert (code, verdict["verdict"], _row(verdict, "result_correct_rate")["rule"]) == (
        0, "pass", "significance",
    )  # fmt: skip


def test_significance_without_per_case_results_could_not_judge(
    ledger_path: Path, tmp_path: Path
) -> None:
    # A scorecard file holds metrics only: --significance fails closed (exit 2).
    done = CliRunner().invoke(main, ["--ledger", str(ledger_path), "baseline", "freeze", "base",
                                     "-o", str(tmp_path / "frozen")])  # fmt: skip
    assert done.exit_code == 0, done.output
    card = tmp_path / "card.json"
    card.write_bytes((tmp_path / "frozen" / "scorecard.json").read_bytes())
    args = ["gate", "--baseline", str(card), "--current", f"{ledger_path}:small", "--json"]
    done = CliRunner().invoke(main, [*args, "--significance"])
    assert done.exit_code == 2
    verdict = json.loads(done.stdout)
    assert verdict["problems"] == [
        "--significance needs per-case results on both sides: baseline is a scorecard, "
        "which holds no per-case results"
    ]
    # The frozen baseline folder has its bundle: per-case results, the same verdict as
    # the ledger side.
    args = ["gate", "--baseline", str(tmp_path / "frozen"), "--current", f"{ledger_path}:small"]
    done = CliRunner().invoke(main, [*args, "--json", "--significance"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["significance"]["p_value"] == "1.0000"


@pytest.mark.parametrize("detail", ["stats", "compact", "full"])
def test_report_files_of_every_contract_give_the_same_verdict(
    ledger_path: Path, tmp_path: Path, detail: str
) -> None:
    # A report file carries each run's per-case results (/1, /2 and /3 alike).
    report = tmp_path / "report.json"
    args = ["--ledger", str(ledger_path), "report", "--detail", detail, "-o", str(report)]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    sides = ["--baseline", f"{report}:base", "--current", f"{report}:small"]
    done = CliRunner().invoke(main, ["gate", *sides, "--json", "--significance"])
    assert done.exit_code == 0, done.output
    from_file = json.loads(done.stdout)
    _, from_ledger = _gate(ledger_path, "small", "--significance")
    assert from_file["significance"] == from_ledger["significance"]
    assert from_file["metrics"] == from_ledger["metrics"]
