"""Understanding slices: where a model's SQL first departs from the reference SQL.

:func:`first_divergence` compares the structure of two queries (sqlglot, the
dialect of the bank's engine) component by component, in a fixed order, and
names the first component that differs (docs/slices.md):

============ ==============================================================
component    compared as
============ ==============================================================
tables       the physical tables read, through the lineage of CTEs, derived
             tables, subqueries and aliases (never the names written). A table
             only one side reads is a ``joins`` difference instead when that
             side only joins it (its columns appear in join keys and nowhere
             else): a join that repeats rows is a join, not a new source
joins        the join keys (physical column against physical column, or the
             expressions they resolve to) and each join's kind: inner, left
             (preserved side first; a right join is a left join turned round),
             full, cross, semi (``EXISTS``, ``IN``), anti (``NOT EXISTS``, a
             ``LEFT JOIN ... IS NULL`` on the joined key), not_in (``NOT IN``,
             which a NULL defeats). An outer join whose nullable side a WHERE
             predicate rejects is the inner join it behaves as
filters      the predicates (WHERE, HAVING, QUALIFY, inner-join ON conditions;
             the extra ON conditions of an outer join, labelled by its nullable
             side) after resolving aliases, normalising literals (``50`` =
             ``50.0``, ``TIMESTAMP '2025-12-01'`` = ``TIMESTAMP '2025-12-01
             00:00:00'``, a TIMESTAMPTZ as its UTC instant) and comparison
             direction (``a > b`` = ``b < a``), ``BETWEEN`` split into its two
             bounds. A predicate on an aggregate or window value is compared by
             its shape here; the measure inside it is compared under aggregates
grouping     the grain: each GROUP BY key set (``DISTINCT`` counts as one), the
             empty set for an aggregate without GROUP BY
aggregates   every aggregate call and window expression, resolved
projection   the output expressions of the final query (order and names
             ignored: the comparison aligns columns by value), and its set
             operations
order        ORDER BY of the final query (only when the case says order
             matters, or with a LIMIT), LIMIT and OFFSET anywhere
============ ==============================================================

It is conservative by construction: SQL that does not parse as one query, a
qualifier that cannot be attributed (a column no source has, an unknown prefix),
a construct it does not model (LATERAL, PIVOT, a recursive CTE, ``ANY``/``ALL``)
gives ``unknown``, never a guessed component. When every component matches,
the difference lies outside the structure and the slice is ``none``.

Each component is a set of canonical strings, so a CTE wrapper, a derived table
in place of a CTE, renamed aliases or reordered conjuncts are not differences.
It is a structural signature, not a proof of equivalence: two queries that mean
the same through different shapes (a window average against a correlated
subquery) differ at the first component where their shapes do.

The detail line names only the model's side (what it has that the reference
lacks, or how many reference items it lacks): reports are public and never show
reference SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ledger.harness.slice_signature import _Signature, _signature, _Unattributable

__all__ = [
    "COMPONENTS",
    "NONE",
    "OUTCOMES",
    "SLICER_VERSION",
    "UNKNOWN",
    "Slice",
    "first_divergence",
]

#: The version of the comparison rules; recorded with every slice.
SLICER_VERSION = "1.0.0"
#: The components, in the fixed order the first divergence is looked for.
COMPONENTS = ("tables", "joins", "filters", "grouping", "aggregates", "projection", "order")
NONE = "none"
UNKNOWN = "unknown"
#: Every value a slice can take.
OUTCOMES = (*COMPONENTS, NONE, UNKNOWN)


@dataclass(frozen=True)
class Slice:
    """The first divergence: one of :data:`OUTCOMES` and a one-line reason."""

    component: str
    detail: str


def first_divergence(
    model_sql: str,
    reference_sql: str,
    dialect: str,
    tables: Mapping[str, Sequence[str]],
    *,
    order_significant: bool = True,
) -> Slice:
    """The first component where ``model_sql`` departs from ``reference_sql``.

    ``dialect``: the sqlglot dialect of the bank's engine. ``tables``: the bank's
    published tables and their columns (names). ``order_significant``: whether the
    case's row order matters (else ORDER BY without LIMIT is not compared).

    Pure: no I/O, no clock. Never raises for bad SQL: it is ``unknown``.

    >>> t = {"sales": ["id", "region", "amount"]}
    >>> first_divergence("SELECT SUM(amount) FROM sales WHERE region = 'b'",
    ...                  "SELECT SUM(s.amount) FROM sales AS s WHERE s.region = 'a'",
    ...                  "duckdb", t).component
    'filters'
    >>> first_divergence("SELECT SUM(x.amount) FROM sales x", "SELECT SUM(amount) FROM sales",
    ...                  "duckdb", t).component
    'none'
    """
    schema = {
        name.casefold(): {col.casefold(): "UNKNOWN" for col in columns}
        for name, columns in tables.items()
    }
    try:
        reference = _signature(reference_sql, dialect, schema, order_significant)
    except _Unattributable as exc:
        return Slice(UNKNOWN, f"the reference SQL cannot be analysed: {exc}")
    try:
        model = _signature(model_sql, dialect, schema, order_significant)
    except _Unattributable as exc:
        return Slice(UNKNOWN, str(exc))
    return _compare(model, reference)


# ----------------------------------------------------------------- comparison


def _compare(m: _Signature, r: _Signature) -> Slice:
    only_m, only_r = m.read - r.read, r.read - m.read
    sourced = sorted(t for t in only_m if t not in m.join_only) + sorted(
        t for t in only_r if t not in r.join_only
    )
    if sourced:
        return Slice("tables", _tables_detail(only_m, only_r, m))
    if m.joins != r.joins:
        return Slice("joins", _detail("join", m.joins - r.joins, r.joins - m.joins))
    if m.filter_shapes != r.filter_shapes:
        return Slice(
            "filters",
            _detail(
                "predicate", m.filter_shapes - r.filter_shapes, r.filter_shapes - m.filter_shapes
            ),
        )
    if m.filters != r.filters:
        # Same predicates around different measures: the measure is compared next.
        pass
    if m.grouping != r.grouping:
        return Slice("grouping", _detail("grain", m.grouping - r.grouping, r.grouping - m.grouping))
    if m.aggregates != r.aggregates:
        return Slice(
            "aggregates",
            _detail("measure", m.aggregates - r.aggregates, r.aggregates - m.aggregates),
        )
    if m.projection != r.projection:
        return Slice("projection", _projection_detail(m.projection, r.projection))
    if m.order != r.order:
        return Slice("order", _detail("order/limit", m.order - r.order, r.order - m.order))
    return Slice(
        NONE, "every component matches the reference: a difference lies outside the structure"
    )


def _tables_detail(only_m: set[str], only_r: set[str], m: _Signature) -> str:
    parts = []
    if only_m:
        parts.append(f"reads {', '.join(sorted(only_m))}, which the reference does not")
    if only_r:
        n = len(only_r)
        parts.append(f"does not read {n} table{'s' if n > 1 else ''} the reference reads")
    return "tables: the query " + "; ".join(parts)


def _detail(what: str, extra: Iterable[object], missing: Iterable[object]) -> str:
    shown = sorted(_show(x) for x in extra)
    lacks = len(list(missing))
    parts = []
    if shown:
        parts.append(f"{what} not in the reference: " + "; ".join(shown[:3]))
        if len(shown) > 3:
            parts[-1] += f" (+{len(shown) - 3} more)"
    if lacks:
        parts.append(f"lacks {lacks} {what}{'s' if lacks > 1 else ''} of the reference")
    return ", ".join(parts) or f"{what}s differ"


def _projection_detail(m: tuple[object, ...], r: tuple[object, ...]) -> str:
    return f"output not the reference's: {_show(m)}"


def _show(item: object) -> str:
    text = " ".join(_show(x) for x in item if x != "") if isinstance(item, tuple) else str(item)
    return text if len(text) <= 160 else text[:157] + "..."
