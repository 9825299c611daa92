"""The answer contract of one run: is what each summary says true of its own result?

A ClaimsChecked event (appended by ``caseledger claims``, ``ledger/app/claims.py``)
lists, for one attempt whose SQL executed, the claims read from its summary and
their verdicts against the executed result and against gold
(``ledger.harness.claims``). This fold counts them per run. It is a diagnostic:
nothing in ``aggregates``, ``quality``, ``efficiency``, ``fairness``, ``metrics``
or the ranking reads it. The rates are defined here and only here:

* ``faithfulness_rate`` = supported / checkable, where checkable = supported +
  contradicted (an ``unverifiable`` claim is in no denominator but this one's
  neighbour, ``claims``);
* ``contradicted_rate`` = contradicted / claims (every claim read, unverifiable
  ones included), so a summary full of claims nothing can decide does not look
  clean;
* ``correct_contradicted_share`` = result-correct attempts whose summary has at
  least one contradicted claim / result-correct attempts with a ClaimsChecked.

A run with no checkable claim has no rates (None), never an empty 100%.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ledger.errors import InternalError
from ledger.events import ClaimsChecked, OutputParsed
from ledger.harness.claims import CONTRADICTED, KINDS, SUPPORTED, UNVERIFIABLE, VERDICTS
from projections.caseruns import Attempt
from projections.numbers import rate
from projections.report import schema as S

__all__ = [
    "CONSUMES",
    "ClaimRow",
    "attempt_claims",
    "attempt_rows",
    "claims_of",
    "has_claims",
    "summarize",
]

CONSUMES = (ClaimsChecked,)


def claims_of(a: Attempt) -> ClaimsChecked | None:
    """The last ClaimsChecked whose evidence names this attempt's OutputParsed (every
    scorer version of the same answer sees the same claims)."""
    if a.parsed is None:
        return None
    links = [s.link for s in a.steps if isinstance(s.event, OutputParsed) and s.event is a.parsed]
    if not links:
        return None
    found: ClaimsChecked | None = None
    for step in a.steps:
        if isinstance(step.event, ClaimsChecked) and links[-1] in step.event.evidence:
            found = step.event
    return found


def has_claims(attempts: Sequence[Attempt]) -> bool:
    """Whether any attempt of the run has a ClaimsChecked (else reports leave it out)."""
    return any(claims_of(a) is not None for a in attempts)


def _verdicts(values: Sequence[str]) -> S.ClaimCounts:
    counts = dict.fromkeys(VERDICTS, 0)
    for v in values:
        if v not in counts:
            raise InternalError(ValueError(f"claim verdict {v!r}"), where="claims")
        counts[v] += 1
    return S.ClaimCounts(
        supported=counts[SUPPORTED],
        contradicted=counts[CONTRADICTED],
        unverifiable=counts[UNVERIFIABLE],
    )


def summarize(attempts: Sequence[Attempt]) -> S.ClaimBlock:
    """Claim counts and the three rates of one run (docs/claims.md).

    >>> s = summarize([])
    >>> s.claims, s.faithfulness_rate, s.correct_contradicted_share
    (0, None, None)
    """
    checked = [(a, c) for a in attempts if (c := claims_of(a)) is not None]
    verdicts = [x.verdict for _, c in checked for x in c.claims]
    counts = _verdicts(verdicts)
    gold = _verdicts([x.gold_verdict for _, c in checked for x in c.claims if x.gold_verdict])
    checkable = counts.supported + counts.contradicted
    correct = [c for a, c in checked if a.score is not None and a.score.result_correct is True]
    correct_bad = sum(1 for c in correct if any(x.verdict == CONTRADICTED for x in c.claims))
    kinds = {
        k: _verdicts([x.verdict for _, c in checked for x in c.claims if x.kind == k])
        for k in KINDS
    }
    return S.ClaimBlock(
        diagnostic_only=True,
        claims_versions=sorted({c.claims_version for _, c in checked}),
        attempts_checked=len(checked),
        attempts_with_claims=sum(1 for _, c in checked if c.claims),
        claims=len(verdicts),
        counts=counts,
        checkable=checkable,
        faithfulness_rate=rate(counts.supported, checkable),
        contradicted_rate=rate(counts.contradicted, len(verdicts)),
        correct_checked=len(correct),
        correct_contradicted=correct_bad,
        correct_contradicted_share=rate(correct_bad, len(correct)),
        kinds={k: v for k, v in kinds.items() if v.supported or v.contradicted or v.unverifiable},
        gold_counts=gold,
    )


def attempt_claims(a: Attempt) -> list[S.CaseRunClaim] | None:
    """The claims of one attempt for its drill-down (None when it has no ClaimsChecked)."""
    found = claims_of(a)
    if found is None:
        return None
    return [
        S.CaseRunClaim(
            kind=x.kind,
            reading=x.reading,
            text=x.text,
            verdict=x.verdict,
            detail=x.detail,
            gold_verdict=x.gold_verdict,
        )
        for x in found.claims
    ]


class ClaimRow(msgspec.Struct, frozen=True, kw_only=True):
    """One planned attempt as ``caseledger claims --json`` lists it."""

    case: str
    attempt: int
    result_correct: bool | None
    summary: str | None
    #: None, like ``claims``, when no ClaimsChecked was recorded.
    counts: S.ClaimCounts | None
    claims: list[S.CaseRunClaim] | None


def attempt_rows(attempts: Sequence[Attempt]) -> list[ClaimRow]:
    """Every planned attempt with its claims (for ``--json``): ``claims`` is None when
    no ClaimsChecked was recorded (not executed, no summary)."""
    rows = []
    for a in attempts:
        correct = None if a.score is None else a.score.result_correct
        claims = attempt_claims(a)
        counts = _verdicts([c.verdict for c in claims]) if claims is not None else None
        rows.append(
            ClaimRow(
                case=a.case_id,
                attempt=a.attempt,
                result_correct=correct,
                summary=a.parsed.summary if a.parsed is not None else None,
                counts=counts,
                claims=claims,
            )
        )
    return rows
