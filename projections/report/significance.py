"""A section's statistics (``caseledger-report/3``): error bars, pairs, rank groups, headline.

Read from the section's run entries only (each case's ``result_correct`` list and
attempt totals), with the one set of definitions in ``projections/statistics.py``
(docs/statistics.md); ``caseledger compare`` and the gate's ``--significance``
use :func:`compare_entries` on the same entries.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

from projections import statistics as st
from projections.numbers import RATE_PLACES, show
from projections.report import schema as S

__all__ = [
    "CONFIDENCE",
    "Comparison",
    "case_rates",
    "case_scores",
    "compare_entries",
    "comparison_lines",
    "headline",
    "points",
    "run_comparison",
    "run_statistics",
    "section_statistics",
]

#: The level of every interval, as the report writes it.
CONFIDENCE = "0.95"


def case_rates(entry: S.RunEntry) -> dict[str, Fraction]:
    """y_i of every case of a run: result-correct attempts / planned attempts (a
    cancelled or unscored attempt is not correct)."""
    return {
        c.case: Fraction(sum(1 for r in c.result_correct if r is True), len(c.result_correct))
        if c.result_correct
        else Fraction(0)
        for c in entry.cases
    }


def case_scores(entry: S.RunEntry) -> dict[str, tuple[Fraction, Fraction]]:
    """(weight, mean of the attempt totals) of every case of a run, exact."""
    out = {}
    for c in entry.cases:
        total = sum((Fraction(Decimal(t)) for t in c.totals), Fraction(0))
        out[c.case] = (Fraction(Decimal(c.weight)), total / len(c.totals) if c.totals else total)
    return out


def _estimate(e: st.Estimate | None, places_rate: bool) -> S.Estimate:
    fmt = st.show_rate if places_rate else st.show_score
    if e is None:
        return S.Estimate(value=None, se=None, interval=None)
    low, high = fmt(e.low), fmt(e.high)
    return S.Estimate(
        value=fmt(e.mean),
        se=fmt(e.se),
        interval=None if low is None or high is None else S.Interval(low=low, high=high),
    )


def run_statistics(entry: S.RunEntry, rank_group: str | None) -> S.RunStatistics:
    """A run's rate and score over its cases, each with SE and clipped 95% interval."""
    rates = list(case_rates(entry).values())
    scores = list(case_scores(entry).values())
    return S.RunStatistics(
        run=entry.run,
        cases=len(entry.cases),
        result_correct_rate=_estimate(st.estimate(rates, 0, 1), True),
        model_score=_estimate(st.weighted_estimate(scores, 0, 100), False),
        rank_group=rank_group,
    )


class Comparison(NamedTuple):
    """A paired comparison as the report writes it, and the cases where the runs differ."""

    row: S.PairedComparison
    #: (case, y of A, y of B) for every paired case with A's rate != B's, in A's case order.
    differing: list[tuple[str, Fraction, Fraction]]


def compare_entries(
    a: S.RunEntry,
    b: S.RunEntry,
    rates: tuple[dict[str, Fraction], dict[str, Fraction]] | None = None,
) -> Comparison:
    """Runs ``a`` and ``b`` paired by case over the cases both planned (in ``a``'s order);
    ``rates``: their :func:`case_rates` when already made."""
    ya, yb = rates or (case_rates(a), case_rates(b))
    common = [case for case in ya if case in yb]
    r = st.paired([ya[c] for c in common], [yb[c] for c in common])
    low, high = st.show_rate(r.low), st.show_rate(r.high)
    row = S.PairedComparison(
        a=a.run,
        b=b.run,
        cases=r.n,
        difference=st.show_rate(r.difference) if r.n else None,
        se=st.show_rate(r.se),
        interval=None if low is None or high is None else S.Interval(low=low, high=high),
        p_value=st.shown_p(r.p),
        test=r.test,
        significant=r.significant,
        a_better=r.a_better,
        b_better=r.b_better,
        mdd=st.show_rate(r.mdd),
    )
    return Comparison(row, [(c, ya[c], yb[c]) for c in common if ya[c] != yb[c]])


def points(rate: str) -> str:
    """A rate or difference as shown, in points (x 100, exact from the shown string).

    >>> points("0.0741"), points("-0.0120")
    ('7.41', '-1.20')
    """
    return f"{Decimal(rate) * 100:.2f}"


def headline(order: Sequence[str], pairs: dict[tuple[str, str], S.PairedComparison]) -> str:
    """The headline of a models section with its runs best first, from the pairwise rows:
    each run against the next, then what the bank can tell apart (the top pair's MDD).

    >>> row = S.PairedComparison(a="x", b="y", cases=18, difference="0.0741", se="0.0316",
    ...     interval=S.Interval(low="0.0122", high="0.1360"), p_value="0.0200",
    ...     test="exact_sign_flip", significant=True, a_better=3, b_better=0, mdd="0.0885")
    >>> headline(["x", "y"], {("x", "y"): row})
    'x leads y by 7.41 points (95% CI 1.22 to 13.60, p = 0.0200). On this bank (18 cases) \
differences under 8.85 points cannot be told apart (80% power, alpha 0.05).'
    """
    if len(order) < 2:
        return f"{order[0]} is the only model run on this bank: nothing to compare."
    said = []
    for a, b in itertools.pairwise(order):
        p = pairs[(a, b)]
        if p.significant and p.difference is not None and p.interval is not None:
            ci = f"95% CI {points(p.interval.low)} to {points(p.interval.high)}"
            said.append(f"{a} leads {b} by {points(p.difference)} points ({ci}, p = {p.p_value})")
        else:
            said.append(f"{a} and {b} cannot be told apart (p = {p.p_value})")
    text = "; ".join(said) + "."
    top = pairs[(order[0], order[1])]
    if top.mdd is not None and Decimal(top.mdd) > 0:
        text += (
            f" On this bank ({top.cases} cases) differences under {points(top.mdd)} points "
            "cannot be told apart (80% power, alpha 0.05)."
        )
    return text


def section_statistics(section: S.Section) -> S.SectionStatistics | None:
    """The statistics of a section (None for a calibration section): every run's error
    bars; in a models section (runs best first) every pair of runs, the better-ranked as
    ``a``, the rank groups and the headline."""
    entries = [e for e in section.runs if isinstance(e, S.RunEntry)]
    if section.kind == "calibration":
        return None
    pairs: dict[tuple[str, str], S.PairedComparison] = {}
    groups: dict[str, str] = {}
    text = None
    if section.ranked and entries:
        rates = {e.run: case_rates(e) for e in entries}
        for i, a in enumerate(entries):
            for b in entries[i + 1 :]:
                pairs[(a.run, b.run)] = compare_entries(a, b, (rates[a.run], rates[b.run])).row
        order = [e.run for e in entries]
        groups = st.rank_groups(order, lambda x, y: pairs[(x, y)].significant)
        text = headline(order, pairs)
    return S.SectionStatistics(
        alpha=str(st.ALPHA),
        confidence=CONFIDENCE,
        runs=[run_statistics(e, groups.get(e.run)) for e in entries],
        pairs=list(pairs.values()),
        headline=text,
    )


def run_comparison(
    a: S.RunEntry, b: S.RunEntry, bank: S.ScorecardBank, tree_size: int
) -> S.RunComparison:
    """``caseledger compare``: runs ``a`` and ``b`` of one bank, paired by case, with their
    error bars and every case where their case rates differ (in ``a``'s case order)."""
    found = compare_entries(a, b)
    return S.RunComparison(
        tree_size=tree_size,
        bank=bank,
        alpha=str(st.ALPHA),
        a=run_statistics(a, None),
        b=run_statistics(b, None),
        comparison=found.row,
        differing=[
            S.DifferingCase(case=case, a=show(ya, RATE_PLACES), b=show(yb, RATE_PLACES))
            for case, ya, yb in found.differing
        ],
    )


def comparison_lines(found: S.RunComparison) -> list[str]:
    """The text ``caseledger compare`` prints: the numbers of :func:`run_comparison`."""
    c, a, b = found.comparison, found.a, found.b

    def rate(r: S.RunStatistics) -> str:
        e = r.result_correct_rate
        ci = "" if e.interval is None else f" (95% CI {e.interval.low} to {e.interval.high})"
        return f"{e.value or '-'}{ci}"

    bank = found.bank
    lines = [
        f"A = {c.a}, B = {c.b}: bank {bank.id} {bank.version} ({bank.hash[:19]}), "
        f"{c.cases} paired cases, tree size {found.tree_size}",
        f"result-correct rate: A {rate(a)}, B {rate(b)}",
    ]
    if c.difference is None:
        return [*lines, "no case in common: nothing to compare"]
    diff = f"difference A - B: {c.difference} ({points(c.difference)} points)"
    if c.se is not None and c.interval is not None:
        diff += f", SE {c.se}, 95% CI {c.interval.low} to {c.interval.high}"
    tests = {
        "exact_sign_flip": f"exact sign-flip test over {c.a_better + c.b_better} differing cases",
        "normal": f"normal approximation, {c.a_better + c.b_better} differing cases",
        "none": "no case differs",
    }
    verdict = "significant" if c.significant else "not significant"
    wins = f"A better on {c.a_better} cases, B better on {c.b_better}"
    if c.mdd is not None:
        wins += f"; minimum detectable difference {c.mdd} ({points(c.mdd)} points)"
    lines += [diff, f"p = {c.p_value} ({tests[c.test]}): {verdict} at alpha {found.alpha}", wins]
    if found.differing:
        lines.append("cases that differ (case rate of A, of B):")
        width = max(len(d.case) for d in found.differing)
        lines += [f"  {d.case.ljust(width)}  {d.a}  {d.b}" for d in found.differing]
    return lines
