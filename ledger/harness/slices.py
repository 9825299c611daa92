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

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope

from ledger.harness import sqlparse

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

#: Inlined expressions longer than this are not compared (a pathological CTE chain).
_MAX_EXPR_CHARS = 20_000
_MEASURE = "<measure>"
_SUBQUERY = "<subquery>"
_TEMPORAL = {
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPNTZ: "timestamp",
    exp.DataType.Type.DATETIME: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
}


@dataclass(frozen=True)
class Slice:
    """The first divergence: one of :data:`OUTCOMES` and a one-line reason."""

    component: str
    detail: str


class _Unattributable(Exception):
    """The SQL cannot be attributed: the slice is unknown, with this reason."""


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


# ----------------------------------------------------------------- signature


@dataclass
class _Signature:
    read: set[str] = field(default_factory=set)
    keyed: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)
    joins: set[tuple[str, ...]] = field(default_factory=set)
    filter_shapes: set[tuple[str, str]] = field(default_factory=set)
    filters: set[tuple[str, str]] = field(default_factory=set)
    grouping: set[tuple[str, ...]] = field(default_factory=set)
    aggregates: set[str] = field(default_factory=set)
    projection: tuple[object, ...] = ()
    order: set[tuple[str, ...]] = field(default_factory=set)

    @property
    def join_only(self) -> set[str]:
        """Tables whose columns appear in join keys and nowhere else."""
        return self.keyed - self.values


def _signature(
    sql: str, dialect: str, schema: dict[str, dict[str, str]], order_significant: bool
) -> _Signature:
    try:
        trees = [t for t in sqlparse.parse(sql, dialect) if t is not None]
    except (SqlglotError, RecursionError) as exc:
        raise _Unattributable(f"does not parse: {_first_line(exc)}") from None
    if len(trees) != 1:
        raise _Unattributable(f"{len(trees)} statements, not one query")
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise _Unattributable(f"a {tree.key.upper()} statement, not a query")
    with_ = tree.args.get("with_") or tree.args.get("with")
    if isinstance(with_, exp.With) and with_.args.get("recursive"):
        raise _Unattributable("a recursive CTE is not modelled")
    for node_type, what in (
        (exp.Lateral, "LATERAL"),
        (exp.Pivot, "PIVOT"),
        (exp.Any, "ANY"),
        (exp.All, "ALL"),
    ):
        if tree.find(node_type) is not None:
            raise _Unattributable(f"{what} is not modelled")
    try:
        wide: dict[str, object] = dict(schema)
        qualified = qualify(
            tree.copy(),
            schema=wide,
            dialect=dialect,
            validate_qualify_columns=True,
            quote_identifiers=False,
            identify=False,
        )
        root = build_scope(qualified)
    except (SqlglotError, RecursionError, KeyError, ValueError) as exc:
        raise _Unattributable(
            f"a column or qualifier cannot be attributed: {_first_line(exc)}"
        ) from None
    if root is None:
        raise _Unattributable("no query scope")
    try:
        return _Analyzer(root, schema, dialect, order_significant).run()
    except RecursionError:
        raise _Unattributable("nested too deeply to analyse") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Analyzer:
    """Walks the scopes reachable from the root and fills one signature."""

    def __init__(
        self, root: Scope, schema: dict[str, dict[str, str]], dialect: str, order_significant: bool
    ) -> None:
        self.root = root
        self.schema = schema
        self.dialect = dialect
        self.order_significant = order_significant
        self.scopes = {id(s.expression): s for s in root.traverse()}
        self.sig = _Signature()
        self.seen: set[int] = set()
        self.outputs: dict[tuple[int, str], exp.Expr] = {}
        self.source_tables: dict[int, frozenset[str]] = {}
        # Where each scope sits: "" for the main query and the CTEs and derived tables it
        # reads, "semi(sale_tags)/" and the like inside a subquery: its predicates are
        # not the main query's.
        self.context: dict[int, str] = {}
        # Per scope, the derived sources joined on every column they are grouped by.
        self.unique: dict[int, set[str]] = {}

    def run(self) -> _Signature:
        self.visit(self.root, role=None)
        self.sig.projection = self.projection(self.root)
        if not self.sig.read:
            self.sig.read = set()
        return self.sig

    # ------------------------------------------------------------- scopes

    def visit(self, scope: Scope, role: str | None, context: str = "") -> None:
        if id(scope) in self.seen:
            return
        self.seen.add(id(scope))
        self.context[id(scope)] = context
        node = scope.expression
        if isinstance(node, exp.SetOperation):
            for branch in scope.set_operation_scopes:
                self.visit(branch, role, context)
            self.order_of(scope, node)
            return
        if not isinstance(node, exp.Select):
            raise _Unattributable(f"a {node.key.upper()} scope is not modelled")
        self.select(scope, node, role)

    def select(self, scope: Scope, node: exp.Select, role: str | None) -> None:
        for name, what in (("laterals", "LATERAL"), ("pivots", "PIVOT"), ("connect", "CONNECT BY")):
            if node.args.get(name):
                raise _Unattributable(f"{what} is not modelled")
        units = self.units(scope, node)
        for unit in units:
            for alias in unit.aliases:
                src = scope.sources.get(alias)
                if isinstance(src, Scope):
                    self.visit(src, None, self.context[id(scope)])
                elif isinstance(src, exp.Table) and not _is_function(src):
                    if src.name.casefold() not in self.schema or src.args.get("db"):
                        raise _Unattributable(f"{src.sql(self.dialect)!r} is not a published table")
                    self.sig.read.add(src.name.casefold())
        where = node.args.get("where")
        pool: list[exp.Expr] = list(_conjuncts(where.this)) if where is not None else []
        for unit in units:
            pool.extend(unit.inner_conditions)
        outer = [u for u in units if u.kind in ("left", "right", "full")]
        self.unique[id(scope)] = self.unique_sources(scope, pool, units)
        self.reject_outer(scope, units, pool)
        local = set(scope.sources)
        absorbed = self.anti_joins(scope, units, pool)
        linked: set[str] = set()
        for conjunct in pool:
            if id(conjunct) in absorbed:
                continue
            self.conjunct(scope, conjunct, role, local, linked)
        for unit in outer:
            if unit.kind == "inner":
                continue
            self.outer_join(scope, units, unit, linked)
        for unit in units:
            if unit.kind in ("semi", "anti") and unit not in outer:
                self.semi_join(scope, units, unit, linked)
        if len(units) > 1 and any(not (u.aliases & linked) for u in units):
            # Some source is joined without keys (a cross join or a non-equi join).
            everything = sorted(set().union(*(self.unit_tables(scope, u) for u in units)))
            self.sig.joins.add(("cross", "", ",".join(everything)))
        having = node.args.get("having")
        for c in _conjuncts(having.this) if having is not None else ():
            self.filter(scope, c, "where")
        qualify_ = node.args.get("qualify")
        for c in _conjuncts(qualify_.this) if qualify_ is not None else ():
            self.filter(scope, c, "where")
        self.grouping(scope, node)
        for projection in node.expressions:
            self.measures(scope, projection.unalias())
        if having is not None:
            self.measures(scope, having.this)
        self.order_of(scope, node)

    # ------------------------------------------------------------- FROM and joins

    def units(self, scope: Scope, node: exp.Select) -> list[_Unit]:
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is None:
            return []
        units = [self.unit(scope, from_.this, "inner", None)]
        for join in node.args.get("joins") or ():
            if join.args.get("using"):
                raise _Unattributable("JOIN ... USING is not modelled")
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            if kind in ("SEMI", "ANTI"):
                joined = kind.lower()
            elif side in ("LEFT", "RIGHT", "FULL"):
                joined = side.lower()
            elif kind in ("", "INNER", "CROSS", "OUTER"):
                joined = "inner"
            else:
                raise _Unattributable(f"a {side} {kind} JOIN is not modelled")
            if join.args.get("method"):
                raise _Unattributable(f"a {join.args['method']} JOIN is not modelled")
            units.append(self.unit(scope, join.this, joined, join.args.get("on")))
        return units

    def unit(self, scope: Scope, source: exp.Expr, kind: str, on: exp.Expr | None) -> _Unit:
        conditions = list(_conjuncts(on)) if on is not None else []
        if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Table):
            # A parenthesised join: (a JOIN b ON ...), only inner joins inside.
            inner = source.this
            aliases = {inner.alias_or_name}
            nested: list[exp.Expr] = []
            for join in inner.args.get("joins") or ():
                side, jkind = (join.side or "").upper(), (join.kind or "").upper()
                if side or jkind not in ("", "INNER", "CROSS"):
                    raise _Unattributable(
                        "an outer join inside a parenthesised join is not modelled"
                    )
                aliases.add(join.this.alias_or_name)
                if join.args.get("on") is not None:
                    nested.extend(_conjuncts(join.args["on"]))
            unit = _Unit(aliases, kind, conditions)
            unit.inner_conditions.extend(nested)
        else:
            alias = source.alias_or_name
            if alias not in scope.sources:
                raise _Unattributable(
                    f"the source {source.sql(self.dialect)!r} cannot be attributed"
                )
            unit = _Unit({alias}, kind, conditions)
        if kind == "inner":
            unit.inner_conditions.extend(conditions)
            unit.conditions = []
        return unit

    def reject_outer(self, scope: Scope, units: list[_Unit], pool: list[exp.Expr]) -> None:
        """Turn outer joins that a WHERE or inner-join predicate null-rejects into what they
        behave as (a left join whose nullable side must match is an inner join)."""
        rejected: set[str] = set()
        for c in pool:
            rejected |= _strict_aliases(c)
        changed = True
        while changed:
            changed = False
            for i, unit in enumerate(units):
                if unit.kind not in ("left", "right", "full"):
                    continue
                before = set().union(*(u.aliases for u in units[:i]))
                if unit.kind == "left":
                    nullable_left, nullable_right = False, True
                elif unit.kind == "right":
                    nullable_left, nullable_right = True, False
                else:
                    nullable_left = nullable_right = True
                if nullable_right and unit.aliases & rejected:
                    nullable_right = False
                if nullable_left and before & rejected:
                    nullable_left = False
                kind = {
                    (False, False): "inner",
                    (False, True): "left",
                    (True, False): "right",
                    (True, True): "full",
                }[(nullable_left, nullable_right)]
                if kind != unit.kind:
                    unit.kind = kind
                    changed = True
                    if kind == "inner":
                        pool.extend(unit.conditions)
                        unit.inner_conditions.extend(unit.conditions)
                        for c in unit.conditions:
                            rejected |= _strict_aliases(c)
                        unit.conditions = []

    def anti_joins(self, scope: Scope, units: list[_Unit], pool: list[exp.Expr]) -> set[int]:
        """``LEFT JOIN x ON key ... WHERE x.key IS NULL``: an anti join (the test is absorbed)."""
        absorbed: set[int] = set()
        for unit in units:
            if unit.kind != "left":
                continue
            keys = {
                (c.table, c.name)
                for cond in unit.conditions
                if isinstance(cond, exp.EQ)
                for c in cond.find_all(exp.Column)
                if c.table in unit.aliases
            }
            for c in pool:
                if (
                    isinstance(c, exp.Is)
                    and isinstance(c.expression, exp.Null)
                    and isinstance(c.this, exp.Column)
                    and (c.this.table, c.this.name) in keys
                ):
                    unit.kind = "anti"
                    absorbed.add(id(c))
        return absorbed

    def conjunct(
        self, scope: Scope, c: exp.Expr, role: str | None, local: set[str], linked: set[str]
    ) -> None:
        negated = isinstance(c, exp.Not)
        inner = c.this if negated else c
        if isinstance(inner, exp.Exists):
            sub = self.scope_of(inner.this)
            kind = "anti" if negated else "semi"
            self.sig.joins.add((kind, "", ",".join(sorted(self.scope_tables(sub)))))
            self.visit(sub, kind, self.sub_context(scope, sub, kind))
            return
        if isinstance(inner, exp.In) and inner.args.get("query") is not None:
            query = inner.args["query"]
            sub = self.scope_of(query.this if isinstance(query, exp.Subquery) else query)
            kind = "not_in" if negated else "semi"
            selects = sub.expression.selects if isinstance(sub.expression, exp.Select) else []
            if len(selects) != 1:
                raise _Unattributable("an IN subquery that does not select one column")
            self.sig.joins.add((kind, "", ",".join(sorted(self.scope_tables(sub)))))
            outer_side = self.key(scope, inner.this)
            inner_side = self.key(sub, selects[0].unalias())
            self.sig.joins.add((kind, outer_side, inner_side))
            self.visit(sub, kind, self.sub_context(scope, sub, kind))
            return
        if isinstance(c, exp.EQ) and not _has_query(c):
            left, right = _aliases(c.this), _aliases(c.expression)
            if left and right and not (left & right):
                if left <= local and right <= local and not _has_measure(c):
                    a, b = sorted((self.key(scope, c.this), self.key(scope, c.expression)))
                    self.sig.joins.add(("inner", a, b))
                    linked.update(left | right)
                    return
                if role in ("semi", "anti", "not_in") and not _has_measure(c):
                    if left <= local and not (right & local):
                        self.sig.joins.add(
                            (role, self.key(scope, c.expression), self.key(scope, c.this))
                        )
                        return
                    if right <= local and not (left & local):
                        self.sig.joins.add(
                            (role, self.key(scope, c.this), self.key(scope, c.expression))
                        )
                        return
        for part in _between_parts(c):
            self.filter(scope, part, "where")

    def outer_join(self, scope: Scope, units: list[_Unit], unit: _Unit, linked: set[str]) -> None:
        index = units.index(unit)
        before = set().union(*(u.aliases for u in units[:index]))
        kind = unit.kind
        preserved, nullable = (before, unit.aliases) if kind != "right" else (unit.aliases, before)
        label = "on " + ",".join(
            sorted(set().union(*(self.alias_tables(scope, a) for a in nullable)))
        )
        keyed = False
        if kind == "anti":
            self.sig.joins.add((kind, "", label[3:]))
        for c in unit.conditions:
            if isinstance(c, exp.EQ) and not _has_query(c) and not _has_measure(c):
                left, right = _aliases(c.this), _aliases(c.expression)
                if left and right and left <= preserved and right <= nullable:
                    pair = (self.key(scope, c.this), self.key(scope, c.expression))
                elif left and right and right <= preserved and left <= nullable:
                    pair = (self.key(scope, c.expression), self.key(scope, c.this))
                else:
                    pair = None
                if pair is not None:
                    if kind == "full":
                        pair = tuple(sorted(pair))  # type: ignore[assignment]
                    self.sig.joins.add(("left" if kind == "right" else kind, *pair))
                    keyed = True
                    continue
            for part in _between_parts(c):
                self.filter(scope, part, label)
        if not keyed:
            self.sig.joins.add((kind, "", label[3:]))
        # An outer join links its side to the sources before it (its own item says how).
        linked.update(unit.aliases | before)

    def semi_join(self, scope: Scope, units: list[_Unit], unit: _Unit, linked: set[str]) -> None:
        index = units.index(unit)
        before = set().union(*(u.aliases for u in units[:index]))
        tables = sorted(set().union(*(self.alias_tables(scope, a) for a in unit.aliases)))
        self.sig.joins.add((unit.kind, "", ",".join(tables)))
        for c in unit.conditions:
            if isinstance(c, exp.EQ) and not _has_query(c) and not _has_measure(c):
                left, right = _aliases(c.this), _aliases(c.expression)
                if left and right and left <= before and right <= unit.aliases:
                    self.sig.joins.add(
                        (unit.kind, self.key(scope, c.this), self.key(scope, c.expression))
                    )
                    continue
                if left and right and right <= before and left <= unit.aliases:
                    self.sig.joins.add(
                        (unit.kind, self.key(scope, c.expression), self.key(scope, c.this))
                    )
                    continue
            for part in _between_parts(c):
                self.filter(scope, part, f"{unit.kind} " + ",".join(tables))
        linked.update(unit.aliases | before)

    # ------------------------------------------------------------- items

    def sub_context(self, scope: Scope, sub: Scope, kind: str) -> str:
        tables = ",".join(sorted(self.scope_tables(sub)))
        return f"{self.context.get(id(scope), '')}{kind}({tables})/"

    def unique_sources(self, scope: Scope, pool: list[exp.Expr], units: list[_Unit]) -> set[str]:
        """Derived sources (CTEs, derived tables) grouped by exactly columns they are joined
        on: one row per key, so joining them cannot repeat rows of the other side."""
        conditions = list(pool) + [c for u in units for c in u.conditions]
        joined: dict[str, set[str]] = {}
        for c in conditions:
            if (
                isinstance(c, exp.EQ)
                and isinstance(c.this, exp.Column)
                and isinstance(c.expression, exp.Column)
            ):
                a, b = c.this, c.expression
                if a.table and b.table and a.table != b.table:
                    joined.setdefault(a.table, set()).add(a.name.casefold())
                    joined.setdefault(b.table, set()).add(b.name.casefold())
        out: set[str] = set()
        for alias, columns in joined.items():
            source = scope.sources.get(alias)
            if not isinstance(source, Scope) or not isinstance(source.expression, exp.Select):
                continue
            node = source.expression
            group = node.args.get("group")
            outputs = {
                p.unalias().sql(self.dialect): p.alias_or_name.casefold() for p in node.expressions
            }
            if (
                group is not None
                and group.expressions
                and not any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets"))
            ):
                names = [outputs.get(g.sql(self.dialect)) for g in group.expressions]
            elif node.args.get("distinct") is not None:
                names = list(outputs.values())
            else:
                continue
            if all(n is not None and n in columns for n in names):
                out.add(alias)
        return out

    def key(self, scope: Scope, node: exp.Expr) -> str:
        resolved = self.inline(scope, node)
        self.sig.keyed |= _tables_in(resolved)
        text = _canon(resolved, self.dialect)
        if isinstance(node, exp.Column) and node.table in self.unique.get(id(scope), ()):
            text += " (one row per key)"
        return text

    def filter(self, scope: Scope, c: exp.Expr, placement: str) -> None:
        placement = self.context.get(id(scope), "") + placement
        resolved = self.inline(scope, c, role="scalar")
        self.sig.values |= _tables_in(resolved)
        full = _canon(resolved, self.dialect)
        shape = _canon(_shape(resolved), self.dialect)
        self.sig.filters.add((placement, full))
        self.sig.filter_shapes.add((placement, shape))

    def grouping(self, scope: Scope, node: exp.Select) -> None:
        group = node.args.get("group")
        if group is not None:
            keys: list[str] = []
            for e in group.expressions:
                resolved = self.inline(scope, e)
                self.sig.values |= _tables_in(resolved)
                keys.append(_canon(resolved, self.dialect))
            for name in ("rollup", "cube", "grouping_sets"):
                for e in group.args.get(name) or ():
                    resolved = self.inline(scope, e)
                    self.sig.values |= _tables_in(resolved)
                    keys.append(f"{name}:{_canon(resolved, self.dialect)}")
            self.sig.grouping.add(tuple(sorted(keys)))
        elif any(_own_aggregate(p) for p in node.expressions) or node.args.get("having"):
            self.sig.grouping.add(())
        if node.args.get("distinct") is not None:
            outputs = []
            for p in node.expressions:
                resolved = self.inline(scope, p.unalias())
                self.sig.values |= _tables_in(resolved)
                outputs.append(_canon(resolved, self.dialect))
            self.sig.grouping.add(("DISTINCT", *sorted(outputs)))

    def measures(self, scope: Scope, node: exp.Expr) -> None:
        resolved = self.inline(scope, node, role="scalar")
        self.sig.values |= _tables_in(resolved)
        for found in resolved.find_all(exp.AggFunc, exp.Window):
            if isinstance(found.parent, exp.Window) and found.arg_key == "this":
                continue  # the function of a window: the window is the measure
            self.sig.aggregates.add(_canon(found, self.dialect))

    def projection(self, scope: Scope) -> tuple[object, ...]:
        node = scope.expression
        if isinstance(node, exp.SetOperation):
            branches = sorted(
                (self.projection(b) for b in scope.set_operation_scopes), key=lambda b: repr(b)
            )
            op = node.key.upper() + ("" if node.args.get("distinct") else " ALL")
            return (op, *branches)
        inner = _passthrough(scope, node) if isinstance(node, exp.Select) else None
        if inner is not None:
            return self.projection(inner)  # SELECT * FROM cte: the CTE's own outputs
        outputs = []
        for p in node.expressions:
            resolved = self.inline(scope, p.unalias(), role="scalar")
            self.sig.values |= _tables_in(resolved)
            outputs.append(_canon(resolved, self.dialect))
        return tuple(sorted(outputs))

    def order_of(self, scope: Scope, node: exp.Query) -> None:
        order = node.args.get("order")
        limit = node.args.get("limit")
        offset = node.args.get("offset")
        is_root = scope is self.root
        if limit is None and offset is None and (not is_root or not self.order_significant):
            return
        items: list[str] = []
        if order is not None:
            for o in order.expressions:
                resolved = self.order_key(scope, node, o.this)
                self.sig.values |= _tables_in(resolved)
                text = _canon(resolved, self.dialect)
                desc = bool(o.args.get("desc"))
                nulls_first = o.args.get("nulls_first")
                # DuckDB's default: NULLS LAST for both directions.
                items.append(
                    f"{text} {'DESC' if desc else 'ASC'}{' NULLS FIRST' if nulls_first else ''}"
                )
        parts = ["root" if is_root else "sub", *items]
        if limit is not None:
            parts.append(
                "LIMIT " + _canon(limit.expression if limit.expression else limit, self.dialect)
            )
        if offset is not None:
            parts.append(
                "OFFSET " + _canon(offset.expression if offset.expression else offset, self.dialect)
            )
        self.sig.order.add(tuple(parts))

    def order_key(self, scope: Scope, node: exp.Query, key: exp.Expr) -> exp.Expr:
        """An ORDER BY key: an output alias or position resolves to its output expression."""
        if isinstance(key, exp.Column) and not key.table and isinstance(node, exp.Select):
            for p in node.expressions:
                if p.alias_or_name == key.name:
                    return self.inline(scope, p.unalias(), role="scalar")
        if isinstance(key, exp.Column) and not key.table and isinstance(node, exp.SetOperation):
            names = node.named_selects
            if key.name in names:
                return exp.Var(this=f"output#{names.index(key.name)}")
        return self.inline(scope, key, role="scalar")

    # ------------------------------------------------------------- lineage

    def inline(self, scope: Scope, node: exp.Expr, role: str | None = None) -> exp.Expr:
        """A copy of ``node`` with every column replaced by what it resolves to (a physical
        column, or the expression a derived column stands for) and every subquery by a
        placeholder (the subquery itself is analysed as its own scope)."""
        if isinstance(node, exp.Column):
            return self.resolve(scope, node)
        queries = list(_maximal_queries(node))
        for q in queries:
            sub = self.scope_of(q)
            kind = role or "scalar"
            self.visit(sub, kind, self.sub_context(scope, sub, kind))
        copy = node.copy()
        for q in list(_maximal_queries(copy)):
            target = q.parent if isinstance(q.parent, exp.Subquery) else q
            target.replace(exp.Var(this=_SUBQUERY))
        for col in list(copy.find_all(exp.Column)):
            resolved = self.resolve(scope, col)
            if col is copy:
                return resolved
            col.replace(resolved)
        if len(copy.sql(self.dialect)) > _MAX_EXPR_CHARS:
            raise _Unattributable("an expression too large to compare")
        return copy

    def resolve(self, scope: Scope, col: exp.Column) -> exp.Expr:
        table = col.table
        name = col.name.casefold()
        if not table:
            # An output alias referenced in the same SELECT (DuckDB allows it).
            node = scope.expression
            if isinstance(node, exp.Select):
                for p in node.expressions:
                    if p.alias_or_name.casefold() == name and not (
                        isinstance(p.unalias(), exp.Column) and p.unalias() is col
                    ):
                        return self.inline(scope, p.unalias())
            raise _Unattributable(f"the column {col.sql(self.dialect)} has no qualifier")
        owner: Scope | None = scope
        while owner is not None and table not in owner.sources:
            owner = owner.parent
        if owner is None:
            raise _Unattributable(
                f"the qualifier {table!r} of {col.sql(self.dialect)} names no source"
            )
        source = owner.sources[table]
        if isinstance(source, exp.Table):
            if _is_function(source):
                columns = [c.casefold() for c in source.alias_column_names]
                index = columns.index(name) if name in columns else 0
                fn = _canon(source.this, self.dialect)
                return exp.Var(this=f"<{fn}>#{index}")
            physical = source.name.casefold()
            if physical not in self.schema:
                raise _Unattributable(f"{source.name!r} is not a published table")
            if name not in self.schema[physical]:
                raise _Unattributable(f"{physical} has no column {name!r}")
            return exp.column(name, table=physical)
        if isinstance(source, Scope):
            return self.output(source, name)
        raise _Unattributable(f"the source {table!r} cannot be attributed")

    def output(self, source: Scope, name: str) -> exp.Expr:
        """What output column ``name`` of a derived scope (CTE, derived table) stands for."""
        key = (id(source), name)
        if key in self.outputs:
            return self.outputs[key].copy()
        node = source.expression
        if isinstance(node, exp.Select):
            found = [p for p in node.expressions if p.alias_or_name.casefold() == name]
            if len(found) != 1:
                raise _Unattributable(f"the derived column {name!r} cannot be attributed")
            resolved = self.inline(source, found[0].unalias(), role="scalar")
        elif isinstance(node, exp.SetOperation):
            names = [n.casefold() for n in node.named_selects]
            if name not in names:
                raise _Unattributable(f"the derived column {name!r} cannot be attributed")
            index = names.index(name)
            parts = [self.branch_output(b, index) for b in source.set_operation_scopes]
            resolved = exp.Anonymous(this="SET_COLUMN", expressions=parts)
        else:
            raise _Unattributable(f"the derived column {name!r} cannot be attributed")
        self.outputs[key] = resolved
        return resolved.copy()

    def branch_output(self, branch: Scope, index: int) -> exp.Expr:
        node = branch.expression
        if isinstance(node, exp.SetOperation):
            parts = [self.branch_output(b, index) for b in branch.set_operation_scopes]
            return exp.Anonymous(this="SET_COLUMN", expressions=parts)
        if not isinstance(node, exp.Select) or index >= len(node.expressions):
            raise _Unattributable("a set operation branch cannot be attributed")
        return self.inline(branch, node.expressions[index].unalias(), role="scalar")

    def scope_of(self, query: exp.Expr) -> Scope:
        found = self.scopes.get(id(query))
        if found is None:
            raise _Unattributable(f"the subquery {query.sql(self.dialect)[:60]!r} has no scope")
        return found

    def scope_tables(self, scope: Scope) -> frozenset[str]:
        """Every table (physical, or a table function) a scope reads, through its sources."""
        cached = self.source_tables.get(id(scope))
        if cached is not None:
            return cached
        out: set[str] = set()
        if isinstance(scope.expression, exp.SetOperation):
            for b in scope.set_operation_scopes:
                out |= self.scope_tables(b)
        else:
            for alias in scope.selected_sources:
                out |= self.alias_tables(scope, alias)
        result = frozenset(out)
        self.source_tables[id(scope)] = result
        return result

    def alias_tables(self, scope: Scope, alias: str) -> frozenset[str]:
        source = scope.sources.get(alias)
        if isinstance(source, exp.Table):
            if _is_function(source):
                fn = source.this
                return frozenset({f"<{fn.sql_name() if isinstance(fn, exp.Func) else 'function'}>"})
            return frozenset({source.name.casefold()})
        if isinstance(source, Scope):
            return self.scope_tables(source)
        raise _Unattributable(f"the source {alias!r} cannot be attributed")

    def unit_tables(self, scope: Scope, unit: _Unit) -> frozenset[str]:
        return frozenset(set().union(*(self.alias_tables(scope, a) for a in unit.aliases)))


@dataclass(eq=False)
class _Unit:
    """One item of a FROM clause: its aliases, how it is joined, its ON conjuncts."""

    aliases: set[str]
    kind: str
    conditions: list[exp.Expr]
    inner_conditions: list[exp.Expr] = field(default_factory=list)


# ----------------------------------------------------------------- helpers


def _passthrough(scope: Scope, node: exp.Select) -> Scope | None:
    """The derived source a SELECT only passes on whole (``SELECT * FROM w``: every column
    of one CTE or derived table, nothing else), else None."""
    from_ = node.args.get("from_") or node.args.get("from")
    if (
        from_ is None
        or len(scope.sources) != 1
        or any(
            node.args.get(k)
            for k in ("joins", "where", "group", "having", "qualify", "order", "limit", "offset")
        )
    ):
        return None
    if node.args.get("distinct") is not None:
        return None
    ((alias, source),) = scope.sources.items()
    if not isinstance(source, Scope) or not isinstance(source.expression, exp.Query):
        return None
    columns = [p.unalias() for p in node.expressions]
    if not all(isinstance(c, exp.Column) and c.table == alias for c in columns):
        return None
    names = [c.name.casefold() for c in columns]
    wanted = [n.casefold() for n in source.expression.named_selects]
    return source if sorted(names) == sorted(wanted) and len(set(names)) == len(names) else None


def _is_function(table: exp.Table) -> bool:
    return not isinstance(table.this, exp.Identifier)


def _conjuncts(node: exp.Expr | None) -> Iterable[exp.Expr]:
    if node is None:
        return
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _between_parts(c: exp.Expr) -> list[exp.Expr]:
    """``a BETWEEN x AND y`` as ``a >= x`` and ``a <= y``; any other conjunct as itself."""
    if isinstance(c, exp.Between):
        return [
            exp.GTE(this=c.this.copy(), expression=c.args["low"].copy()),
            exp.LTE(this=c.this.copy(), expression=c.args["high"].copy()),
        ]
    return [c]


def _aliases(node: exp.Expr) -> set[str]:
    """The qualifiers of the columns of ``node`` outside nested queries."""
    if isinstance(node, exp.Column):
        return {node.table} if node.table else set()
    return {c.table for c in _own_columns(node) if c.table}


#: A query inside an expression (a Subquery node wraps one of these).
_QUERY = (exp.Select, exp.SetOperation)


def _own_columns(node: exp.Expr) -> Iterable[exp.Column]:
    for n in node.walk(prune=lambda x: isinstance(x, _QUERY) and x is not node):
        if isinstance(n, exp.Column):
            yield n


_PROTECTING = (
    exp.Coalesce,
    exp.Case,
    exp.If,
    exp.Is,
    exp.Or,
    exp.Not,
    exp.Select,
    exp.SetOperation,
)


def _strict_aliases(c: exp.Expr) -> set[str]:
    """Sources a predicate null-rejects: the qualifiers of columns compared directly (a
    comparison, IN list, LIKE, BETWEEN or IS NOT NULL), not under COALESCE, CASE, OR, IS."""
    if (
        isinstance(c, exp.Not)
        and isinstance(c.this, exp.Is)
        and isinstance(c.this.expression, exp.Null)
    ):
        return _aliases(c.this.this)
    if not isinstance(
        c, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.In, exp.Between)
    ):
        return set()
    out: set[str] = set()
    for n in c.walk(prune=lambda x: isinstance(x, _PROTECTING)):
        if isinstance(n, exp.Column) and n.table:
            out.add(n.table)
    return out


def _has_query(node: exp.Expr) -> bool:
    return node.find(*_QUERY) is not None


def _has_measure(node: exp.Expr) -> bool:
    return node.find(exp.AggFunc, exp.Window) is not None


def _own_aggregate(node: exp.Expr) -> bool:
    """An aggregate of this SELECT (not inside a window or a subquery)."""
    for n in node.walk(prune=lambda x: isinstance(x, (*_QUERY, exp.Window))):
        if isinstance(n, exp.AggFunc):
            return True
    return False


def _maximal_queries(node: exp.Expr) -> Iterable[exp.Expr]:
    for n in node.walk(prune=lambda x: isinstance(x, _QUERY) and x is not node):
        if isinstance(n, _QUERY) and n is not node:
            yield n


def _tables_in(node: exp.Expr) -> set[str]:
    return {c.table for c in node.find_all(exp.Column) if c.table}


def _shape(node: exp.Expr) -> exp.Expr:
    """The expression with every measure replaced by a placeholder: a measure is a maximal
    subexpression built from aggregates or windows and literals only (``SUM(a) / SUM(b)``,
    ``COALESCE(SUM(a), 0)``), so a predicate keeps its shape whatever it measures."""
    copy = node.copy()
    if _is_measure(copy):
        return exp.Var(this=_MEASURE)
    targets = [n for n in copy.walk(prune=_is_measure) if n is not copy and _is_measure(n)]
    for n in targets:
        n.replace(exp.Var(this=_MEASURE))
    return copy


def _is_measure(node: exp.Expr) -> bool:
    """Holds an aggregate or window, and no column outside one (nor a comparison)."""
    if isinstance(node, (exp.AggFunc, exp.Window)):
        return True
    if (
        isinstance(node, (exp.Predicate, exp.Connector, exp.Not))
        or node.find(exp.AggFunc, exp.Window) is None
    ):
        return False
    stack = list(node.iter_expressions())
    while stack:
        n = stack.pop()
        if isinstance(n, (exp.AggFunc, exp.Window)):
            continue
        if isinstance(n, exp.Column):
            return False
        stack.extend(n.iter_expressions())
    return True


# ----------------------------------------------------------------- canonical text

_FLIP: dict[type[exp.Expr], type[exp.Binary]] = {
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.GTE: exp.LTE,
    exp.LTE: exp.GTE,
}


def _canon(node: exp.Expr, dialect: str) -> str:
    """Canonical text: literals, comparison direction and operand order normalised."""
    tree = _normalise(node.copy(), dialect)
    return tree.sql(dialect=dialect)


def _normalise(node: exp.Expr, dialect: str) -> exp.Expr:
    for child in list(node.iter_expressions()):
        new = _normalise(child, dialect)
        if new is not child:
            child.replace(new)
    return _normalise_node(node, dialect)


def _normalise_node(node: exp.Expr, dialect: str) -> exp.Expr:
    if isinstance(node, (exp.Paren, exp.Alias)):
        inner: exp.Expr = node.this
        return inner
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = Decimal(node.this)
        except InvalidOperation:
            return node
        text = format(value.normalize(), "f")
        return exp.Literal.number("0" if text == "-0" else text)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        kind = _TEMPORAL.get(node.to.this) if isinstance(node.to, exp.DataType) else None
        if kind is not None:
            moment = _temporal(node.this.this, kind)
            if moment is not None:
                return exp.Cast(this=exp.Literal.string(moment), to=node.to.copy())
        return node
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, (exp.Literal, exp.Star)):
            return exp.Count(this=exp.Star())
        return node
    if isinstance(node, exp.Between):
        return _sorted_connective(
            exp.And,
            [
                _normalise_node(
                    exp.GTE(this=node.this.copy(), expression=node.args["low"]), dialect
                ),
                _normalise_node(
                    exp.LTE(this=node.this.copy(), expression=node.args["high"]), dialect
                ),
            ],
            dialect,
        )
    flipped = _FLIP.get(type(node)) if isinstance(node, exp.Binary) else None
    if flipped is not None:
        a, b = node.this, node.expression
        if _operand_key(a, dialect) > _operand_key(b, dialect):
            return flipped(this=b, expression=a)
        return node
    if isinstance(node, (exp.EQ, exp.NEQ, exp.NullSafeEQ)):
        a, b = node.this, node.expression
        if isinstance(node, exp.EQ):
            if isinstance(b, exp.Boolean) and b.this is True:
                return a  # type: ignore[no-any-return]
            if isinstance(a, exp.Boolean) and a.this is True:
                return b  # type: ignore[no-any-return]
        if _operand_key(a, dialect) > _operand_key(b, dialect):
            return type(node)(this=b, expression=a)
        return node
    if isinstance(node, (exp.And, exp.Or)):
        return _sorted_connective(type(node), _flatten(node, type(node)), dialect)
    if isinstance(node, (exp.Add, exp.Mul)):
        operands = sorted(_flatten(node, type(node)), key=lambda e: e.sql(dialect))
        out = operands[0]
        for e in operands[1:]:
            out = type(node)(this=out, expression=e)
        return out
    if isinstance(node, exp.In) and node.expressions and not node.args.get("query"):
        node.set("expressions", sorted(node.expressions, key=lambda e: e.sql(dialect)))
        return node
    return node


def _operand_key(node: exp.Expr, dialect: str) -> tuple[bool, str]:
    """Operands with columns sort before constants (``col >= 5``), then by their text."""
    return (node.find(exp.Column, exp.Var) is None, node.sql(dialect))


def _flatten(node: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    if isinstance(node, kind):
        return _flatten(node.this, kind) + _flatten(node.expression, kind)
    return [node]


def _sorted_connective(kind: type[exp.Expr], parts: list[exp.Expr], dialect: str) -> exp.Expr:
    flat: list[exp.Expr] = []
    for p in parts:
        flat.extend(_flatten(p, kind))
    unique: dict[str, exp.Expr] = {}
    for p in flat:
        unique.setdefault(p.sql(dialect), p)
    ordered = [unique[k] for k in sorted(unique)]
    out = ordered[0]
    for e in ordered[1:]:
        out = kind(this=out, expression=e)
    return out


def _temporal(text: str, kind: str) -> str | None:
    """A DATE / TIMESTAMP / TIMESTAMPTZ literal in one canonical form (None: unparsed)."""
    try:
        value = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if kind == "date":
        if value.time() != _dt.time(0) or value.tzinfo is not None:
            return None
        return value.date().isoformat()
    if kind == "timestamptz":
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)  # the session zone is UTC
        return value.astimezone(_dt.UTC).isoformat(sep=" ", timespec="microseconds")
    if value.tzinfo is not None:
        return None
    return value.isoformat(sep=" ", timespec="microseconds")
