"""Per-case attempt statistics and weighted model, dimension and difficulty scores.

Per case (DESIGN.md "Aggregation and report contracts"): the mean of the
attempt totals over every planned attempt, the nonzero-score rate and the
population standard deviation (divide by N) over the rounded attempt totals.
A cancelled, failed or never-recorded attempt counts as 0 and stays in the
denominator. The model score is ``sum(w_i * mean_i) / sum(w_i)`` over the
cases, exact; dimension (radar) and difficulty scores use the same weights
over their subset of cases. Values are shown rounded half-up once: scores to
2 places, rates to 4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction

import msgspec

from ledger.events import (
    DIFFICULTIES,
    DIMENSIONS,
    UNASSIGNED,
    CaseSpec,
    RunStarted,
    ScoreComputed,
)
from projections.caseruns import Attempt
from projections.numbers import RATE_PLACES, SCORE_PLACES, pop_stddev, show
from projections.report import schema as S

__all__ = [
    "CONSUMES",
    "DIFFICULTIES",
    "DIMENSIONS",
    "CaseStats",
    "RunScores",
    "attempt_total",
    "case_stats",
    "summarize",
    "weighted_score",
]

CONSUMES = (RunStarted, ScoreComputed)


class CaseStats(msgspec.Struct, frozen=True):
    """Exact statistics of one case's attempts."""

    mean: Fraction
    nonzero_rate: Fraction
    stddev: Decimal


class RunScores(msgspec.Struct, frozen=True, kw_only=True):
    """A run's weighted scores and its per-case table (the report's ``scores`` and
    ``cases``)."""

    scores: S.Scores
    cases: list[S.CaseScores]


def attempt_total(attempt: Attempt) -> Decimal:
    """The attempt's recorded total (already rounded by the scorer); 0 unless scored."""
    if attempt.outcome == "scored" and attempt.score is not None:
        return attempt.score.total
    return Decimal(0)


def case_stats(totals: Sequence[Decimal]) -> CaseStats:
    """Mean, nonzero-score rate and population stddev of one case's attempt totals.

    >>> s = case_stats([Decimal(100), Decimal(50), Decimal(0)])
    >>> show(s.mean, 2), show(s.nonzero_rate, 4), show(s.stddev, 2)
    ('50.00', '0.6667', '40.82')
    """
    n = len(totals)
    if n == 0:
        return CaseStats(Fraction(0), Fraction(0), Decimal(0))
    mean = sum((Fraction(t) for t in totals), Fraction(0)) / n
    nonzero = Fraction(sum(1 for t in totals if t != 0), n)
    return CaseStats(mean, nonzero, pop_stddev(list(totals)))


def weighted_score(pairs: Iterable[tuple[Decimal, Fraction]]) -> Fraction | None:
    """``sum(w * mean) / sum(w)`` exactly; None when there is no case.

    >>> weighted_score([(Decimal(1), Fraction(100)), (Decimal(3), Fraction(0))])
    Fraction(25, 1)
    """
    num, den = Fraction(0), Fraction(0)
    for weight, mean in pairs:
        w = Fraction(weight)
        num += w * mean
        den += w
    return None if den == 0 else num / den


def _shown(value: Fraction | None) -> str | None:
    return None if value is None else show(value, SCORE_PLACES)


def summarize(cases: Sequence[CaseSpec], attempts: Sequence[Attempt]) -> RunScores:
    """The per-case table and the weighted scores of one run's planned attempts.

    ``cases`` are the run's cases in bank order; ``attempts`` every planned attempt.
    """
    by_case: dict[str, list[Attempt]] = {c.id: [] for c in cases}
    for attempt in attempts:
        by_case.setdefault(attempt.case_id, []).append(attempt)
    rows: list[S.CaseScores] = []
    means: dict[str, Fraction] = {}
    for case in cases:
        mine = sorted(by_case[case.id], key=lambda a: a.attempt)
        totals = [attempt_total(a) for a in mine]
        stats = case_stats(totals)
        means[case.id] = stats.mean
        rows.append(
            S.CaseScores(
                case=case.id,
                dimension=case.dimension,
                difficulty=case.difficulty,
                weight=str(case.weight),
                totals=[show(t, SCORE_PLACES) for t in totals],
                outcomes=[a.outcome for a in mine],
                result_correct=[_correct(a) for a in mine],
                mean=show(stats.mean, SCORE_PLACES),
                nonzero_rate=show(stats.nonzero_rate, RATE_PLACES),
                stddev=show(stats.stddev, SCORE_PLACES),
            )
        )

    def over(subset: Iterable[CaseSpec]) -> str | None:
        return _shown(weighted_score((c.weight, means[c.id]) for c in subset))

    # ``unassigned`` (an imported question has no dimension or difficulty) is a group
    # only when a case has it: reports of other banks keep their bytes.
    dims: tuple[str, ...] = DIMENSIONS
    if any(c.dimension == UNASSIGNED for c in cases):
        dims = (*DIMENSIONS, UNASSIGNED)
    levels: tuple[str, ...] = DIFFICULTIES
    if any(c.difficulty == UNASSIGNED for c in cases):
        levels = (*DIFFICULTIES, UNASSIGNED)
    return RunScores(
        scores=S.Scores(
            auxiliary=True,
            model_score=over(cases),
            dimensions={d: over(c for c in cases if c.dimension == d) for d in dims},
            difficulties={d: over(c for c in cases if c.difficulty == d) for d in levels},
        ),
        cases=rows,
    )


def _correct(attempt: Attempt) -> bool | None:
    return attempt.score.result_correct if attempt.score is not None else None
