"""Exact arithmetic and the report's rounding rules (half-up; scores 2 places, rates 4).

Everything is computed exactly (Fraction, or Decimal at a fixed local precision
for a square root) and rounded once, when shown. Shown values are decimal
strings: a report never holds a float.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "RATE_PLACES",
    "SCORE_PLACES",
    "nearest_rank",
    "pop_stddev",
    "rate",
    "show",
    "sqrt",
]

SCORE_PLACES = 2
RATE_PLACES = 4
_SQRT_PRECISION = 60


def show(value: Fraction | Decimal | int, places: int) -> str:
    """Round half-up (away from zero at .5) to ``places`` decimals, as a string.

    >>> show(Fraction(2, 3), 4), show(Fraction(1, 8), 2), show(Fraction(-1, 8), 2), show(50, 2)
    ('0.6667', '0.13', '-0.13', '50.00')
    """
    exact = Fraction(value)
    scale = 10**places
    scaled = abs(exact) * scale
    whole = int(scaled)
    if scaled - whole >= Fraction(1, 2):
        whole += 1
    sign = "-" if exact < 0 and whole else ""
    text = str(whole).rjust(places + 1, "0")
    return f"{sign}{text[:-places]}.{text[-places:]}" if places else f"{sign}{text}"


def rate(numerator: int, denominator: int) -> str | None:
    """A rate to 4 places, or None when the denominator is 0.

    >>> rate(2, 3), rate(0, 0)
    ('0.6667', None)
    """
    return None if denominator == 0 else show(Fraction(numerator, denominator), RATE_PLACES)


def pop_stddev(values: Sequence[Decimal]) -> Decimal:
    """Population standard deviation (divide by N) of exact decimals, to 60 digits.

    >>> show(pop_stddev([Decimal(100), Decimal(50), Decimal(0)]), 2)
    '40.82'
    """
    if not values:
        return Decimal(0)
    n = len(values)
    mean = sum((Fraction(v) for v in values), Fraction(0)) / n
    variance = sum(((Fraction(v) - mean) ** 2 for v in values), Fraction(0)) / n
    return sqrt(variance)


def sqrt(value: Fraction) -> Decimal:
    """The square root of an exact value >= 0, as a Decimal to 60 significant digits.

    >>> show(sqrt(Fraction(1, 4)), 4), show(sqrt(Fraction(2)), 4)
    ('0.5000', '1.4142')
    """
    # A local context: the result never depends on the caller's decimal settings.
    with decimal.localcontext(decimal.Context(prec=_SQRT_PRECISION)):
        return (Decimal(value.numerator) / Decimal(value.denominator)).sqrt()


def nearest_rank(values: Sequence[int], percentile: int = 95) -> int | None:
    """Nearest-rank percentile: the smallest value with at least p% of values at or below it.

    Sorted x[1..n]: x[ceil(p/100 * n)]. None for no values.

    >>> nearest_rank(list(range(1, 21))), nearest_rank([5]), nearest_rank([3, 1, 2])
    (19, 5, 3)
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = -(-percentile * len(ordered) // 100)  # ceil without floats
    return ordered[max(rank, 1) - 1]
