"""THE statistics of a report: error bars, paired comparisons, rank groups (docs/statistics.md).

The case is the unit (Evan Miller, "Adding Error Bars to Evals", 2024). For a run
and a bank, case i has ``y_i`` = result-correct attempts / planned attempts (a
cancelled or unscored attempt counts as not correct) and ``x_i`` = the mean of its
attempt totals (the score's case mean, weighted by the case weight ``w_i``).

- rate = mean(y); SE = sd(y, ddof=1) / sqrt(n); 95% interval = rate +- 1.96 SE,
  clipped to [0, 1].
- score = sum(w x) / sum(w); SE = sqrt(n / (n - 1) * sum(w^2 (x - score)^2)) / sum(w)
  (the standard error of a weighted mean; with equal weights it is sd(x) / sqrt(n));
  95% interval = score +- 1.96 SE, clipped to [0, 100].
- Two runs A and B on the same cases: d_i = yA_i - yB_i; difference = mean(d);
  SE_d = sd(d, ddof=1) / sqrt(n); interval = difference +- 1.96 SE_d; two-sided p by
  the exact sign-flip permutation test over the non-zero d_i when there are at most
  20 of them (every one of the 2^k sign assignments; p = the share whose |sum| >= the
  observed |sum|), else 2 (1 - Phi(|difference| / SE_d)).
- The minimum detectable difference at 80% power and alpha 0.05:
  MDD = (1.96 + 0.8416) sd(d) / sqrt(n).

Everything is exact (Fraction; square roots as 60-digit Decimals, ``numbers.sqrt``)
except Phi, computed with ``math.erfc``; each value is rounded once, half-up, to the
places below when shown. A difference is *significant* when its p-value as shown
(4 places) is below alpha (0.05), so the shown numbers and the decision always agree.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Literal, NamedTuple

from projections.numbers import RATE_PLACES, SCORE_PLACES, show, sqrt

__all__ = [
    "ALPHA",
    "EXACT_LIMIT",
    "P_PLACES",
    "Z_95",
    "Z_POWER",
    "Estimate",
    "Paired",
    "estimate",
    "normal_p",
    "paired",
    "rank_groups",
    "show_rate",
    "show_score",
    "shown_p",
    "sign_flip_p",
    "significant",
    "weighted_estimate",
]

#: The significance level of every test and rank group.
ALPHA = Decimal("0.05")
#: z_{0.975}: the 95% interval is the estimate +- Z_95 standard errors.
Z_95 = Decimal("1.96")
#: z_{0.80}: 80% power in the minimum detectable difference.
Z_POWER = Decimal("0.8416")
#: The exact sign-flip test is used up to this many non-zero paired differences.
EXACT_LIMIT = 20
#: Places of a p-value as shown (rates and differences: RATE_PLACES; scores: SCORE_PLACES).
P_PLACES = 4

Test = Literal["exact_sign_flip", "normal", "none"]


class Estimate(NamedTuple):
    """A mean over cases with its standard error and clipped 95% interval (exact values).

    ``se``, ``low`` and ``high`` are None with fewer than 2 cases (no ddof=1 spread).
    """

    n: int
    mean: Fraction
    se: Decimal | None
    low: Decimal | None
    high: Decimal | None


#: Decimal arithmetic on square roots is done in this context, never the caller's.
_CONTEXT = decimal.Context(prec=60)


def _decimal(value: Fraction) -> Decimal:
    with decimal.localcontext(_CONTEXT):
        return Decimal(value.numerator) / Decimal(value.denominator)


def _clip(value: Decimal, low: Decimal, high: Decimal) -> Decimal:
    return max(low, min(high, value))


def _interval(
    n: int, mean: Fraction, variance_of_mean: Fraction | None, low: int, high: int
) -> Estimate:
    if variance_of_mean is None:
        return Estimate(n, mean, None, None, None)
    se = sqrt(variance_of_mean)
    lo, hi = Decimal(low), Decimal(high)
    with decimal.localcontext(_CONTEXT):
        centre = _decimal(mean)
        return Estimate(
            n, mean, se, _clip(centre - Z_95 * se, lo, hi), _clip(centre + Z_95 * se, lo, hi)
        )


def _scaled(values: Sequence[Fraction]) -> tuple[list[int], int]:
    """The values as integers over one common denominator (exact, and far cheaper to sum
    than Fractions: a report pairs every two runs of a section over every case)."""
    scale = math.lcm(*{v.denominator for v in values}) if values else 1
    return [v.numerator * (scale // v.denominator) for v in values], scale


def _mean(values: Sequence[Fraction]) -> Fraction:
    ints, scale = _scaled(values)
    return Fraction(sum(ints), len(ints) * scale)


def _variance(values: Sequence[Fraction]) -> Fraction:
    """Sample variance (ddof=1) of at least two values.

    >>> _variance([Fraction(1), Fraction(0), Fraction(1, 2)])
    Fraction(1, 4)
    """
    return _int_variance(*_scaled(values))


def _int_variance(ints: Sequence[int], scale: int) -> Fraction:
    """Sample variance (ddof=1) of ``x / scale``: (n sum x^2 - (sum x)^2) / (n (n-1) scale^2)."""
    n, total = len(ints), sum(ints)
    return Fraction(n * sum(x * x for x in ints) - total * total, n * (n - 1) * scale * scale)


def estimate(values: Sequence[Fraction], low: int = 0, high: int = 1) -> Estimate | None:
    """Mean, SE = sd(ddof=1) / sqrt(n) and 95% interval clipped to [low, high]; None for none.

    >>> e = estimate([Fraction(1), Fraction(0), Fraction(1), Fraction(1)])
    >>> show(e.mean, 4), show(e.se, 4), show(e.low, 4), show(e.high, 4)
    ('0.7500', '0.2500', '0.2600', '1.0000')
    """
    n = len(values)
    if n == 0:
        return None
    return _interval(n, _mean(values), _variance(values) / n if n > 1 else None, low, high)


def weighted_estimate(
    pairs: Sequence[tuple[Fraction, Fraction]], low: int = 0, high: int = 100
) -> Estimate | None:
    """Weighted mean of (weight, value) pairs, the SE of a weighted mean and its 95% interval.

    SE^2 = n / (n - 1) * sum(w^2 (x - m)^2) / (sum w)^2; with equal weights it is the
    sd(ddof=1)^2 / n of :func:`estimate`. None when there is no case or the weights sum to 0.

    >>> e = weighted_estimate([(Fraction(1), Fraction(100)), (Fraction(3), Fraction(0))])
    >>> show(e.mean, 2), show(e.se, 2), show(e.low, 2), show(e.high, 2)
    ('25.00', '37.50', '0.00', '98.50')
    """
    n = len(pairs)
    total = sum((w for w, _ in pairs), Fraction(0))
    if n == 0 or total == 0:
        return None
    m = sum((w * x for w, x in pairs), Fraction(0)) / total
    if n == 1:
        return _interval(n, m, None, low, high)
    spread = sum((w * w * (x - m) ** 2 for w, x in pairs), Fraction(0))
    return _interval(n, m, Fraction(n, n - 1) * spread / (total * total), low, high)


def sign_flip_p(differences: Sequence[Fraction]) -> Fraction:
    """Exact two-sided p of the sign-flip permutation test over the non-zero differences.

    Every one of the 2^k assignments of signs to the k non-zero |d_i| is counted (by
    the distribution of their sums, exactly); p = the share whose |sum| >= |observed
    sum|. No difference at all gives 1.

    >>> sign_flip_p([Fraction(1)] * 5), sign_flip_p([Fraction(1), Fraction(-1), Fraction(0)])
    (Fraction(1, 16), Fraction(1, 1))
    """
    return _sign_flip_ints(_scaled(differences)[0])


def _sign_flip_ints(differences: Sequence[int]) -> Fraction:
    """:func:`sign_flip_p` of differences scaled to integers (the same p: scaling every
    |d_i| by one positive factor changes no comparison of sums)."""
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return Fraction(1)
    sizes = [abs(d) for d in nonzero]
    observed = abs(sum(nonzero))
    counts: dict[int, int] = {0: 1}
    for size in sizes:
        grown: dict[int, int] = {}
        for total, count in counts.items():
            for signed in (total + size, total - size):
                grown[signed] = grown.get(signed, 0) + count
        counts = grown
    extreme = sum(count for total, count in counts.items() if abs(total) >= observed)
    return Fraction(extreme, 2 ** len(sizes))


def normal_p(z: Decimal) -> Decimal:
    """2 (1 - Phi(|z|)) by ``math.erfc``, exact as the float it gives (rounded when shown).

    >>> show(normal_p(Decimal("1.96")), 4), show(normal_p(Decimal(0)), 4)
    ('0.0500', '1.0000')
    """
    return Decimal(math.erfc(abs(float(z)) / math.sqrt(2)))


def shown_p(p: Fraction | Decimal) -> str:
    """A p-value as shown: half-up to P_PLACES places.

    >>> shown_p(Fraction(1, 16))
    '0.0625'
    """
    return show(p, P_PLACES)


def significant(p: Fraction | Decimal) -> bool:
    """Whether a p-value, as shown, is below ALPHA.

    >>> significant(Fraction(1, 32)), significant(Decimal("0.04996"))
    (True, False)
    """
    return Decimal(shown_p(p)) < ALPHA


class Paired(NamedTuple):
    """The paired comparison of runs A and B over the same n cases (exact values)."""

    n: int
    difference: Fraction
    se: Decimal | None
    low: Decimal | None
    high: Decimal | None
    p: Fraction | Decimal
    test: Test
    nonzero: int
    a_better: int
    b_better: int
    mdd: Decimal | None

    @property
    def significant(self) -> bool:
        """Whether the difference is significant at ALPHA (:func:`significant`)."""
        return significant(self.p)


def paired(a: Sequence[Fraction], b: Sequence[Fraction]) -> Paired:
    """Compare A and B case by case (``a[i]`` and ``b[i]`` are the same case).

    >>> r = paired([Fraction(1)] * 5 + [Fraction(0)], [Fraction(0)] * 6)
    >>> show(r.difference, 4), show(r.se, 4), r.test, shown_p(r.p), r.a_better, r.b_better
    ('0.8333', '0.1667', 'exact_sign_flip', '0.0625', 5, 0)
    """
    if len(a) != len(b):
        raise ValueError(f"paired runs need the same cases: {len(a)} against {len(b)}")
    # Exact integers over one denominator: a report pairs every two runs over every case.
    ints, scale = _scaled([*a, *b])
    d = [x - y for x, y in zip(ints[: len(a)], ints[len(a) :], strict=True)]
    n = len(d)
    nonzero = sum(1 for v in d if v != 0)
    better = (sum(1 for v in d if v > 0), sum(1 for v in d if v < 0))
    if n == 0:
        return Paired(0, Fraction(0), None, None, None, Fraction(1), "none", 0, 0, 0, None)
    mean = Fraction(sum(d), n * scale)
    se = low = high = mdd = None
    centre = _decimal(mean)
    if n > 1:
        se = sqrt(_int_variance(d, scale) / n)
        with decimal.localcontext(_CONTEXT):
            low, high = centre - Z_95 * se, centre + Z_95 * se
            mdd = (Z_95 + Z_POWER) * se
    p: Fraction | Decimal
    test: Test
    if nonzero == 0:
        p, test = Fraction(1), "none"
    elif nonzero <= EXACT_LIMIT:
        p, test = _sign_flip_ints(d), "exact_sign_flip"
    else:
        # More than 20 non-zero d_i: n > 1, so se is set; se == 0 when every d_i is the same.
        with decimal.localcontext(_CONTEXT):
            p = Decimal(0) if not se else normal_p(abs(centre) / se)
        test = "normal"
    return Paired(n, mean, se, low, high, p, test, nonzero, *better, mdd)


def rank_groups(order: Sequence[str], apart: Callable[[str, str], bool]) -> dict[str, str]:
    """Rank groups of runs listed best first: ``"1"``, ``"2="``, ``"2="``, ``"4"``.

    A group starts at the first run not yet in one (its leader) and takes every
    following run that ``apart(leader, run)`` says is not significantly different
    from the leader, stopping at the first that is. A group is labelled with its
    leader's position, with ``=`` when it holds more than one run.

    >>> rank_groups(["a", "b", "c", "d"], lambda x, y: (x, y) in {("a", "b"), ("b", "d")})
    {'a': '1', 'b': '2=', 'c': '2=', 'd': '4'}
    """
    labels: dict[str, str] = {}
    i = 0
    while i < len(order):
        leader = order[i]
        j = i + 1
        while j < len(order) and not apart(leader, order[j]):
            j += 1
        members = order[i:j]
        label = f"{i + 1}=" if len(members) > 1 else str(i + 1)
        labels.update({run: label for run in members})
        i = j
    return labels


def show_rate(value: Fraction | Decimal | None) -> str | None:
    """A rate, difference or their SE or bound as shown (RATE_PLACES), None as None."""
    return None if value is None else show(value, RATE_PLACES)


def show_score(value: Fraction | Decimal | None) -> str | None:
    """A score or its SE or bound as shown (SCORE_PLACES), None as None."""
    return None if value is None else show(value, SCORE_PLACES)
