"""efficiency-v2: tokens, cost and generation time per result-correct attempt, and P95s.

C is the number of result-correct attempts. Token, cost and time totals run
over the attempts that have the figure. Tokens and cost per correct are taken
over the attempts that have the figure: the figure summed over them / the
result-correct attempts among them (a 429 or a cancelled attempt has no tokens
and is never correct, so one of them does not blank the figure); null when no
attempt that has the figure is result-correct. Each figure's coverage (attempts
that have it / planned attempts) is reported beside it, and when some planned
attempt lacks it and some have it, ``covered`` counts the attempts that have it
("12 of 18 attempts"); the gate compares these two only when both sides' coverage is
complete. Generation time per correct stays null unless every planned attempt
has a generation time.

* tokens of an attempt = input + cache_read + cache_write + output (reasoning
  is a subset of output and is never added). An attempt has the figure when
  its usage reports input and output; an unreported cache field counts as 0.
* cost of an attempt = the provider's bill (``cost``) when reported, else the
  ``estimated_cost`` from a price snapshot; the run's cost is labelled
  ``billed``, ``estimate`` or ``mixed`` (a mix is an estimate). A provider
  failure carries no cost.
* generation time = ``generation_us`` of the response or failure; SQL
  execution time = ``sql_us`` of the attempt's last execution, kept apart.
* P95 is the nearest-rank 95th percentile over the attempts that have the
  figure: sorted x[1..n], x[ceil(0.95 n)]; null when no attempt has it.
Shown: tokens per correct to 2 places, cost to 6 places, times in ms to 3 places.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Literal

import msgspec

from ledger.events import ModelResponded, ProviderFailed, SqlExecuted
from projections.caseruns import Attempt
from projections.numbers import nearest_rank, rate, show
from projections.report import schema as S

__all__ = ["CONSUMES", "VERSION", "Figures", "attempt_figures", "summarize"]

CONSUMES = (ModelResponded, ProviderFailed, SqlExecuted)
VERSION = "efficiency-v2"
_TOKEN_PARTS = ("input", "cache_read", "cache_write", "output", "reasoning_output")


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt's figures (each None when the attempt lacks it)."""

    tokens: int | None
    #: The token counts by part (None when ``tokens`` is).
    parts: dict[str, int] | None
    cost: Decimal | None
    cost_kind: Literal["billed", "estimate"] | None
    generation_us: int | None
    sql_us: int | None


def attempt_figures(a: Attempt) -> Figures:
    """The tokens, token parts, cost and its kind, generation and SQL time of one attempt."""
    r: ModelResponded | ProviderFailed | None = a.response or a.failure
    usage = r.usage if r is not None else None
    tokens = None
    parts = dict.fromkeys(_TOKEN_PARTS, 0)
    if usage is not None and usage.input is not None and usage.output is not None:
        for name in _TOKEN_PARTS:
            parts[name] = getattr(usage, name) or 0
        tokens = parts["input"] + parts["cache_read"] + parts["cache_write"] + parts["output"]
    cost: Decimal | None = None
    kind: Literal["billed", "estimate"] | None = None
    if isinstance(r, ModelResponded):
        if r.cost is not None:
            cost, kind = r.cost, "billed"
        elif r.estimated_cost is not None:
            cost, kind = r.estimated_cost, "estimate"
    execution = a.execution
    return Figures(
        tokens=tokens,
        parts=parts if tokens is not None else None,
        cost=cost,
        cost_kind=kind,
        generation_us=r.generation_us if r is not None else None,
        sql_us=execution.sql_us if execution is not None else None,
    )


def _ms(us: int | Fraction | None) -> str | None:
    return None if us is None else show(Fraction(us) / 1000, 3)


def _per(total: Fraction | Decimal | int, correct: int, complete: bool, places: int) -> str | None:
    if correct == 0 or not complete:
        return None
    return show(Fraction(total) / correct, places)


def _correct(attempt: Attempt) -> bool:
    return attempt.score is not None and attempt.score.result_correct is True


def _covered(count: int, total: int) -> int | msgspec.UnsetType:
    """``count`` when some but not all planned attempts have the figure, else UNSET (left
    out, so reports whose coverage is complete, or zero, keep their bytes)."""
    return count if 0 < count < total else msgspec.UNSET


def summarize(attempts: Sequence[Attempt]) -> S.Efficiency:
    """The efficiency-v2 block of one run."""
    total = len(attempts)
    figures = [attempt_figures(a) for a in attempts]
    correct = sum(1 for a in attempts if _correct(a))
    tok = [f for f in figures if f.tokens is not None]
    costs = [f for f in figures if f.cost is not None]
    tok_correct = sum(
        1 for a, f in zip(attempts, figures, strict=True) if f.tokens is not None and _correct(a)
    )
    cost_correct = sum(
        1 for a, f in zip(attempts, figures, strict=True) if f.cost is not None and _correct(a)
    )
    gen = [f.generation_us for f in figures if f.generation_us is not None]
    sql = [f.sql_us for f in figures if f.sql_us is not None]
    kinds = sorted({f.cost_kind for f in costs if f.cost_kind is not None})
    token_total = sum(f.tokens for f in tok if f.tokens is not None)
    cost_total = sum((f.cost for f in costs if f.cost is not None), Decimal(0))
    parts = None
    if tok:
        parts = S.TokenParts(
            **{p: sum(f.parts[p] for f in tok if f.parts is not None) for p in _TOKEN_PARTS}
        )
    return S.Efficiency(
        version=VERSION,
        correct=correct,
        tokens=S.Tokens(
            total=token_total if tok else None,
            parts=parts,
            per_correct=_per(token_total, tok_correct, True, 2),
            coverage=rate(len(tok), total),
            covered=_covered(len(tok), total),
        ),
        cost=S.Cost(
            total=show(cost_total, 6) if costs else None,
            kind=None if not kinds else kinds[0] if len(kinds) == 1 else "mixed",
            per_correct=_per(cost_total, cost_correct, True, 6),
            coverage=rate(len(costs), total),
            covered=_covered(len(costs), total),
        ),
        generation_ms=S.GenerationTime(
            total=_ms(sum(gen)) if gen else None,
            per_correct=_per(Fraction(sum(gen), 1000), correct, len(gen) == total, 3),
            p95=_ms(nearest_rank(gen)),
            coverage=rate(len(gen), total),
        ),
        sql_exec_ms=S.SqlExecTime(
            p95=_ms(nearest_rank(sql)),
            coverage=rate(len(sql), total),
        ),
    )
