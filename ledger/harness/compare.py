"""Compare a model's typed result with the frozen gold result: columns, rows, order.

Pure: both sides arrive as ``events.Column`` pairs plus rows of cells encoded
by ``ledger.engines.cells`` (never raw DuckDB values), so a rescore from
recorded events sees exactly what the live comparison saw.

Steps (DESIGN.md "Comparison" and "Fine print"):

1. Non-finite scan. A ``NaN`` / ``Infinity`` / ``-Infinity`` cell in a
   numeric column (or inside a list of floats) of the *actual* result marks
   it ``non_finite``: no row can match and order fails, on every path. Gold
   may never contain one (publishing refuses it); here it is a ``MalformedResult``.
2. Column alignment (:mod:`ledger.harness.align`): names -> exact
   fingerprint -> type- and tolerance-constrained bipartite graph.
3. Rows as multisets. With no tolerance column the rows become tuples of
   normalised cells and two ``Counter`` objects are intersected. Otherwise
   rows are partitioned by their exactly-compared cells, and inside a
   partition a row-equality bipartite graph (candidates found by bisecting
   the sorted first tolerance column) goes to Hopcroft-Karp.
4. Precision, recall, F1 and order.

The case's row contract (``rows``, issue 16): ``multiset`` (the default) is
the rule above, duplicates count. ``set`` is the rule of public benchmarks
(BIRD, Spider: ``set(pred) == set(gold)``): before alignment each side keeps
one row per distinct row of normalised cells (so column alignment sees
distinct rows too); when columns compare within a tolerance, rows of one
side that are equal within it (connected by "within tolerance" on the
tolerance cells, equal on the others) count as one, and a gold group matches
an actual group when some row of each are equal within it. ``matched``,
``expected_rows`` and ``actual_rows`` then count distinct rows, so precision,
recall and F1 keep their formulas. Order cannot be significant under ``set``.

Ratios in :class:`Comparison` are Decimals rounded half-up to 10 places (what
the event shows); the scorer recomputes them exactly from ``matched``,
``expected_rows`` and ``actual_rows`` with :class:`fractions.Fraction`.
"""

from __future__ import annotations

import bisect
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal, localcontext
from fractions import Fraction
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any, TypeGuard

from ledger.events import Column
from ledger.harness.align import (
    EXACT,
    ColumnInfo,
    align,
    column_info,
    is_tolerance_pair,
    normalise_pair,
    within,
)
from ledger.harness.matching import max_matching

__all__ = [
    "RATIO_PLACES",
    "ROW_CONTRACTS",
    "Comparison",
    "MalformedResult",
    "compare",
    "f1_fraction",
    "fraction_to_decimal",
    "rounded",
    "tidy",
]

RATIO_PLACES = Decimal("1e-10")
#: A case's row contract (cases.yaml ``rows``): duplicates count, or they do not.
ROW_CONTRACTS = ("multiset", "set")
# Window bounds round up (a wider window only costs an extra exact check); no Inexact trap.
_CEILING = Context(prec=40, rounding=ROUND_CEILING)


class MalformedResult(ValueError):
    """The input cannot be compared (a row of the wrong width, a non-finite gold cell, a
    negative tolerance): evidence that does not fit, never a model's wrong answer."""


@dataclass(frozen=True)
class Comparison:
    """The verdict of one comparison (the comparison fields of ScoreComputed)."""

    alignment: str  # names | fingerprint | bipartite | ambiguous | none | count_mismatch
    column_mapping: tuple[int, ...] | None  # actual column index per gold column
    column_count_ok: bool
    column_names_ok: bool
    matched: int
    expected_rows: int
    actual_rows: int
    precision: Decimal
    recall: Decimal
    f1: Decimal
    order_ok: bool
    non_finite: bool

    @property
    def f1_exact(self) -> Fraction:
        """F1 as an exact fraction (what the score uses)."""
        return f1_fraction(self.matched, self.expected_rows, self.actual_rows, self.mapped)

    @property
    def mapped(self) -> bool:
        """True when the columns were aligned (rows could be compared at all)."""
        return self.column_mapping is not None and not self.non_finite


def f1_fraction(matched: int, expected: int, actual: int, mapped: bool = True) -> Fraction:
    """Exact F1 = 2PR/(P+R) = 2m/(e+a); both sides empty -> 1, one side empty -> 0.

    >>> f1_fraction(2, 3, 3), f1_fraction(0, 0, 0), f1_fraction(0, 0, 2)
    (Fraction(2, 3), Fraction(1, 1), Fraction(0, 1))
    >>> f1_fraction(0, 0, 0, mapped=False)
    Fraction(0, 1)
    """
    if not mapped:
        return Fraction(0)
    if expected == 0 and actual == 0:
        return Fraction(1)
    return Fraction(2 * matched, expected + actual)


def _ratio(num: int, den: int, both_empty: bool, mapped: bool) -> Decimal:
    """num/den rounded half-up to 10 places; 1 when both sides are empty; 0 when unmapped."""
    if not mapped:
        value = Fraction(0)
    elif both_empty:
        value = Fraction(1)
    else:
        value = Fraction(num, den) if den else Fraction(0)
    return _to_decimal(value)


def _to_decimal(value: Fraction) -> Decimal:
    return rounded(value, RATIO_PLACES)


def rounded(value: Fraction, places: Decimal) -> Decimal:
    """``tidy(fraction_to_decimal(value, places))``, worked out on integers (the score's
    items and ratios: a dozen per scored attempt, issue 34).

    >>> rounded(Fraction(1, 2), Decimal("1E-10")), rounded(Fraction(2, 3), Decimal("0.01"))
    (Decimal('0.5'), Decimal('0.67'))
    """
    exponent = int(places.as_tuple().exponent)
    sign, units = _half_up(value, exponent)
    if units == 0 or len(str(units)) > _TIDY_DIGITS:
        return tidy(Decimal((sign, tuple(map(int, str(units))), exponent)))
    while units % 10 == 0:
        units //= 10
        exponent += 1
    if exponent > 0:
        units, exponent = units * 10**exponent, 0
    return Decimal((sign, tuple(map(int, str(units))), exponent))


def fraction_to_decimal(value: Fraction, places: Decimal) -> Decimal:
    """An exact fraction rounded half-up (away from zero) to the exponent of ``places``.

    Integer arithmetic only, so there is no intermediate rounding.

    >>> fraction_to_decimal(Fraction(90, 7), Decimal("0.01"))
    Decimal('12.86')
    >>> fraction_to_decimal(Fraction(1, 200), Decimal("0.01"))
    Decimal('0.01')
    """
    exponent = int(places.as_tuple().exponent)
    sign, units = _half_up(value, exponent)
    return Decimal((sign, tuple(map(int, str(units))), exponent))


def _half_up(value: Fraction, exponent: int) -> tuple[int, int]:
    """(sign, units) of ``value`` in units of ``10**exponent``, rounded half away from zero;
    sign 1 for a negative value, also when it rounds to zero. On integers: Fraction
    arithmetic normalises (a gcd) at every step."""
    num, den = value.numerator, value.denominator
    if exponent <= 0:
        num *= 10**-exponent
    else:
        den *= 10**exponent
    return (1 if num < 0 else 0), (2 * abs(num) + den) // (2 * den)  # floor(|num/den| + 1/2)


#: The precision :func:`tidy` normalises under.
_TIDY_DIGITS = 80


def tidy(value: Decimal) -> Decimal:
    """Drop trailing zeros without switching to exponent notation ('5', '0.5', '12.86').

    >>> tidy(Decimal("5.0000000000")), tidy(Decimal("0E-10")), tidy(Decimal("10.50"))
    (Decimal('5'), Decimal('0'), Decimal('10.5'))
    """
    with localcontext(prec=_TIDY_DIGITS):
        norm = value.normalize()
        if norm.as_tuple().exponent > 0:  # type: ignore[operator]
            norm = norm.quantize(Decimal(1))
    return norm


def compare(
    gold_columns: Sequence[Column],
    gold_rows: Sequence[Sequence[Any]],
    actual_columns: Sequence[Column],
    actual_rows: Sequence[Sequence[Any]],
    *,
    abs_tolerance: Decimal,
    rel_tolerance: Decimal,
    order_significant: bool,
    rows: str = "multiset",
) -> Comparison:
    """Compare an actual result with gold under a case's tolerances, order and row contract.

    ``rows``: ``multiset`` (duplicate rows count) or ``set`` (they do not; row counts,
    ``matched`` and the ratios are over distinct rows; see the module doc).

    Raises:
        MalformedResult: malformed input (a row of the wrong width, a non-finite gold
            cell, a negative tolerance), an unknown row contract, or ``set`` with
            significant order. The scorer turns it into a ScoringError.

    Example:
        >>> g = (Column(name="k", type="VARCHAR"),)
        >>> c = compare(g, [("A",), ("A",), ("B",)], g, [("A",), ("B",), ("B",)],
        ...             abs_tolerance=Decimal(0), rel_tolerance=Decimal(0),
        ...             order_significant=False)
        >>> c.matched, c.precision, c.f1, c.order_ok
        (2, Decimal('0.6666666667'), Decimal('0.6666666667'), False)
        >>> s = compare(g, [("A",), ("A",), ("B",)], g, [("A",), ("B",), ("B",)],
        ...             abs_tolerance=Decimal(0), rel_tolerance=Decimal(0),
        ...             order_significant=False, rows="set")
        >>> s.matched, s.expected_rows, s.actual_rows, s.f1, s.order_ok
        (2, 2, 2, Decimal('1'), True)
    """
    if abs_tolerance < 0 or rel_tolerance < 0:
        raise MalformedResult(
            f"tolerances must be >= 0, got abs {abs_tolerance}, rel {rel_tolerance}"
        )
    if rows not in ROW_CONTRACTS:
        raise MalformedResult(f"unknown row contract {rows!r} (known: {', '.join(ROW_CONTRACTS)})")
    as_set = rows == "set"
    if as_set and order_significant:
        raise MalformedResult("row order cannot be significant when rows compare as a set")
    gold_rows = _as_tuples(gold_rows, len(gold_columns), "gold")
    actual_rows = _as_tuples(actual_rows, len(actual_columns), "actual")
    if as_set:
        gold_rows = _distinct(gold_columns, gold_rows)
        actual_rows = _distinct(actual_columns, actual_rows)
    n_gold, n_actual = len(gold_rows), len(actual_rows)
    gold_info = [column_info(c, gold_rows, i) for i, c in enumerate(gold_columns)]
    actual_info = [column_info(c, actual_rows, i) for i, c in enumerate(actual_columns)]
    bad = [i.column.name for i in gold_info if i.non_finite]
    if bad:
        raise MalformedResult(f"gold result has a non-finite cell in column(s) {bad}")
    non_finite = any(i.non_finite for i in actual_info)
    count_ok = len(gold_columns) == len(actual_columns)
    names_ok = count_ok and [i.name for i in gold_info] == [i.name for i in actual_info]

    alignment, mapping = align(gold_info, actual_info, abs_tolerance, rel_tolerance)
    matched, order_ok = 0, False
    if mapping is not None and not non_finite:
        matched, order_ok, n_gold, n_actual = _match_rows(
            gold_info,
            [actual_info[j] for j in mapping],
            gold_rows,
            actual_rows,
            mapping,
            abs_tolerance,
            rel_tolerance,
            order_significant,
            as_set,
        )
    mapped = mapping is not None and not non_finite
    both_empty = n_gold == 0 and n_actual == 0
    f1 = f1_fraction(matched, n_gold, n_actual, mapped)
    if not order_significant:
        order_ok = mapped and f1 == 1
    return Comparison(
        alignment=alignment,
        column_mapping=tuple(mapping) if mapping is not None else None,
        column_count_ok=count_ok,
        column_names_ok=names_ok,
        matched=matched,
        expected_rows=n_gold,
        actual_rows=n_actual,
        precision=_ratio(matched, n_actual, both_empty, mapped),
        recall=_ratio(matched, n_gold, both_empty, mapped),
        f1=_to_decimal(f1),
        order_ok=order_ok,
        non_finite=non_finite,
    )


def _as_tuples(rows: Sequence[Sequence[Any]], width: int, side: str) -> Sequence[tuple[Any, ...]]:
    tuples = rows if _all_tuples(rows) else [tuple(r) for r in rows]
    if tuples and set(map(len, tuples)) != {width}:
        widths = sorted(set(map(len, tuples)))
        raise MalformedResult(
            f"{side} rows must have {width} cells (one per column), found {widths}"
        )
    return tuples


def _distinct(
    columns: Sequence[Column], rows: Sequence[tuple[Any, ...]]
) -> Sequence[tuple[Any, ...]]:
    """The first row of each distinct row of normalised cells, in first-seen order.

    Each column is normalised by its own type class (:mod:`ledger.harness.align`),
    so 12 and "12.00" in a DECIMAL column, or a string in NFC and NFD, are one
    row. When every column is already canonical the rows are their own keys.
    """
    if len(rows) < 2:
        return rows
    infos = [column_info(c, rows, i) for i, c in enumerate(columns)]
    if all(i.canonical_raw for i in infos):
        keys: Sequence[tuple[Any, ...]] = rows
    else:
        keys = list(zip(*(i.normalised for i in infos), strict=True))
    seen: dict[tuple[Any, ...], int] = {}
    for n, key in enumerate(keys):
        seen.setdefault(key, n)
    if len(seen) == len(rows):
        return rows
    return [rows[n] for n in seen.values()]


def _all_tuples(rows: Sequence[Sequence[Any]]) -> TypeGuard[Sequence[tuple[Any, ...]]]:
    """Whether every row is exactly a tuple (an empty sequence is kept as it is)."""
    return not rows or set(map(type, rows)) == {tuple}


def _match_rows(
    gold_info: list[ColumnInfo],
    actual_info: list[ColumnInfo],
    gold_rows: Sequence[tuple[Any, ...]],
    actual_rows: Sequence[tuple[Any, ...]],
    mapping: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
    order_significant: bool,
    as_set: bool = False,
) -> tuple[int, bool, int, int]:
    """Matched row count, position-wise equality (when order is significant) and the
    gold and actual row counts (distinct rows, or groups within tolerance, under ``set``)."""
    tol = [
        i
        for i, (g, a) in enumerate(zip(gold_info, actual_info, strict=True))
        if is_tolerance_pair(g, a, abs_tol, rel_tol)
    ]
    pairs = [
        (g.normalised, a.normalised) if i in tol else normalise_pair(g, a)
        for i, (g, a) in enumerate(zip(gold_info, actual_info, strict=True))
    ]
    identity_order = mapping == list(range(len(mapping)))
    if all(p is None for p in pairs) and identity_order:
        gold_keys: Sequence[tuple[Any, ...]] = gold_rows  # already canonical: no copy at all
        actual_keys: Sequence[tuple[Any, ...]] = actual_rows
    else:
        gcols, acols = [], []
        for (g, a), pair in zip(zip(gold_info, actual_info, strict=True), pairs, strict=True):
            gcols.append(g.values if pair is None else pair[0])
            acols.append(a.values if pair is None else pair[1])
        gold_keys = list(zip(*gcols, strict=True)) if gold_rows else []
        actual_keys = list(zip(*acols, strict=True)) if actual_rows else []

    n_gold, n_actual = len(gold_rows), len(actual_rows)
    if not tol:
        order_ok = order_significant and list(gold_keys) == list(actual_keys)
        gc, ac = Counter(gold_keys), Counter(actual_keys)
        common = gc.keys() & ac.keys()
        if as_set:  # each side is already distinct (compare); counted again to be sure
            return len(common), order_ok, len(gc), len(ac)
        if len(gc) == len(gold_keys) and len(ac) == len(actual_keys):
            return len(common), order_ok, n_gold, n_actual  # no duplicates on either side
        # min(count in gold, count in actual) per common row, summed at C speed
        matched = sum(map(min, map(gc.__getitem__, common), map(ac.__getitem__, common)))
        return matched, order_ok, n_gold, n_actual
    with localcontext(EXACT):
        if as_set:
            matched, n_gold, n_actual = _tolerance_set_matching(
                gold_keys, actual_keys, tol, abs_tol, rel_tol
            )
            return matched, False, n_gold, n_actual
        matched = _tolerance_matching(gold_keys, actual_keys, tol, abs_tol, rel_tol)
        order_ok = order_significant and _same_positions(
            gold_keys, actual_keys, tol, abs_tol, rel_tol
        )
    return matched, order_ok, n_gold, n_actual


def _same_positions(
    gold: Sequence[tuple[Any, ...]],
    actual: Sequence[tuple[Any, ...]],
    tol: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> bool:
    if len(gold) != len(actual):
        return False
    tol_set = set(tol)
    for g, a in zip(gold, actual, strict=True):
        for i, (e, x) in enumerate(zip(g, a, strict=True)):
            if i in tol_set:
                if not _cell_within(e, x, abs_tol, rel_tol):
                    return False
            elif e != x:
                return False
    return True


def _cell_within(e: Any, a: Any, abs_tol: Decimal, rel_tol: Decimal) -> bool:
    if e is None or a is None:
        return e is None and a is None
    return within(e, a, abs_tol, rel_tol)


def _tolerance_matching(
    gold: Sequence[tuple[Any, ...]],
    actual: Sequence[tuple[Any, ...]],
    tol: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> int:
    """Maximum multiset matching when some columns compare within a tolerance.

    Rows are partitioned by their exactly-compared cells plus the NULL pattern
    of the tolerance cells (NULL only equals NULL), so edges only ever join
    rows of the same partition.
    """
    if not gold or not actual:
        return 0
    tol_set = set(tol)
    exact = [i for i in range(len(gold[0])) if i not in tol_set]

    def keys(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        parts = [map(itemgetter(i), rows) for i in exact]
        parts += [map(operator.is_, map(itemgetter(t), rows), repeat(None)) for t in tol]
        return list(zip(*parts, strict=True))

    gkeys, akeys = keys(gold), keys(actual)
    parts: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    if len(set(gkeys)) == 1 and set(akeys) == set(gkeys):
        parts[gkeys[0]] = (list(range(len(gold))), list(range(len(actual))))
    else:
        for n, k in enumerate(gkeys):
            parts.setdefault(k, ([], []))[0].append(n)
        for n, k in enumerate(akeys):
            part = parts.get(k)
            if part is not None:
                part[1].append(n)
    matched = 0
    for part_key, (gi, ai) in parts.items():
        if not gi or not ai:
            continue
        live = [t for t, is_null in zip(tol, part_key[len(exact) :], strict=True) if not is_null]
        if not live:  # every tolerance cell is NULL on both sides: all rows are equal
            matched += min(len(gi), len(ai))
            continue
        matched += _partition_matching(gold, actual, gi, ai, live, abs_tol, rel_tol)
    return matched


def _partitions(
    gold: Sequence[tuple[Any, ...]], actual: Sequence[tuple[Any, ...]], tol: list[int]
) -> tuple[list[int], dict[tuple[Any, ...], tuple[list[int], list[int]]]]:
    """The exactly compared column indexes, and gold / actual row indexes per partition.

    A partition key is a row's exactly compared cells plus the NULL pattern of its
    tolerance cells; every partition of either side is listed.
    """
    tol_set = set(tol)
    width = len(gold[0]) if gold else len(actual[0])
    exact = [i for i in range(width) if i not in tol_set]

    def keys(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        if not rows:
            return []
        parts = [map(itemgetter(i), rows) for i in exact]
        parts += [map(operator.is_, map(itemgetter(t), rows), repeat(None)) for t in tol]
        return list(zip(*parts, strict=True))

    parts: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    for n, k in enumerate(keys(gold)):
        parts.setdefault(k, ([], []))[0].append(n)
    for n, k in enumerate(keys(actual)):
        parts.setdefault(k, ([], []))[1].append(n)
    return exact, parts


def _tolerance_set_matching(
    gold: Sequence[tuple[Any, ...]],
    actual: Sequence[tuple[Any, ...]],
    tol: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> tuple[int, int, int]:
    """Matched groups, gold groups and actual groups under the ``set`` row contract.

    Inside one partition (equal exact cells and NULL pattern), rows of one side
    that are linked by "within tolerance" on the non-NULL tolerance cells form one
    group (the connected components of that relation: a chain of near-equal rows
    is one row). A gold group and an actual group are joined when some row of
    each are within tolerance; the maximum matching of that graph is ``matched``.
    """
    if not gold and not actual:
        return 0, 0, 0
    exact, parts = _partitions(gold, actual, tol)
    matched = n_gold = n_actual = 0
    for part_key, (gi, ai) in parts.items():
        live = [t for t, is_null in zip(tol, part_key[len(exact) :], strict=True) if not is_null]
        g_rows = [gold[n] for n in gi]
        a_rows = [actual[n] for n in ai]
        if not live:  # every tolerance cell is NULL: the rows of one side are all equal
            g_count, a_count = min(len(gi), 1), min(len(ai), 1)
            n_gold, n_actual = n_gold + g_count, n_actual + a_count
            matched += min(g_count, a_count)
            continue
        g_group, g_count = _groups(g_rows, live, abs_tol, rel_tol)
        a_group, a_count = _groups(a_rows, live, abs_tol, rel_tol)
        n_gold, n_actual = n_gold + g_count, n_actual + a_count
        if not g_count or not a_count:
            continue
        edges: list[set[int]] = [set() for _ in range(g_count)]
        for n, nbrs in enumerate(_window_adjacency(g_rows, a_rows, live, abs_tol, rel_tol)):
            edges[g_group[n]].update(a_group[m] for m in nbrs)
        matched += max_matching([sorted(e) for e in edges], a_count)[0]
    return matched, n_gold, n_actual


def _groups(
    rows: list[tuple[Any, ...]], live: list[int], abs_tol: Decimal, rel_tol: Decimal
) -> tuple[list[int], int]:
    """Per row, the number of its group (rows linked by "within tolerance"), and the count."""
    parent = list(range(len(rows)))

    def root(n: int) -> int:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n, nbrs in enumerate(_window_adjacency(rows, rows, live, abs_tol, rel_tol)):
        for m in nbrs:
            a, b = root(n), root(m)
            if a != b:
                parent[max(a, b)] = min(a, b)
    numbers: dict[int, int] = {}
    group = [numbers.setdefault(root(n), len(numbers)) for n in range(len(rows))]
    return group, len(numbers)


def _window_adjacency(
    gold: list[tuple[Any, ...]],
    actual: list[tuple[Any, ...]],
    live: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> list[list[int]]:
    """Per gold row (input order), the actual rows (input indexes) within tolerance of it.

    Every live cell must be within tolerance; candidates come from a window on the
    first live column of the sorted actual rows (``_reach``), each checked exactly.
    """
    order = sorted(range(len(actual)), key=lambda n: actual[n][live[0]])
    in_order = [actual[n] for n in order]
    keys = [a[live[0]] for a in in_order]
    return [
        [order[pos] for pos in _window(row, in_order, keys, live, abs_tol, rel_tol)] for row in gold
    ]


def _window(
    row: tuple[Any, ...],
    in_order: Sequence[tuple[Any, ...]],
    keys: Sequence[Any],
    live: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> list[int]:
    """Positions in ``in_order`` (actual rows sorted by their first live column, whose
    values are ``keys``) of the rows within tolerance of ``row`` on every live column:
    candidates from a window on the first live column (``_reach``), each checked exactly."""
    t0, rest = live[0], live[1:]
    e = row[t0]
    reach = _reach(e, abs_tol, rel_tol)
    if reach is None:
        lo, hi = 0, len(keys)
    else:
        lo = bisect.bisect_left(keys, e - reach)
        hi = bisect.bisect_right(keys, e + reach)
    found = []
    for pos in range(lo, hi):
        a = in_order[pos]
        x = a[t0]
        if (x == e or within(e, x, abs_tol, rel_tol)) and all(
            within(row[t], a[t], abs_tol, rel_tol) for t in rest
        ):
            found.append(pos)
    return found


def _partition_matching(
    gold: Sequence[tuple[Any, ...]],
    actual: Sequence[tuple[Any, ...]],
    gi: list[int],
    ai: list[int],
    live: list[int],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> int:
    """Hopcroft-Karp on one partition; candidates come from a window on the first live column.

    Both sides are sorted by that column. With only an absolute tolerance and
    one live column the window *is* the neighbourhood, built without a Python
    loop; otherwise every candidate in the window is checked exactly.
    """
    t0, rest = live[0], live[1:]
    first = itemgetter(t0)
    adj: list[Sequence[int]]
    if rel_tol == 0 and not rest:
        # Only positions in sorted order matter here, not which row is which.
        keys = sorted(map(first, map(actual.__getitem__, ai)))
        gvals = sorted(map(first, map(gold.__getitem__, gi)))
        lows = map(partial(bisect.bisect_left, keys), map(operator.sub, gvals, repeat(abs_tol)))
        highs = map(partial(bisect.bisect_right, keys), map(operator.add, gvals, repeat(abs_tol)))
        adj = list(map(range, lows, highs))
        return max_matching(adj, len(keys))[0]
    in_order = [actual[n] for n in sorted(ai, key=lambda n: actual[n][t0])]
    keys = [a[t0] for a in in_order]
    adj = [
        _window(gold[g], in_order, keys, live, abs_tol, rel_tol)
        for g in sorted(gi, key=lambda n: gold[n][t0])
    ]
    return max_matching(adj, len(in_order))[0]


def _reach(e: Any, abs_tol: Decimal, rel_tol: Decimal) -> Decimal | None:
    """A bound on |e - a| for any a within tolerance of e (None: no bound when rel >= 1).

    From d <= max(abs, rel * max(|e|, |a|)) and |a| <= |e| + d:
    d <= max(abs, rel * |e| / (1 - rel)). Rounded up, so the window never
    loses a candidate; every candidate is then checked exactly.
    """
    if rel_tol == 0:
        return abs_tol
    if rel_tol >= 1:
        return None
    with localcontext(_CEILING):
        bound = rel_tol * abs(Decimal(e)) / (1 - rel_tol)
    return max(abs_tol, bound)
