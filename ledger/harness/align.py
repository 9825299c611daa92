"""Cell normalisation and column alignment for the comparator (DESIGN.md fine print).

Normalised cells, by the type class of ``cells.type_class``:

- numeric: an ``int`` cell stays an ``int``; a decimal string, a float's
  shortest digits or a big integer's string becomes ``Decimal(cell)``.
  Python compares and hashes ``int`` and ``Decimal`` by value, so 12, "12.0"
  and "12.00" are one value, and 12.4 is not 12.
- string: NFC, never trimmed.
- timestamp: the trailing ``Z`` of an aware (UTC) cell is dropped, so a naive
  TIMESTAMP (read as UTC) equals the same instant as TIMESTAMPTZ.
- other classes (date, time, boolean, interval, blob, ``other:<TYPE>``): the
  cell as encoded; lists and maps become tuples so they can be hashed.
- NULL stays ``None`` and only equals ``None``.

Cells of two columns in different type classes never compare equal (a DATE
never equals a string; a BOOLEAN never equals 1): the actual side is wrapped
in a marker tuple. Only NULL still equals NULL there.

Alignment: names (casefolded, NFC, quote characters removed) as a multiset ->
exact fingerprint (type class + multiset of normalised cells) -> a bipartite
graph whose edge (gold i, actual j) needs the same type class and the same
values as a multiset, compared within the tolerance when column i takes one
(the values sorted, paired in order). Exactly one bijection or perfect
matching wins; several -> ``ambiguous``; none -> ``none``.
"""

from __future__ import annotations

import math
import operator
import unicodedata
from collections import Counter
from collections.abc import Sequence
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    localcontext,
)
from functools import cached_property, lru_cache, partial
from itertools import repeat
from operator import itemgetter
from typing import Any

from ledger.engines import cells
from ledger.events import Column
from ledger.harness.matching import unique_perfect_matching

__all__ = [
    "EXACT",
    "ColumnInfo",
    "align",
    "column_info",
    "is_tolerance_pair",
    "normalise_name",
    "normalise_pair",
    "within",
]

# Tolerance arithmetic is exact: a precision wide enough for any double or
# DECIMAL(38) difference, and a trap on Inexact so a rounding can never pass silently.
EXACT = Context(
    prec=5000,
    Emax=MAX_EMAX,
    Emin=MIN_EMIN,
    traps=[InvalidOperation, DivisionByZero, Overflow, Inexact],
)
_QUOTES = str.maketrans("", "", "\"'`")
_MISMATCH = "\x00type-class-mismatch"
_NON_FINITE_MARK = "\x00non-finite"
_FLOAT_NAMES = ("DOUBLE", "FLOAT", "REAL")
_FLOAT_TYPES = frozenset({"DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8"})
# Exact numeric type names without a declared scale (ledger/engines/postgres.py names an
# unconstrained numeric DECIMAL): their cells do not share one scale.
_UNSCALED = frozenset({"DECIMAL", "NUMERIC"})


def normalise_name(name: str) -> str:
    """A column name as compared: NFC, quote characters removed, casefolded.

    >>> normalise_name('"Total Revenue"'), normalise_name("STRASSE") == normalise_name("straße")
    ('total revenue', True)
    """
    return unicodedata.normalize("NFC", name).translate(_QUOTES).casefold()


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, str):
        return value in cells.NON_FINITE
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    return False


@lru_cache(maxsize=4096)
def _kind_of(column: Column) -> tuple[str, str, bool, str, bool]:
    """What a column's name and type say (normalised name, type class, integer, upper-case
    type, float), remembered: a case's gold columns are the same at every attempt, and
    each is read with two regular expressions (issue 34)."""
    upper = column.type.strip().upper()
    return (
        normalise_name(column.name),
        cells.type_class(column.type),
        cells.is_integer_type(column.type),
        upper,
        upper in _FLOAT_TYPES,
    )


class ColumnInfo:
    """One column of a result: its normalised name, type class and cells (raw and normalised).

    Cells are pulled out of the rows lazily, so the exact fast path never
    touches the columns it has no reason to inspect.
    """

    def __init__(self, column: Column, rows: Sequence[tuple[Any, ...]], index: int) -> None:
        self.column = column
        self._rows = rows
        self._index = index
        self.name, self.cls, self.is_int, self.type, self.is_float = _kind_of(column)

    @cached_property
    def values(self) -> tuple[Any, ...]:
        """The encoded cells of this column, in row order."""
        return tuple(map(itemgetter(self._index), self._rows))

    @cached_property
    def non_finite(self) -> bool:
        """True when a cell is NaN or infinite (only float columns, or lists of floats, can be)."""
        if self.cls == "numeric":
            if self.is_int or self.type.startswith(("DECIMAL", "NUMERIC")):
                return False
            return not cells.NON_FINITE.isdisjoint(self.values)
        if self.cls.startswith("other:") and any(f in self.type for f in _FLOAT_NAMES):
            return any(_has_non_finite(v) for v in self.values)
        return False

    @cached_property
    def normalised(self) -> list[Any]:
        """Every cell normalised by this column's type class (module doc)."""
        vals = self.values
        if self.cls == "numeric":
            kinds = set(map(type, vals))
            if kinds <= {int, type(None)}:
                return list(vals)
            if kinds == {str} and not self.non_finite:
                return list(map(Decimal, vals))
            return [_number(v) for v in vals]
        if self.cls == "string":
            if all(map(str.isascii, filter(None, vals))):
                return list(vals)
            return [v if v is None else unicodedata.normalize("NFC", v) for v in vals]
        if self.cls == "timestamp":
            return [v[:-1] if isinstance(v, str) and v.endswith("Z") else v for v in vals]
        if self.cls.startswith("other:"):
            return [_freeze(v) for v in vals]
        return list(vals)

    @cached_property
    def canonical_raw(self) -> bool:
        """True when the encoded cells are already canonical within this exact type.

        Then two columns of the same type compare cell by cell without any
        conversion (the 1,000,000-row fast path).
        """
        if self.cls == "numeric":
            if self.is_float:
                return self.values.count("-0.0") == 0  # -0.0 == 0.0 by value, not by spelling
            # ints (decimal strings only beyond 2**53) and DECIMAL(p,s) (str() keeps the
            # scale) have one spelling per value within one type. A DECIMAL without a
            # declared scale (PostgreSQL's numeric of SUM(x) / 3 * 3) carries each value's
            # own scale: 9600.00 and 9600.0000000000000000 are one value in two spellings,
            # compared as Decimals (issue 31).
            return self.type not in _UNSCALED
        if self.cls == "string":
            return all(map(str.isascii, filter(None, self.values)))
        if self.cls.startswith("other:"):
            return not any(isinstance(v, list | dict) for v in self.values)
        return True

    @cached_property
    def fingerprint(self) -> tuple[str, str, frozenset[Any]]:
        """Type class plus the multiset of normalised cells."""
        return _multiset(self.cls, self.normalised)

    @cached_property
    def raw_fingerprint(self) -> tuple[str, str, frozenset[Any]]:
        """Type class plus the multiset of encoded cells (valid only among one encoding)."""
        return _multiset(self.cls, self.values)

    @cached_property
    def _float_regime(self) -> bool:
        """True for a DOUBLE-like column whose cells are plain finite spellings."""
        return self.is_float and self.canonical_raw and not self.non_finite

    @cached_property
    def sorted_raw(self) -> list[Any]:
        """The non-NULL encoded cells sorted by their float value (float regime only).

        Each spelling is the shortest round-trip repr of one double, so this is
        also the order of their Decimal values, and sorting floats is faster.
        """
        return sorted(filter(partial(operator.is_not, None), self.values), key=float)

    @cached_property
    def sorted_floats(self) -> list[float] | None:
        """The non-NULL cells as floats, sorted; None unless every one is finite (float regime).

        Position i holds ``float(sorted_raw[i])``, the double nearest to that
        cell's Decimal value, so tolerance checks decide from these floats
        whenever the result is far from the boundary (``_floats_within``).
        """
        if not self._float_regime:
            return None
        vals = self.values
        if None in vals:
            vals = tuple(filter(partial(operator.is_not, None), vals))
        try:
            floats = sorted(map(float, vals))
        except (TypeError, ValueError):  # a spelling float() refuses: the Decimal path decides
            return None
        return floats if math.isfinite(sum(floats)) else None

    @cached_property
    def sorted_numbers(self) -> tuple[int, list[Any]]:
        """NULL count and the sorted non-NULL numbers (numeric columns only)."""
        if self._float_regime:
            raw = self.sorted_raw
            return len(self.values) - len(raw), list(map(Decimal, raw))
        nums = sorted(filter(partial(operator.is_not, None), self.normalised))
        return len(self.normalised) - len(nums), nums


def _multiset(cls: str, values: Sequence[Any]) -> tuple[str, str, frozenset[Any]]:
    """A hashable multiset: a plain set when no value repeats, else (value, count) pairs."""
    distinct = frozenset(values)
    if len(distinct) == len(values):
        return cls, "set", distinct
    return cls, "bag", frozenset(Counter(values).items())


def column_info(column: Column, rows: Sequence[tuple[Any, ...]], index: int) -> ColumnInfo:
    """Wrap column ``index`` of a result (its spec and its rows) for alignment."""
    return ColumnInfo(column, rows, index)


def _number(v: Any) -> Any:
    if v is None or type(v) is int:
        return v
    if isinstance(v, str):
        if v in cells.NON_FINITE:
            return (_NON_FINITE_MARK, v)  # never equal to any number (the result is rejected)
        return Decimal(v)
    if isinstance(v, float):
        return Decimal(repr(v))
    return Decimal(v)


def _encoding(info: ColumnInfo) -> str:
    """Columns with the same encoding spell equal values identically when canonical_raw."""
    if info.cls == "numeric" and info.is_int:
        return "integer"
    if info.cls in _TYPED:
        return info.type
    return info.cls


def normalise_pair(gold: ColumnInfo, actual: ColumnInfo) -> tuple[list[Any], list[Any]] | None:
    """Comparable cells of an aligned column pair, or None when the raw cells already are."""
    if gold.cls != actual.cls:
        wrapped = [v if v is None else (_MISMATCH, v) for v in actual.normalised]
        return gold.normalised, wrapped
    if (gold.type == actual.type or (gold.is_int and actual.is_int) or gold.cls not in _TYPED) and (
        gold.canonical_raw and actual.canonical_raw
    ):
        return None
    return gold.normalised, actual.normalised


# Classes whose encoded spelling depends on the exact type (numeric scale, naive vs aware).
_TYPED = frozenset({"numeric", "timestamp"})


def is_tolerance_pair(
    gold: ColumnInfo, actual: ColumnInfo, abs_tol: Decimal, rel_tol: Decimal
) -> bool:
    """True when this aligned pair compares within the case's tolerance.

    Only non-integer numeric gold columns facing a numeric column, and only
    when the case has a nonzero tolerance; integer gold columns are exact.
    """
    return (
        gold.cls == "numeric"
        and actual.cls == "numeric"
        and not gold.is_int
        and (abs_tol > 0 or rel_tol > 0)
    )


def within(e: Any, a: Any, abs_tol: Decimal, rel_tol: Decimal) -> bool:
    """|e - a| <= max(abs_tol, rel_tol * max(|e|, |a|)), inclusive; call under ``EXACT``.

    >>> from decimal import localcontext
    >>> with localcontext(EXACT):
    ...     within(Decimal("100.00"), Decimal("100.01"), Decimal("0.01"), Decimal(0))
    True
    """
    if e is None or a is None:
        return e is None and a is None
    d = abs(e - a)
    return bool(d <= abs_tol or d <= rel_tol * max(abs(e), abs(a)))


# A double is within half an ulp of its cell's Decimal value (2**-53 relative, 2**-1075
# absolute below the normal range), and each float step below adds at most as much again:
# a few ulps of the largest magnitude involved in all. The margin is 256 ulps of it plus
# 2**-1020; below _LIMIT nothing can overflow. Only pairs within the margin of their
# threshold need the Decimal check.
_MARGIN = 2.0**-45
_TINY = 2.0**-1020
_LIMIT = 2.0**1000


def _floats_within(
    gold: ColumnInfo, actual: ColumnInfo, abs_tol: Decimal, rel_tol: Decimal
) -> bool | None:
    """``_values_within`` decided from the sorted floats; None when the Decimal path decides.

    A position whose float ``|e - a|`` lies more than the margin below (above)
    its float threshold is within (not within) exactly as its Decimal values
    are; a position inside the margin is checked on its Decimal values.
    """
    g, a = gold.sorted_floats, actual.sorted_floats
    if g is None or a is None:
        return None
    if len(g) != len(a) or len(gold.values) != len(actual.values):
        return False  # NULL counts differ
    if not g:
        return True
    abs_f, rel_f = float(abs_tol), float(rel_tol)
    mag = max(abs(g[0]), abs(g[-1]), abs(a[0]), abs(a[-1]))
    top = max(abs(abs_f), abs(rel_f) * mag)
    if not (mag < _LIMIT and top < _LIMIT):  # also false for inf and NaN tolerances
        return None
    margin = (mag + top) * _MARGIN + _TINY
    # Clearly within abs_tol everywhere (abs_tol never exceeds the threshold): done, at C speed.
    if all(map(operator.le, map(abs, map(operator.sub, g, a)), repeat(abs_f - margin))):
        return True
    if rel_f != 0:
        diffs = map(abs, map(operator.sub, g, a))
        sizes = map(max, map(abs, g), map(abs, a))
        limits = map(max, map(operator.mul, sizes, repeat(rel_f)), repeat(abs_f))
        if all(map(operator.le, diffs, map(operator.sub, limits, repeat(margin)))):
            return True
    # Some position is not clearly within: walk them all, deciding the close ones exactly.
    for i, (e, x) in enumerate(zip(g, a, strict=True)):
        d = abs(e - x)
        t = max(abs_f, rel_f * max(abs(e), abs(x)))
        if d <= t - margin:
            continue
        if d > t + margin:
            return False
        with localcontext(EXACT):
            e_dec, a_dec = Decimal(gold.sorted_raw[i]), Decimal(actual.sorted_raw[i])
            if not within(e_dec, a_dec, abs_tol, rel_tol):
                return False
    return True


def _values_within(
    gold: ColumnInfo, actual: ColumnInfo, abs_tol: Decimal, rel_tol: Decimal
) -> bool:
    fast = _floats_within(gold, actual, abs_tol, rel_tol)
    if fast is not None:
        return fast
    g_nulls, g_nums = gold.sorted_numbers
    a_nulls, a_nums = actual.sorted_numbers
    if g_nulls != a_nulls or len(g_nums) != len(a_nums):
        return False
    with localcontext(EXACT):
        if rel_tol == 0:  # the common case, at C speed: every |e - a| <= abs_tol
            diffs = map(abs, map(operator.sub, g_nums, a_nums))
            return all(map(operator.le, diffs, repeat(abs_tol)))
        return all(within(e, a, abs_tol, rel_tol) for e, a in zip(g_nums, a_nums, strict=True))


def align(
    gold: Sequence[ColumnInfo],
    actual: Sequence[ColumnInfo],
    abs_tol: Decimal,
    rel_tol: Decimal,
) -> tuple[str, list[int] | None]:
    """The alignment kind and the actual column index for each gold column (or None)."""
    k = len(gold)
    if k != len(actual):
        return "count_mismatch", None
    if Counter(g.name for g in gold) == Counter(a.name for a in actual):
        # Equal names pair up in their order of appearance (only duplicates need the order).
        slots: dict[str, list[int]] = {}
        for j, a in enumerate(actual):
            slots.setdefault(a.name, []).append(j)
        return "names", [slots[g.name].pop(0) for g in gold]
    every = [*gold, *actual]
    if len({_encoding(c) for c in every}) == 1 and all(c.canonical_raw for c in every):
        # One encoding, canonical spelling: multisets of encoded cells compare as values do,
        # without converting a single cell.
        gfp = [g.raw_fingerprint for g in gold]
        afp = [a.raw_fingerprint for a in actual]
    else:
        gfp = [g.fingerprint for g in gold]
        afp = [a.fingerprint for a in actual]
    if Counter(gfp) == Counter(afp):
        if len(set(gfp)) < k:
            # Interchangeable columns: every bijection among them is valid. The bipartite
            # step would find the same several matchings (its edges include these).
            return "ambiguous", None
        where = {fp: j for j, fp in enumerate(afp)}
        return "fingerprint", [where[fp] for fp in gfp]
    by_fp: dict[Any, list[int]] = {}
    for j, fp in enumerate(afp):
        by_fp.setdefault(fp, []).append(j)
    adj: list[list[int]] = []
    for i, g in enumerate(gold):
        if any(is_tolerance_pair(g, a, abs_tol, rel_tol) for a in actual):
            adj.append(
                [
                    j
                    for j, a in enumerate(actual)
                    if g.cls == a.cls
                    and (
                        _values_within(g, a, abs_tol, rel_tol)
                        if is_tolerance_pair(g, a, abs_tol, rel_tol)
                        else gfp[i] == afp[j]
                    )
                ]
            )
        else:
            adj.append(list(by_fp.get(gfp[i], [])))
    verdict, match = unique_perfect_matching(adj, k)
    if verdict == "unique":
        return "bipartite", match
    return ("ambiguous" if verdict == "several" else "none"), None
