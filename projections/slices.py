"""Understanding slices of one run: where its wrong answers first departed from the reference.

A SliceComputed event (appended by ``caseledger slices``, ``ledger/app/slices.py``)
names, for one attempt whose SQL executed, the first component where its SQL
departs from the case's reference SQL (``ledger.harness.slices``). This fold
counts them over the run's **wrong** attempts (executed, not result-correct,
under the scorer version viewed), per run and per dimension. It is a
diagnostic: nothing in ``aggregates``, ``quality``, ``efficiency``,
``fairness``, ``metrics`` or the ranking reads it.

Denominators, as seed 004 asks: ``wrong`` = the wrong attempts; ``unknown``
(the SQL could not be attributed) and ``not_recorded`` (no SliceComputed for
that answer yet) are counted and listed, never dropped, and stay out of
``checked`` = the wrong attempts with a component or ``none``; each share is
``count / checked``. A run with nothing checked has no shares (never an empty
100%).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from ledger.events import CaseSpec, SliceComputed
from ledger.harness.slices import COMPONENTS, NONE, UNKNOWN
from projections.caseruns import Attempt
from projections.numbers import rate
from projections.report import schema as S

__all__ = [
    "CONSUMES",
    "NOT_RECORDED",
    "ROWS",
    "SliceRow",
    "attempt_rows",
    "has_slices",
    "summarize",
]

CONSUMES = (SliceComputed,)
#: A wrong attempt whose answer has no SliceComputed yet.
NOT_RECORDED = "not_recorded"
#: The rows of every count, in the order they are shown.
ROWS = (*COMPONENTS, NONE, UNKNOWN, NOT_RECORDED)


def has_slices(attempts: Sequence[Attempt]) -> bool:
    """Whether any attempt of the run has a recorded slice (else reports leave it out)."""
    return any(a.slice is not None for a in attempts)


def _is_wrong(a: Attempt) -> bool:
    return a.score is not None and a.score.result_correct is False


def _component(a: Attempt) -> str:
    return a.slice.component if a.slice is not None else NOT_RECORDED


def _counts(attempts: Sequence[Attempt]) -> S.SliceCounts:
    counts = dict.fromkeys(ROWS, 0)
    for a in attempts:
        counts[_component(a)] = counts.get(_component(a), 0) + 1
    checked = sum(counts[c] for c in (*COMPONENTS, NONE))
    return S.SliceCounts(
        wrong=len(attempts),
        checked=checked,
        counts=counts,
        shares={c: rate(counts[c], checked) for c in (*COMPONENTS, NONE)},
    )


def summarize(attempts: Sequence[Attempt], cases: Mapping[str, CaseSpec]) -> S.SliceBlock:
    """Counts of first divergences over the run's wrong attempts, overall and per dimension.

    ``cases``: the bank's cases by id (for the dimension of each attempt).

    >>> summarize([], {}).checked, summarize([], {}).shares["joins"]
    (0, None)
    """
    wrong = [a for a in attempts if _is_wrong(a)]
    out = _counts(wrong)
    dims: dict[str, list[Attempt]] = {}
    for a in wrong:
        case = cases.get(a.case_id)
        dims.setdefault(case.dimension if case is not None else "?", []).append(a)
    return S.SliceBlock(
        wrong=out.wrong,
        checked=out.checked,
        counts=out.counts,
        shares=out.shares,
        diagnostic_only=True,
        slicer_versions=sorted({a.slice.slicer_version for a in wrong if a.slice is not None}),
        dimensions={d: _counts(dims[d]) for d in sorted(dims)},
        unattributed=[
            S.SliceAttempt(
                case=a.case_id, attempt=a.attempt, component=_component(a), detail=_detail(a)
            )
            for a in wrong
            if _component(a) in (UNKNOWN, NOT_RECORDED)
        ],
    )


def _detail(a: Attempt) -> str:
    return a.slice.detail if a.slice is not None else "no slice recorded for this answer"


class SliceRow(msgspec.Struct, frozen=True, kw_only=True):
    """One planned attempt as ``caseledger slices --json`` lists it."""

    case: str
    attempt: int
    dimension: str | None
    verdict: Literal["correct", "wrong", "not_executed"]
    counted: bool
    component: str | None
    detail: str | None
    slicer_version: str | None


def attempt_rows(attempts: Sequence[Attempt], cases: Mapping[str, CaseSpec]) -> list[SliceRow]:
    """Every planned attempt: its verdict and, where recorded, its slice (for ``--json``).

    ``verdict``: correct, wrong, not_executed (no result: a failure, a cancellation or
    no terminal event). Only wrong attempts are counted; the others show their slice
    when one was recorded, for reference.
    """
    rows = []
    for a in attempts:
        verdict: Literal["correct", "wrong", "not_executed"]
        if a.score is None:
            verdict = "not_executed"
        elif a.score.result_correct is True:
            verdict = "correct"
        elif a.score.result_correct is False:
            verdict = "wrong"
        else:
            verdict = "not_executed"
        case = cases.get(a.case_id)
        rows.append(
            SliceRow(
                case=a.case_id,
                attempt=a.attempt,
                dimension=case.dimension if case is not None else None,
                verdict=verdict,
                counted=verdict == "wrong",
                component=a.slice.component if a.slice is not None else None,
                detail=a.slice.detail if a.slice is not None else None,
                slicer_version=a.slice.slicer_version if a.slice is not None else None,
            )
        )
    return rows
