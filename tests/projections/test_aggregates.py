"""Hand-computed aggregates, quality and efficiency over hand-made ledgers (issue 7 item 2)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from ledger.app.snapshot import read_state
from ledger.merkle import root_hash
from projections.aggregates import case_stats, weighted_score
from projections.numbers import nearest_rank, show
from projections.report.build import build_report, to_plain

CASES = [
    ("a", "basic", "easy", "1"),
    ("b", "joins_grain", "hard", "3"),
]


def _report(h):
    state = read_state(h.ledger).state
    return to_plain(build_report(state, root_hash=root_hash(h.ledger.leaf_hashes(state.size))))


def _run(report, run_id):
    for section in report["sections"]:
        for run in section["runs"]:
            if run["run"] == run_id:
                return section, run
    raise AssertionError(run_id)


def test_case_stats_100_50_0():
    stats = case_stats([Decimal("100.00"), Decimal("50.00"), Decimal("0.00")])
    assert stats.mean == 50
    assert stats.nonzero_rate == Fraction(2, 3)
    assert show(stats.stddev, 2) == "40.82"  # sqrt(5000/3) = 40.8248...
    assert show(stats.nonzero_rate, 4) == "0.6667"


def test_weighted_score_is_exact():
    # (1 * 50 + 3 * 160/3) / 4 = 52.5
    assert weighted_score([(Decimal(1), Fraction(50)), (Decimal(3), Fraction(160, 3))]) == Fraction(
        105, 2
    )


def test_report_aggregates_with_weights_and_a_cancelled_attempt(hand_ledger):
    h = hand_ledger(CASES)
    h.run("r1")
    h.scored("r1", "a", 1, "100.00")
    h.scored("r1", "a", 2, "50.00", correct=False)
    h.scored("r1", "a", 3, "0.00", correct=None, failure="protocol", format_ok=False, sql_us=None)
    h.scored("r1", "b", 1, "80.00", correct=False)
    h.cancelled("r1", "b", 2, "interrupted")  # stays in the denominator as 0
    h.scored("r1", "b", 3, "80.00", correct=False)
    h.finish("r1")
    _, run = _run(_report(h), "r1")
    a, b = run["cases"]
    assert (a["mean"], a["nonzero_rate"], a["stddev"]) == ("50.00", "0.6667", "40.82")
    assert a["totals"] == ["100.00", "50.00", "0.00"]
    # b: (80 + 0 + 80) / 3 = 53.333..; stddev over (80, 0, 80) = sqrt(12800/9) = 37.712...
    assert (b["mean"], b["nonzero_rate"], b["stddev"]) == ("53.33", "0.6667", "37.71")
    assert b["outcomes"] == ["scored", "cancelled", "scored"]
    # (1 * 50 + 3 * 160/3) / (1 + 3) = 52.50; a plain mean of the case means would be 51.67
    assert run["scores"]["model_score"] == "52.50"
    assert run["scores"]["auxiliary"] is True
    assert run["scores"]["dimensions"]["basic"] == "50.00"
    assert run["scores"]["dimensions"]["joins_grain"] == "53.33"
    assert run["scores"]["dimensions"]["time_window"] is None
    assert run["scores"]["difficulties"] == {"easy": "50.00", "hard": "53.33", "medium": None}
    q = run["quality"]
    assert (q["total"], q["evaluated"], q["coverage"]) == (6, 5, "0.8333")
    assert (q["correct"], q["wrong"], q["unknown"]) == (1, 3, 2)
    assert q["result_correct_rate"] == "0.1667"
    assert q["failures"]["protocol"] == 1
    assert q["failure_rates"]["protocol"] == "0.1667"
    assert q["cancelled"] == {"interrupted": 1}
    assert q["format_ok_rate"] == "0.6667"  # a1, a2, b1, b3 of 6
    assert q["sql_exec_success_rate"] == "0.6667"  # 4 executions of 6 planned


def test_missing_attempt_counts_as_zero(hand_ledger):
    h = hand_ledger(CASES[:1])
    h.run("r1", attempts=2)
    h.scored("r1", "a", 1, "90.00")
    _, run = _run(_report(h), "r1")
    assert run["cases"][0]["mean"] == "45.00"
    assert run["quality"]["unscored"] == 1
    assert run["status"] == "unfinished"


def test_efficiency_null_when_no_attempt_is_correct(hand_ledger):
    h = hand_ledger(CASES[:1])
    h.run("r1")
    for n in (1, 2, 3):
        h.scored("r1", "a", n, "40.00", correct=False, cost="0.01")
    h.finish("r1")
    _, run = _run(_report(h), "r1")
    e = run["efficiency"]
    assert e["correct"] == 0
    assert e["tokens"]["total"] == 360
    assert e["tokens"]["per_correct"] is None
    assert e["cost"]["per_correct"] is None
    assert e["cost"]["total"] == "0.030000"
    assert e["generation_ms"]["per_correct"] is None


def test_efficiency_per_correct_and_incomplete_figures(hand_ledger):
    h = hand_ledger(CASES[:1])
    h.run("r1")
    h.scored("r1", "a", 1, "100.00", cost="0.02", generation_us=2000)
    h.scored("r1", "a", 2, "100.00", cost="0.04", generation_us=4000)
    h.scored("r1", "a", 3, "10.00", correct=False, cost=None, usage=None, generation_us=3000)
    _, run = _run(_report(h), "r1")
    e = run["efficiency"]
    assert e["correct"] == 2
    # one (wrong) attempt lacks tokens and cost: the figures run over the other two,
    # (100 + 20) * 2 tokens / 2 correct = 120, 0.06 / 2 = 0.03, with "2 of 3" beside them
    assert (e["tokens"]["per_correct"], e["tokens"]["covered"]) == ("120.00", 2)
    assert e["tokens"]["coverage"] == "0.6667"
    assert (e["cost"]["per_correct"], e["cost"]["covered"]) == ("0.030000", 2)
    assert e["cost"]["coverage"] == "0.6667"
    assert e["cost"]["kind"] == "billed"
    # generation time is complete: (2 + 4 + 3) ms / 2 correct = 4.5 ms
    assert e["generation_ms"]["per_correct"] == "4.500"


def test_per_correct_counts_only_correct_attempts_that_have_the_figure(hand_ledger):
    # a 429-like attempt (correct=None, no usage) and a correct attempt without usage:
    # tokens 120 of a1 over the 1 correct attempt that reports tokens = 120, not 120 / 2
    h = hand_ledger(CASES[:1])
    h.run("r1", attempts=4)
    h.scored("r1", "a", 1, "100.00", cost="0.05")
    h.scored("r1", "a", 2, "100.00", usage=None)
    h.scored("r1", "a", 3, "0.00", correct=None, failure="provider", usage=None, sql_us=None)
    h.scored("r1", "a", 4, "10.00", correct=False, usage=(300, 100), cost="0.03")
    h.finish("r1")
    _, run = _run(_report(h), "r1")
    e = run["efficiency"]
    assert e["correct"] == 2
    # tokens: a1 120 + a4 400 = 520 over 1 correct (a1) -> 520.00, 2 of 4 attempts
    assert (e["tokens"]["total"], e["tokens"]["per_correct"], e["tokens"]["covered"]) == (
        520, "520.00", 2,
    )  # fmt: skip
    # cost: 0.05 + 0.03 = 0.08 over 1 correct (a1) -> 0.080000, 2 of 4 attempts
    assert (e["cost"]["total"], e["cost"]["per_correct"], e["cost"]["covered"]) == (
        "0.080000", "0.080000", 2,
    )  # fmt: skip


def test_complete_or_absent_figures_add_no_covered_field(hand_ledger):
    h = hand_ledger(CASES[:1])
    h.run("r1")
    for n in (1, 2, 3):
        h.scored("r1", "a", n, "100.00")  # tokens on all three, cost on none
    h.finish("r1")
    _, run = _run(_report(h), "r1")
    e = run["efficiency"]
    assert "covered" not in e["tokens"]
    assert "covered" not in e["cost"]
    assert (e["tokens"]["per_correct"], e["cost"]["per_correct"]) == ("120.00", None)
    assert (e["tokens"]["coverage"], e["cost"]["coverage"]) == ("1.0000", "0.0000")


def test_p95_nearest_rank(hand_ledger):
    assert nearest_rank([1000 * i for i in range(1, 21)]) == 19000  # ceil(0.95 * 20) = 19th
    assert nearest_rank([7, 1, 3]) == 7  # ceil(2.85) = 3rd of 3
    h = hand_ledger(CASES[:1])
    h.run("r1", attempts=20)
    for n in range(1, 21):
        h.scored("r1", "a", n, "100.00", generation_us=1000 * (21 - n), sql_us=10 * n)
    _, run = _run(_report(h), "r1")
    assert run["efficiency"]["generation_ms"]["p95"] == "19.000"
    assert run["efficiency"]["sql_exec_ms"]["p95"] == "0.190"
    assert run["efficiency"]["tokens"]["per_correct"] == "120.00"


def test_self_test_and_other_bank_sections_are_separate(hand_ledger):
    h = hand_ledger(CASES[:1])
    h.run("m1")
    h.run("ref", kind="self_test")
    h.run("m2-new-scorer", scorer="3.0.0")
    for run_id, scorer in (("m1", "2.0.0"), ("ref", "2.0.0"), ("m2-new-scorer", "3.0.0")):
        h.scored(run_id, "a", 1, "100.00", scorer=scorer)
    report = _report(h)
    kinds = [
        (s["kind"], s["scorer_major"], [r["run"] for r in s["runs"]]) for s in report["sections"]
    ]
    assert kinds == [
        ("models", "2", ["m1"]),
        ("models", "3", ["m2-new-scorer"]),
        ("self_test", "2", ["ref"]),
    ]
    assert report["sections"][2]["ranked"] is False
    assert report["sections"][2]["runs"][0]["rank"] is None
    assert report["sections"][0]["runs"][0]["rank"] == 1


def test_the_views_show_the_coverage_beside_the_figure(hand_ledger):
    from projections.report.render import render

    h = hand_ledger(CASES[:1])
    h.run("r1")
    h.scored("r1", "a", 1, "100.00", cost="0.02")
    h.scored("r1", "a", 2, "100.00", cost="0.04")
    h.scored("r1", "a", 3, "0.00", correct=None, failure="provider", usage=None, sql_us=None)
    h.finish("r1")
    state = read_state(h.ledger).state
    report = build_report(state, root_hash=root_hash(h.ledger.leaf_hashes(state.size)))
    for fmt in ("md", "html"):
        text = render(report, fmt).decode("utf-8")
        # 240 tokens / 2 correct; 0.06 billed / 2 correct; both over 2 of the 3 attempts
        assert "120.00 (2 of 3 attempts)" in text, fmt
        assert "0.030000 (2 of 3 attempts)" in text, fmt
