"""One attempt-outcome resolver (issue 14 item 2): projections/outcome.terminal.

The reference table below is written by hand from DESIGN.md ("the last of its
AttemptCancelled events and of its ScoreComputed events with version V"; resume
reruns attempts cancelled as interrupted). Symbols: ``S1``/``S2`` ScoreComputed
of scorer version 1/2, ``Ci`` AttemptCancelled(interrupted), ``Cx``
AttemptCancelled(infrastructure). Each column gives the 0-based position of the
terminal event in the sequence, or ``-`` for none, under V=1, V=2 and any version.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_testkit import HandLedger

from ledger.events import (
    AttemptCancelled,
    EventBase,
    PromptSent,
    ScoreComputed,
    ScoreItems,
    VariantChecked,
)
from ledger.run.runner import plan_keys, summarise
from projections.caseruns import CaseRun, Step, resolve
from projections.outcome import terminal

TABLE = """
seq        v1  v2  any
-          -   -   -
S1         0   -   0
S2         -   0   0
Ci         0   0   0
Cx         0   0   0
S1 S1      1   -   1
S1 S2      0   1   1
S2 S1      1   0   1
S2 S2      -   1   1
S1 Ci      1   1   1
Ci S1      1   0   1
S2 Ci      1   1   1
Ci S2      0   1   1
Cx S1      1   0   1
S1 Cx      1   1   1
Ci Cx      1   1   1
Cx Ci      1   1   1
Ci Ci      1   1   1
S1 Ci S2   1   2   2
S2 Cx S1   2   1   2
Ci S1 S2   1   2   2
S1 S2 Ci   2   2   2
"""


def _rows() -> list[tuple[list[str], dict[str | None, int | None]]]:
    rows = []
    for line in TABLE.strip().splitlines()[1:]:
        *seq, v1, v2, anyv = line.split()
        symbols = [] if seq == ["-"] else seq
        want = {
            key: None if cell == "-" else int(cell)
            for key, cell in zip(("1", "2", None), (v1, v2, anyv), strict=True)
        }
        rows.append((symbols, want))
    return rows


ROWS = _rows()
_ENV = {"stream": "r", "stream_prev": None, "at": "t", "case_id": "c", "attempt": 1}


def _event(symbol: str, n: int) -> EventBase:
    env = {**_ENV, "stream_seq": n}
    if symbol.startswith("S"):
        return ScoreComputed(**env, **_SCORE, scorer_version=symbol[1])
    if symbol.startswith("C"):
        reason = "interrupted" if symbol == "Ci" else "infrastructure"
        return AttemptCancelled(**env, reason=reason, message=reason)
    if symbol == "P":
        return PromptSent(**env, prompt="p", prompt_sha256="sha256:" + "0" * 64)
    return VariantChecked(**env, calibration_sha256="sha256:" + "1" * 64, flags=(), outcomes=())


_ZERO = Decimal(0)
#: The body of a ScoreComputed apart from its version (the values do not matter here).
_SCORE: dict[str, Any] = {
    "evidence": (),
    "gold_digest": "sha256:" + "2" * 64,
    "alignment": "names",
    "column_mapping": (0,),
    "matched": 0,
    "expected_rows": 1,
    "actual_rows": 1,
    "precision": _ZERO,
    "recall": _ZERO,
    "f1": _ZERO,
    "order_ok": False,
    "non_finite": False,
    "ast_rules": (),
    "items": ScoreItems(
        **dict.fromkeys(
            (
                "protocol",
                "guard",
                "executed",
                "column_count",
                "column_names",
                "rows",
                "order",
                "ast",
            ),
            _ZERO,
        )
    ),
    "total": _ZERO,
    "result_correct": False,
    "format_ok": True,
    "failure_kind": "none",
    "sql_structural_match": None,
}


def _check(symbols: list[str], want: dict[str | None, int | None]) -> None:
    evs = [_event(s, i) for i, s in enumerate(symbols)]
    for version, index in want.items():
        got = terminal(evs, version)
        assert got.index == index, (symbols, version)
        sym = None if index is None else symbols[index]
        assert got.event is (None if index is None else evs[index])
        assert (
            got.outcome
            == {None: "unscored", "S": "scored", "C": "cancelled"}[None if sym is None else sym[0]]
        )
        # final: scored, or cancelled for another reason than interrupted
        assert got.final is (sym is not None and sym != "Ci")


@pytest.mark.parametrize(("symbols", "want"), ROWS, ids=[" ".join(r[0]) or "-" for r in ROWS])
def test_reference_table(symbols: list[str], want: dict[str | None, int | None]) -> None:
    _check(symbols, want)


NOISE = st.sampled_from(["P", "V"])
TERMINALS = st.sampled_from(["S1", "S2", "Ci", "Cx"])


@settings(max_examples=200, deadline=None)
@given(
    row=st.sampled_from(ROWS),
    prefix=st.lists(TERMINALS, max_size=6),
    noise=st.lists(st.tuples(st.integers(0, 12), NOISE), max_size=8),
)
def test_any_prefix_and_noise_keep_the_table_answer(row, prefix, noise) -> None:
    """Terminal events before a table row do not matter when the row has a terminal
    (the last one counts); non-terminal events anywhere never matter."""
    symbols, want = row
    full = prefix + symbols
    expected = {
        v: (None if i is None else i + len(prefix)) for v, i in want.items() if i is not None
    }
    # insert noise, remembering where each table symbol lands
    placed = [(s, i) for i, s in enumerate(full)]
    for at, sym in sorted(noise, key=lambda x: -x[0]):
        placed.insert(min(at, len(placed)), (sym, None))
    where = {orig: pos for pos, (_, orig) in enumerate(placed) if orig is not None}
    _check(
        [s for s, _ in placed],
        {v: where[i] for v, i in expected.items()},
    )


@given(st.lists(NOISE, max_size=6))
def test_no_terminal_is_unscored(noise) -> None:
    evs = [_event(s, i) for i, s in enumerate(noise)]
    for version in ("1", None):
        got = terminal(evs, version)
        assert (got.outcome, got.index, got.event, got.final) == ("unscored", None, None, False)


# ------------------------------------------------------- the call sites agree


CASES = [("c1", "basic", "easy", "1")]


def test_report_view_uses_the_resolver(hand_ledger) -> None:
    """caseruns.resolve: Ci S2 -> under 2.0.0 (the run's scorer) cancelled, under 9 also."""
    h: HandLedger = hand_ledger(CASES)
    h.run("r", attempts=1)
    h.cancelled("r", "c1", 1)
    h.scored("r", "c1", 1, "50", scorer="9.0.0")
    caserun = CaseRun("r", "c1", 1, _steps(h, "r"))
    assert resolve(caserun, "2.0.0", ("r", "c1", 1)).outcome == "cancelled"
    scored = resolve(caserun, "9.0.0", ("r", "c1", 1))
    assert (scored.outcome, str(scored.score.total)) == ("scored", "50")


def _steps(h: HandLedger, run_id: str) -> list[Step]:
    out = []
    for row in h.ledger.stream_events(run_id):
        event = row.event()
        if hasattr(event, "case_id"):
            out.append(Step(row.seq, row.leaf_hash, event))
    return out


def test_summary_counts_the_runs_own_scorer_after_a_rescore(hand_ledger) -> None:
    """Disagreement fixed: the run summary counted correct/failures from the last score
    of ANY version, so a rescore changed it; now it uses the version in RunStarted
    (2.0.0), as `caseledger runs` and the report do. Hand count: c1#1 correct under
    2.0.0 (a later 9.0.0 score says wrong, failure 'execution'), c1#2 wrong under
    2.0.0 with failure 'guard', c1#3 cancelled as interrupted (not done)."""
    h: HandLedger = hand_ledger(CASES)
    h.run("r", attempts=3)
    h.scored("r", "c1", 1, "100", correct=True)
    h.scored("r", "c1", 2, "10", correct=False, failure="guard")
    h.cancelled("r", "c1", 3, "interrupted")
    h.finish("r", "cancelled")
    h.scored("r", "c1", 1, "20", correct=False, failure="execution", scorer="9.0.0")
    s = summarise(h.ledger.stream_events("r"), plan_keys(_specs(h), 3))
    assert (s.status, s.planned, s.done, s.correct) == ("cancelled", 3, 2, 1)
    assert s.failures == {"guard": 1}


def test_summary_done_follows_resume(hand_ledger) -> None:
    """Ci then S2(9.0.0): resume will not run it again (any version), so it is done;
    under the run's 2.0.0 it is an interrupted cancellation, so it adds no count."""
    h: HandLedger = hand_ledger(CASES)
    h.run("r", attempts=1)
    h.cancelled("r", "c1", 1, "interrupted")
    h.scored("r", "c1", 1, "100", correct=True, scorer="9.0.0")
    s = summarise(h.ledger.stream_events("r"), plan_keys(_specs(h), 1))
    assert (s.done, s.correct, s.failures) == (1, 0, {})


def _specs(h: HandLedger):
    from ledger.events import BankPublished

    bank = next(
        r.event() for r in h.ledger.stream_events("ledger") if isinstance(r.event(), BankPublished)
    )
    return bank.cases


def test_rescore_and_baseline_pick_the_any_version_score(tmp_path: Path) -> None:
    """rescore._latest_score and baseline._latest_scores: the terminal of any version,
    when it is a score (S1 Ci -> none; Ci S2 -> S2)."""
    from ledger.app.baseline import _latest_scores
    from ledger.app.rescore import _has_version, _latest_score
    from projections.caseruns import State, caserun_key

    a = CaseRun(
        "r", "c1", 1, [Step(i, bytes(32), _event(s, i)) for i, s in enumerate(["S1", "Ci"])]
    )
    b = CaseRun(
        "r", "c1", 2, [Step(i, bytes(32), _event(s, i)) for i, s in enumerate(["Ci", "S2"])]
    )
    assert _latest_score(a) is None
    assert _latest_score(b) is b.steps[1].event
    state = State(caseruns={caserun_key("r", "c1", 1): a, caserun_key("r", "c1", 2): b})
    assert [(c, n, s.scorer_version) for c, n, s, _ in _latest_scores(state, "r")] == [
        ("c1", 2, "2")
    ]
    # Disagreement fixed: S2 Cx S1 -> rescore to 2 said "already scored" (an S2 with the
    # same evidence exists) though the outcome under 2 is the cancellation; now it rescores.
    c = CaseRun(
        "r", "c1", 3, [Step(i, bytes(32), _event(s, i)) for i, s in enumerate(["S2", "Cx", "S1"])]
    )
    assert _latest_score(c) is c.steps[2].event
    assert _has_version(c, "2", ()) is False
    assert _has_version(b, "2", ()) is True
