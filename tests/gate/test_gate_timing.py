"""Issue 20 (gate): timing metrics are advisory unless ``gate_timing`` is set, and the
per-correct figures are compared only when both sides' coverage is complete.

Two real reference runs of sales-fixture (the reference SQL executed by worker
processes) are gated against each other. Their SQL-execution P95 is this
machine's noise, so the current side's P95 is set to 1.6 x the baseline's (60%
worse, beyond the 0.20-r tolerance) in a copy of the real report.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from gatekit import fixed_clock, only_run, report_of, run_entry
from jsonschema import Draft202012Validator

from ledger.cli import main
from ledger.keys import Signer
from ledger.store import Ledger
from projections import gate

pytestmark = pytest.mark.slow  # two real reference runs

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "gate-verdict.schema.json").read_text("utf-8")
)
DEMO = Path(__file__).resolve().parents[2] / "tests" / "baselines" / "demo"


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of two reference runs (ref-a, ref-b) of sales-fixture on one ledger."""
    from ledger.adapters.base import build_adapter
    from ledger.app.evaluate import bank_context
    from ledger.bank.publish import publish
    from ledger.bank.registry import BUILTIN_DIR
    from ledger.run.runner import RunPlan, run

    folder = tmp_path_factory.mktemp("timing")
    signer = Signer.from_seed("timing-operator", bytes(range(32)))
    path = folder / "ledger.db"
    with Ledger.create(path, signer, clock=fixed_clock) as ledger:
        published = publish(ledger, signer, BUILTIN_DIR / "sales-fixture", folder, cwd=folder)
        ctx = bank_context(published.published, path, folder)
        for run_id in ("ref-a", "ref-b"):
            adapter = build_adapter("reference", {}, cases=ctx.reference_sql)
            try:
                plan = RunPlan(run_id=run_id, profile="reference", attempts=1)
                run(ledger, signer, ctx, adapter, plan, clock=fixed_clock)
            finally:
                adapter.close()
    return report_of(path)


@pytest.fixture(autouse=True)
def _clean_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _sides(report: dict[str, Any], tmp_path: Path) -> tuple[str, str, Decimal]:
    """Report files of ref-a and of ref-b with its SQL P95 set to 1.6 x ref-a's."""
    base = only_run(report, "ref-a")
    cur = only_run(report, "ref-b")
    p95 = Decimal(run_entry(base, "ref-a")["efficiency"]["sql_exec_ms"]["p95"])
    assert p95 > 0
    run_entry(cur, "ref-b")["efficiency"]["sql_exec_ms"]["p95"] = format(p95 * 16 / 10, "f")
    # generation time of the reference adapter is its own wall time too: keep it equal
    gen = run_entry(base, "ref-a")["efficiency"]["generation_ms"]["p95"]
    run_entry(cur, "ref-b")["efficiency"]["generation_ms"]["p95"] = gen
    paths = []
    for name, doc in (("a.json", base), ("b.json", cur)):
        (tmp_path / name).write_text(json.dumps(doc), "utf-8")
        paths.append(str(tmp_path / name))
    return paths[0], paths[1], p95


def _gate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["gate", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_a_60_percent_slower_sql_p95_warns_and_passes(reference_report, tmp_path: Path) -> None:
    base, cur, p95 = _sides(reference_report, tmp_path)
    code, output = _gate("--baseline", base, "--current", cur)
    assert code == 0, output
    assert "gate: PASS" in output
    assert "warning: sql_exec_p95_ms" in output
    assert "timing metrics are advisory (set gate_timing = true to gate them)" in output
    code, text = _gate("--baseline", base, "--current", cur, "--json")
    verdict = json.loads(text)
    assert [e.message for e in Draft202012Validator(SCHEMA).iter_errors(verdict)] == []
    rows = {r["metric"]: r for r in verdict["metrics"]}
    row = rows["sql_exec_p95_ms"]
    # 60% worse than the baseline, 20% allowed: a regression that does not gate
    assert (row["verdict"], row["gating"]) == ("regression", False)
    assert Decimal(row["delta"]) == p95 * 6 / 10
    assert Decimal(row["allowed"]) == p95 * 2 / 10
    assert (verdict["verdict"], verdict["regressions"], code) == ("pass", [], 0)
    assert rows["generation_p95_ms"]["gating"] is False
    assert rows["result_correct_rate"]["gating"] is True


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", "[tool.caseledger.gate]\ngate_timing = true\n"),
        ("caseledger.yaml", "gate:\n  gate_timing: true\n"),
    ],
    ids=["pyproject", "caseledger.yaml"],
)
def test_with_gate_timing_configured_it_fails(
    reference_report, tmp_path: Path, name: str, text: str
) -> None:
    base, cur, _ = _sides(reference_report, tmp_path)
    (tmp_path / name).write_text(text, "utf-8")
    code, output = _gate("--baseline", base, "--current", cur)
    assert code == 1, output
    assert "gate: REGRESSION: sql_exec_p95_ms (exit 1)" in output
    verdict = json.loads(_gate("--baseline", base, "--current", cur, "--json")[1])
    row = next(r for r in verdict["metrics"] if r["metric"] == "sql_exec_p95_ms")
    assert (row["verdict"], row["gating"], verdict["regressions"]) == (
        "regression", True, ["sql_exec_p95_ms"],
    )  # fmt: skip


def test_the_command_line_flag_gates_timing_too(reference_report, tmp_path: Path) -> None:
    base, cur, _ = _sides(reference_report, tmp_path)
    assert _gate("--baseline", base, "--current", cur, "--gate-timing")[0] == 1


def test_gate_timing_must_be_a_boolean(reference_report, tmp_path: Path) -> None:
    base, cur, _ = _sides(reference_report, tmp_path)
    (tmp_path / "caseledger.yaml").write_text("gate:\n  gate_timing: yes please\n", "utf-8")
    code, output = _gate("--baseline", base, "--current", cur)
    assert code == 2
    assert "gate_timing must be true or false, got 'yes please'" in output


def test_an_ignored_metric_does_not_gate(reference_report, tmp_path: Path) -> None:
    base, cur, _ = _sides(reference_report, tmp_path)
    verdict = json.loads(
        _gate("--baseline", base, "--current", cur, "--json", "--ignore", "format_ok_rate")[1]
    )
    row = next(r for r in verdict["metrics"] if r["metric"] == "format_ok_rate")
    assert (row["verdict"], row["gating"]) == ("ignored", False)


# ----------------------------------------------------------------- coverage


LUMEN = json.loads((DEMO / "lumen-mini" / "scorecard.json").read_text("utf-8"))


def test_the_demo_run_with_two_provider_failures_has_tokens_per_correct() -> None:
    # ledger/demo/lumen-mini.jsonl: 52 recorded answers with usage hold 169546 tokens
    # (input + cache_read + cache_write + output); the 429 and the 502 have none, and
    # 44 attempts are result-correct: 169546 / 44 = 3853.318... -> 3853.32, 52 of 54
    assert LUMEN["metrics"]["tokens_per_correct"] == "3853.32"
    assert LUMEN["coverage"] == {"tokens_per_correct": {"covered": 52, "planned": 54}}


def test_incomplete_coverage_is_incomparable_and_says_so() -> None:
    complete = json.loads(json.dumps(LUMEN))
    del complete["coverage"]
    complete["metrics"]["tokens_per_correct"] = "9999.00"  # would be a regression
    verdict = gate.judge(complete, LUMEN, gate.GateOptions())
    row = next(r for r in verdict.metrics if r.metric == "tokens_per_correct")
    assert (row.verdict, row.delta) == ("incomparable", None)
    assert row.note == (
        "coverage 54/54 vs 52/54 (compared only when every planned attempt has the figure "
        "on both sides)"
    )
    assert verdict.exit_code == 0
    assert "incomparable: tokens_per_correct: coverage 54/54 vs 52/54" in gate.render_text(verdict)


def test_complete_coverage_on_both_sides_is_compared() -> None:
    base = json.loads(json.dumps(LUMEN))
    cur = json.loads(json.dumps(LUMEN))
    del base["coverage"], cur["coverage"]
    cur["metrics"]["tokens_per_correct"] = "4300.00"  # 3853.32 * 1.1 = 4238.652 allowed
    verdict = gate.judge(base, cur, gate.GateOptions())
    row = next(r for r in verdict.metrics if r.metric == "tokens_per_correct")
    assert (row.verdict, row.delta, row.allowed) == ("regression", "446.68", "385.3320")
    assert verdict.regressions == ["tokens_per_correct"]
