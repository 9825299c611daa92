"""The slicer's signature of one query: its components read from the qualified tree.

Part of ``ledger.harness.slices``: :func:`_signature` qualifies a SQL text against the
bank's tables, inlines what only passes rows on, and reads each component (tables,
joins, filters, grouping, aggregates, projection, order) into a ``_Signature`` the
comparison walks; ``_Unattributable`` says why a text cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope

from ledger.errors import first_line
from ledger.harness import sqlparse
from ledger.harness.slice_text import (
    _aliases,
    _between_parts,
    _canon,
    _conjuncts,
    _has_measure,
    _has_query,
    _is_function,
    _maximal_queries,
    _own_aggregate,
    _passthrough,
    _shape,
    _strict_aliases,
    _tables_in,
)

#: Inlined expressions longer than this are not compared (a pathological CTE chain).
_MAX_EXPR_CHARS = 20_000
_SUBQUERY = "<subquery>"


class _Unattributable(Exception):
    """The SQL cannot be attributed: the slice is unknown, with this reason."""


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
        raise _Unattributable(f"does not parse: {first_line(exc)}") from None
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
            f"a column or qualifier cannot be attributed: {first_line(exc)}"
        ) from None
    if root is None:
        raise _Unattributable("no query scope")
    try:
        return _Analyzer(root, schema, dialect, order_significant).run()
    except RecursionError:
        raise _Unattributable("nested too deeply to analyse") from None


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
