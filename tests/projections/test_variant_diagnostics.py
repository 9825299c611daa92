"""Variant flags in reports: counted per run, shown per CaseRun, and never part of any score."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_audit import HAND_MADE
from report_testkit import HandLedger

from ledger.app.snapshot import read_state
from ledger.merkle import root_hash
from projections.report.build import build_report, run_overview, to_plain
from projections.report.render import render

CASES = [("a", "basic", "easy", "1"), ("b", "joins_grain", "hard", "3")]
# (case, attempt, total, result_correct) of two model runs; r2 ranks first on rate.
PLAN = {
    "r1": [("a", 1, "100.00", True), ("a", 2, "60.00", False), ("b", 1, "100.00", True)],
    "r2": [("a", 1, "100.00", True), ("a", 2, "100.00", True), ("b", 1, "95.00", True)],
}


def _report(h) -> dict[str, Any]:
    state = read_state(h.ledger).state
    return to_plain(build_report(state, root_hash=root_hash(h.ledger.leaf_hashes(state.size))))


def _ledger(hand_ledger, name: str, flags: dict[tuple[str, str, int], tuple[str, ...]] | None):
    """Both runs; with ``flags`` a VariantChecked follows every scored attempt it names."""
    h = hand_ledger(CASES, name=name)
    for run_id, attempts in PLAN.items():
        h.run(run_id, attempts=2)
        for case, n, total, correct in attempts:
            h.scored(run_id, case, n, total, correct=correct)
            if flags is not None and (run_id, case, n) in flags:
                h.variant_checked(run_id, case, n, flags[(run_id, case, n)])
        h.cancelled(run_id, "b", 2, "interrupted")
        h.finish(run_id)
    return h


def _without_diagnostics(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus what VariantChecked events may change: the diagnostics fields, the
    checkpoint and the event lists (the ledgers differ by those events)."""
    out = copy.deepcopy(report)
    out.pop("checkpoint")
    for section in out["sections"]:
        for run in section["runs"]:
            run.pop("variant_diagnostics")
        for c in section["caseruns"]:
            c.pop("variants")
            c.pop("events")
    return out


FLAGS = {
    ("r1", "a", 1): ("scope_leak", "variant_mismatch"),
    ("r1", "a", 2): ("variant_mismatch",),
    ("r1", "b", 1): (),
    ("r2", "a", 1): (),
}


def test_flags_are_counted_per_run_and_change_nothing_else(hand_ledger):
    plain = _report(_ledger(hand_ledger, "plain.db", None))
    flagged = _report(_ledger(hand_ledger, "flagged.db", FLAGS))
    assert _without_diagnostics(flagged) == _without_diagnostics(plain)
    runs = {r["run"]: r for s in flagged["sections"] for r in s["runs"]}
    # ranking by hand: r2 3/4 correct beats r1 2/4; flags on r1 do not move it
    assert (runs["r2"]["rank"], runs["r1"]["rank"]) == (1, 2)
    r1, r2 = runs["r1"]["variant_diagnostics"], runs["r2"]["variant_diagnostics"]
    # r1: 3 attempts checked of 4 planned; a1 leaks and mismatches, a2 mismatches
    assert r1 == {
        "diagnostic_only": True,
        "total": 4,
        "checked": 3,
        "coverage": "0.7500",
        "flagged": 2,
        "flags": {"scope_leak": 1, "variant_mismatch": 2},
        "calibration_sha256": ["sha256:" + "ca" * 32],
    }
    assert (r2["checked"], r2["coverage"], r2["flagged"]) == (1, "0.2500", 0)
    assert r2["flags"] == {"scope_leak": 0, "variant_mismatch": 0}
    # each CaseRun carries its own flags; unchecked ones say null
    by_key = {(c["run"], c["case"], c["attempt"]): c for c in flagged["sections"][0]["caseruns"]}
    assert by_key[("r1", "a", 1)]["variants"]["flags"] == ["scope_leak", "variant_mismatch"]
    assert by_key[("r1", "b", 1)]["variants"]["flags"] == []
    assert by_key[("r2", "a", 2)]["variants"] is None
    assert by_key[("r1", "a", 1)]["variants"]["outcomes"] == [
        {
            "variant": "third-region",
            "non_interfering": True,
            "result_correct": False,
            "moved": True,
            "error_kind": None,
        }
    ]
    # without VariantChecked events: nothing checked, nothing flagged
    plain_runs = {r["run"]: r for s in plain["sections"] for r in s["runs"]}
    assert plain_runs["r1"]["variant_diagnostics"]["checked"] == 0
    assert plain_runs["r1"]["variant_diagnostics"]["coverage"] == "0.0000"


def test_flags_appear_in_markdown_and_html(hand_ledger):
    report = _report(_ledger(hand_ledger, "flagged.db", FLAGS))
    md = render(report, "md").decode()
    assert "### Variant diagnostics (never change a score)" in md
    # r2 first (ranked), then r1: checked, coverage, variant_mismatch, scope_leak, any flag
    assert "| r1 | 3/4 | 0.7500 | 2 | 1 | 2 |" in md
    assert "variant_mismatch 2, scope_leak 1 of 3 checked" in md  # next to the score
    assert (
        "| r1 | a | 1 | scored | 100.00 | yes | none | 0 | 0 | - | scope_leak, variant_mismatch |"
        in md
    )
    html = render(report, "html").decode()
    # the CaseRuns table has the Markdown's row; each checked CaseRun's evidence its flags
    assert (
        "<td>r1</td><td>a</td><td>1</td><td>scored</td><td>100.00</td><td>yes</td>"
        "<td>none</td><td>0</td><td>0</td><td>-</td><td>scope_leak, variant_mismatch</td>"
    ) in html
    assert "Variant flags (diagnostic, never change the score): scope_leak, " in html
    line = html.split("r1 / a / attempt 2: ", 1)[1].split('"', 1)[0]  # its evidence
    assert line.endswith("; variant flags (diagnostic): variant_mismatch")
    assert html.count("Variant flags (diagnostic, never change the score): ") == 4


@HAND_MADE
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(sorted((r, c, n) for r, a in PLAN.items() for c, n, *_ in a)),
        st.sets(st.sampled_from(["scope_leak", "variant_mismatch", "other_flag"])).map(
            lambda s: tuple(sorted(s))
        ),
    )
)
def test_any_flags_leave_scores_rates_and_ranks_alone(tmp_path_factory, flags):
    folder = tmp_path_factory.mktemp("prop")
    plain = HandLedger(folder / "plain.db", CASES)
    flagged = HandLedger(folder / "flagged.db", CASES)
    try:
        for h, marks in ((plain, None), (flagged, flags)):
            for run_id, attempts in PLAN.items():
                h.run(run_id, attempts=2)
                for case, n, total, correct in attempts:
                    h.scored(run_id, case, n, total, correct=correct)
                    if marks is not None and (run_id, case, n) in marks:
                        h.variant_checked(run_id, case, n, marks[(run_id, case, n)])
                h.finish(run_id)
        a, b = _report(plain), _report(flagged)
        assert _without_diagnostics(a) == _without_diagnostics(b)
        runs = {r["run"]: r["variant_diagnostics"] for s in b["sections"] for r in s["runs"]}
        for run_id in PLAN:
            mine = {k: v for k, v in flags.items() if k[0] == run_id}
            assert runs[run_id]["checked"] == len(mine)
            for flag in ("scope_leak", "variant_mismatch", "other_flag"):
                expected = sum(1 for v in mine.values() if flag in v)
                assert runs[run_id]["flags"].get(flag, 0) == expected
    finally:
        plain.ledger.close()
        flagged.ledger.close()


def test_flags_follow_their_batch_and_survive_a_rescore(hand_ledger):
    h = hand_ledger([("a", "basic", "easy", "1")])
    h.run("r1", attempts=2)
    # attempt 1: scored and flagged, then rescored under 2.1.0 (same evidence)
    h.scored("r1", "a", 1, "100.00")
    h.variant_checked("r1", "a", 1, ("scope_leak",))
    # attempt 2: an earlier batch was flagged, then cancelled; the resumed batch was not checked
    h.scored("r1", "a", 2, "100.00")
    h.variant_checked("r1", "a", 2, ("variant_mismatch",))
    h.cancelled("r1", "a", 2, "interrupted")
    h.scored("r1", "a", 2, "100.00")
    h.finish("r1")
    state = read_state(h.ledger).state
    from projections.caseruns import attempts_of_run

    first, second = attempts_of_run(state, "r1", "2.0.0")
    assert first.variant is not None
    assert first.variant.flags == ("scope_leak",)
    assert second.outcome == "scored"
    assert second.variant is None
    # a rescore ScoreComputed naming the same evidence keeps the batch's flags
    steps = state.caseruns["r1\x1fa\x1f1"].steps
    score = steps[-2].event  # ScoreComputed, then VariantChecked
    h.append(_draft_rescore(score))
    state = read_state(h.ledger).state
    rescored = attempts_of_run(state, "r1", "2.1.0")[0]
    assert rescored.score is not None
    assert rescored.score.scorer_version == "2.1.0"
    assert rescored.variant is not None
    assert rescored.variant.flags == ("scope_leak",)


def _draft_rescore(score):
    import msgspec

    from ledger import events as ev
    from ledger.store import Draft

    fields = msgspec.structs.asdict(score)
    for k in ("stream", "stream_seq", "stream_prev", "at"):
        fields.pop(k)
    fields["scorer_version"] = "2.1.0"
    return Draft(ev.ScoreComputed, "r1", fields)


def test_a_report_of_flags_and_calibrations_reads_every_event(hand_ledger):
    h = _ledger(hand_ledger, "flagged.db", FLAGS)
    h.run("cal-1", kind="calibration", attempts=1)
    h.calibrated("cal-1", [("a", "drop_scope_predicate#0", "killed")], [("a", True)])
    h.finish("cal-1")
    snap = read_state(h.ledger)
    assert snap.state.calibrations["cal-1"].finished is not None
    assert snap.root == root_hash(h.ledger.leaf_hashes(snap.size))
    assert to_plain(build_report(snap.state, root_hash=snap.root)) == _report(h)


MUTANTS = [
    ("a", "drop_scope_predicate#0", "killed"),
    ("a", "move_range_endpoint#0", "killed"),
    ("a", "join_type_swap#0", "equivalent"),
    ("b", "one_to_many_join#0", "survived"),
    ("b", "change_limit#0", "not_applicable"),
    ("b", "time_column_swap#0", "unsupported"),
    ("b", "drop_timezone#0", "blocked"),
]


def test_calibration_section_by_hand(hand_ledger):
    h = hand_ledger(CASES)
    h.run("m1", attempts=1)
    h.scored("m1", "a", 1, "100.00")
    h.finish("m1")
    h.run("cal-1", kind="calibration", attempts=1)
    h.calibrated("cal-1", MUTANTS, [("a", True), ("b", False)])
    h.finish("cal-1", "failed")
    h.run("cal-2", kind="calibration", attempts=1)
    h.calibrated("cal-2", MUTANTS[:2], [], finished=False)  # cut before its totals
    state = read_state(h.ledger).state
    report = to_plain(
        build_report(state, root_hash=root_hash(h.ledger.leaf_hashes(state.size)), scorer="3.0.0")
    )
    kinds = [(s["kind"], s["scorer_major"], s["ranked"]) for s in report["sections"]]
    # --scorer views model scores; calibration verdicts stay under the scorer they used
    assert kinds == [("models", "3", True), ("calibration", "2", False)]
    section = report["sections"][1]
    assert section["title"].startswith("Calibration (oracle checks, never ranked) - bank hand v1")
    one, two = section["runs"]
    c = one["calibration"]
    # killed 2, survived 1: 2 / 3 = 0.6667; applicable = 2 + 1 + 1 + 1 = 5
    assert c["kill_rate"] == "0.6667"
    assert c["counts"] == {
        "killed": 2,
        "survived": 1,
        "equivalent": 1,
        "blocked": 1,
        "unsupported": 1,
        "not_applicable": 1,
    }
    assert c["applicable"] == 5
    assert c["positive_controls"]["passed"] == 1
    assert c["positive_controls"]["total"] == 2
    assert [(f["case"], f["index"]) for f in c["positive_controls"]["failed"]] == [("b", 1)]
    assert c["passed"] is False
    assert one["status"] == "failed"
    assert one["rank"] is None
    assert [(s["case"], s["mutant"], s["operator"]) for s in c["survivors"]] == [
        ("b", "one_to_many_join#0", "one_to_many_join")
    ]
    assert c["equivalents"][0]["review"] == "reviewed: same rows"
    assert c["operators"]["drop_scope_predicate"]["killed"] == 1
    assert [v["id"] for v in c["variants"]] == ["third-region"]
    # unfinished: counts from the judged events, no kill rate claimed
    u = two["calibration"]
    assert (u["finished"], u["kill_rate"], u["counts"]["killed"], u["passed"]) == (
        False,
        None,
        2,
        None,
    )
    md = render(report, "md").decode()
    assert "| cal-1 | failed | 0.6667 | 2 | 1 | 1 | 1 | 1 | 1 | 5 | 1/2 | no |" in md
    assert "| cal-1 | b | one_to_many_join#0 | one_to_many_join |" in md
    assert "FAILED positive control in cal-1: case b alternative_sql[1]" in md
    html = render(report, "html").decode()
    assert '<div id="calibration">' in html
    assert "one_to_many_join#0" in html
    rows = {r.run: r for r in run_overview(state)}
    assert (rows["cal-1"].done, rows["cal-1"].kill_rate) == (2, "0.6667")
    assert rows["cal-1"].result_correct_rate is None
    assert rows["cal-1"].score is None
    assert (rows["cal-2"].done, rows["cal-2"].kill_rate) == (0, None)
    assert rows["m1"].kill_rate is None
    assert rows["m1"].done == 1
