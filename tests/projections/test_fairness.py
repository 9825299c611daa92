"""Fairness classes read from recorded invocations (issue 7 item 2)."""

from __future__ import annotations

import pytest

from ledger.app.snapshot import read_state
from ledger.merkle import root_hash
from projections.report.build import build_report, to_plain

CASES = [("a", "basic", "easy", "1")]


def _fairness(h):
    state = read_state(h.ledger).state
    report = to_plain(build_report(state, root_hash=root_hash(h.ledger.leaf_hashes(state.size))))
    (section,) = report["sections"]
    return section["fairness"]


def _pair(h, left: dict, right: dict, attempts: int = 2) -> None:
    for run_id, overrides in (("r1", left), ("r2", right)):
        h.run(run_id, attempts=attempts)
        for n in range(1, attempts + 1):
            h.scored(run_id, "a", n, "100.00", invocation=h.invocation(**overrides))


def test_single_model(hand_ledger):
    h = hand_ledger(CASES)
    h.run("r1", attempts=1)
    h.scored("r1", "a", 1, "100.00")
    assert _fairness(h)["class"] == "single_model"


def test_pair_differing_only_in_temperature_is_controlled(hand_ledger):
    h = hand_ledger(CASES)
    _pair(h, {"parameters": {"temperature": "0"}}, {"parameters": {"temperature": "0.7"}})
    f = _fairness(h)
    assert f["class"] == "controlled_harness"
    assert f["differing_controls"] == []
    assert f["disclosed_differences"] == ["temperature"]
    assert f["disclosed"]["r2"]["parameters"] == {"temperature": "0.7"}


def test_pair_differing_in_model_and_provider_is_controlled(hand_ledger):
    h = hand_ledger(CASES)
    _pair(h, {"model": "m-1", "provider": "p1"}, {"model": "m-2", "provider": "p2"})
    f = _fairness(h)
    assert f["class"] == "controlled_harness"
    assert f["disclosed_differences"] == ["provider", "model"]


@pytest.mark.parametrize(
    ("right", "control"),
    [
        ({"tools": "on"}, "tools"),
        ({"retries": 1}, "retries"),
        ({"single_call": False}, "single_call"),
        ({"response_mode": "json_schema"}, "response_mode"),
        ({"harness_kind": "other-harness"}, "harness_kind"),
        ({"prompt_contract_digest": "sha256:" + "ef" * 32}, "prompt_contract_digest"),
    ],
    ids=["tools", "retries", "single-call", "response-mode", "harness", "prompt-contract"],
)
def test_pair_differing_in_a_control_is_not_controlled(hand_ledger, right, control):
    h = hand_ledger(CASES)
    _pair(h, {}, right)
    f = _fairness(h)
    assert f["class"] == "not_controlled"
    assert f["differing_controls"] == [control]


def test_equal_but_disallowed_controls_are_not_controlled(hand_ledger):
    # both sides retry once: equal, but retries must be 0
    h = hand_ledger(CASES)
    _pair(h, {"retries": 1}, {"retries": 1})
    assert _fairness(h)["differing_controls"] == ["retries"]


def test_missing_invocation_evidence_on_one_side_is_never_equal(hand_ledger):
    h = hand_ledger(CASES)
    h.run("r1", attempts=2)
    h.run("r2", attempts=2)
    for n in (1, 2):
        h.scored("r1", "a", n, "100.00")
    h.scored("r2", "a", 1, "100.00")
    h.cancelled("r2", "a", 2, "missing_recording")  # no model call: no invocation recorded
    f = _fairness(h)
    assert f["class"] == "not_controlled"
    assert f["differing_controls"] == ["invocation_evidence"]
    assert f["missing_invocation_evidence"] == ["r2"]
    assert f["invocation_coverage"] == {"r1": "1.0000", "r2": "0.5000"}
