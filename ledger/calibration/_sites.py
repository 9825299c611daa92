"""Site finders of the mutation operators: where each error pattern can be planted, and how.

Each finder gets the original tree and a Scope and yields ``(description,
edit)``; the edit receives a fresh copy's nodes (same walk order) and changes
them. Finders never mutate the tree they are given.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp
from sqlglot.errors import SqlglotError

from ledger.calibration.rewrite import (
    Edit,
    Scope,
    conjuncts,
    drop_conjunct,
    is_constant,
    is_validity_column,
    nodes,
)
from ledger.harness.guard import fold

Sites = Iterator[tuple[str, Edit]]
_TIME = ("timestamp", "date")
# Keyed by a node's exact class, so the key type is the base node class.
_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.GTE,
    exp.GTE: exp.GT,
    exp.LT: exp.LTE,
    exp.LTE: exp.LT,
}
_SYMBOL: dict[type[exp.Expr], str] = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}


def _index(tree: exp.Expr) -> dict[int, int]:
    return {id(n): i for i, n in enumerate(nodes(tree))}


def _root(ns: list[exp.Expr]) -> exp.Expr:
    return ns[0]  # no operator replaces the root statement itself


def _predicates(tree: exp.Expr) -> Iterator[exp.Expr]:
    """Conjuncts of every WHERE, HAVING and JOIN ... ON of the tree."""
    for node in nodes(tree):
        if isinstance(node, exp.Where | exp.Having):
            yield from conjuncts(node)
        elif isinstance(node, exp.Join) and node.args.get("on") is not None:
            yield from conjuncts(node.args["on"])


def _columns(node: exp.Expr) -> list[exp.Column]:
    """Columns of a condition itself, not those inside a subquery it contains."""
    if isinstance(node, exp.Column):
        return [node]
    return [
        c
        for c in node.find_all(exp.Column)
        if not any(isinstance(a, exp.Select) and a is not node for a in _ancestors(c, node))
    ]


def _ancestors(node: exp.Expr, stop: exp.Expr) -> list[exp.Expr]:
    out, cur = [], node.parent
    while cur is not None and cur is not stop:
        out.append(cur)
        cur = cur.parent
    return out


def _is_join_equality(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.EQ)
        and isinstance(node.this, exp.Column)
        and isinstance(node.expression, exp.Column)
    )


def _dropper(i: int) -> Edit:
    def edit(ns: list[exp.Expr]) -> exp.Expr:
        if not drop_conjunct(ns[i]):
            raise SqlglotError("the condition cannot be dropped")
        return _root(ns)

    return edit


def time_column_swap(tree: exp.Expr, scope: Scope) -> Iterator[tuple[str, Edit]]:
    """Every use of a time column ``t.c`` becomes another time column of ``t`` (same class)."""
    idx = _index(tree)
    uses: dict[tuple[str, str], list[int]] = {}
    for col in tree.find_all(exp.Column):
        where = scope.resolve(col)
        if where and scope.schema[where[0]][where[1]] in _TIME:
            uses.setdefault(where, []).append(idx[id(col)])
    for (table, column), positions in uses.items():
        cls = scope.schema[table][column]
        for other, other_cls in scope.schema[table].items():
            if other == column or other_cls != cls:
                continue

            def edit(ns: list[exp.Expr], pos: list[int] = positions, new: str = other) -> exp.Expr:
                for p in pos:
                    ns[p].set("this", exp.to_identifier(new))
                return _root(ns)

            yield f"{table}.{column} read as {table}.{other}", edit


def count_distinct_dropped(tree: exp.Expr, scope: Scope) -> Sites:
    """COUNT(DISTINCT x) becomes COUNT(*), and COUNT(x) when x is one expression."""
    idx = _index(tree)
    for count in tree.find_all(exp.Count):
        if not isinstance(count.this, exp.Distinct):
            continue
        i = idx[id(count)]
        args = count.this.expressions

        def star(ns: list[exp.Expr], i: int = i) -> exp.Expr:
            ns[i].set("this", exp.Star())
            return _root(ns)

        yield "COUNT(DISTINCT ...) counted as COUNT(*)", star
        if len(args) == 1:

            def plain(ns: list[exp.Expr], i: int = i) -> exp.Expr:
                ns[i].set("this", ns[i].this.expressions[0])
                return _root(ns)

            yield "COUNT(DISTINCT x) counted as COUNT(x)", plain


def _validity(part: exp.Expr) -> bool:
    if _is_join_equality(part):
        return False
    return any(is_validity_column(c.name) for c in _columns(part))


def drop_validity_predicate(tree: exp.Expr, scope: Scope) -> Sites:
    """Drop a condition on a validity / status / refund column (one site per condition)."""
    idx = _index(tree)
    for part in _predicates(tree):
        if _validity(part):
            yield f"dropped {part.sql(dialect='duckdb')}", _dropper(idx[id(part)])


def drop_scope_predicate(tree: exp.Expr, scope: Scope) -> Sites:
    """Drop ``dim = constant`` / ``dim IN (...)`` on a non-time, non-validity column."""
    idx = _index(tree)
    for part in _predicates(tree):
        if isinstance(part, exp.EQ):
            sides = (part.this, part.expression)
        elif isinstance(part, exp.In) and not part.args.get("query"):
            sides = (part.this, *part.expressions)
        else:
            continue
        cols = [s for s in sides if isinstance(s, exp.Column)]
        if len(cols) != 1 or not all(is_constant(s) for s in sides if s is not cols[0]):
            continue
        if is_validity_column(cols[0].name) or scope.type_of(cols[0]) in _TIME:
            continue
        yield f"dropped {part.sql(dialect='duckdb')}", _dropper(idx[id(part)])


def move_range_endpoint(tree: exp.Expr, scope: Scope) -> Sites:
    """``<`` <-> ``<=`` and ``>`` <-> ``>=`` on each comparison; BETWEEN made half-open twice."""
    idx = _index(tree)
    for node in nodes(tree):
        if type(node) in _FLIP and not (
            isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Column)
        ):
            i, new = idx[id(node)], _FLIP[type(node)]

            def flip(ns: list[exp.Expr], i: int = i, new: type[exp.Expr] = new) -> exp.Expr:
                old = ns[i]
                old.replace(new(this=old.this, expression=old.expression))
                return _root(ns)

            yield f"{_SYMBOL[type(node)]} made {_SYMBOL[new]}: {node.sql('duckdb')}", flip
        elif isinstance(node, exp.Between):
            i = idx[id(node)]
            for low_open in (True, False):

                def half(ns: list[exp.Expr], i: int = i, low_open: bool = low_open) -> exp.Expr:
                    b = ns[i]
                    lo = (exp.GT if low_open else exp.GTE)(
                        this=b.this.copy(), expression=b.args["low"]
                    )
                    hi = (exp.LTE if low_open else exp.LT)(this=b.this, expression=b.args["high"])
                    b.replace(exp.paren(exp.and_(lo, hi), copy=False))
                    return _root(ns)

                side = "low end excluded" if low_open else "high end excluded"
                yield f"BETWEEN with the {side}: {node.sql('duckdb')}", half


def _offset_literal(node: exp.Expr) -> bool:
    if not isinstance(node, exp.Cast) or not isinstance(node.this, exp.Literal):
        return False
    if not node.to.is_type(exp.DataType.Type.TIMESTAMPTZ):
        return False
    text = node.this.this.strip()
    return text.endswith("Z") or (len(text) > 6 and text[-6] in "+-" and text[-3] == ":")


def drop_timezone(tree: exp.Expr, scope: Scope) -> Sites:
    """Remove an AT TIME ZONE / timezone() conversion, or the offsets of TIMESTAMPTZ literals."""
    idx = _index(tree)
    for node in nodes(tree):
        is_call = isinstance(node, exp.Anonymous) and fold(node.name) == "timezone"
        if isinstance(node, exp.AtTimeZone) or (is_call and len(node.expressions) == 2):
            i = idx[id(node)]

            def unwrap(ns: list[exp.Expr], i: int = i) -> exp.Expr:
                inner = ns[i].this if isinstance(ns[i], exp.AtTimeZone) else ns[i].expressions[1]
                ns[i].replace(inner)
                return _root(ns)

            yield f"dropped the conversion {node.sql('duckdb')}", unwrap
    literals = [idx[id(n)] for n in nodes(tree) if _offset_literal(n)]
    if literals:

        def strip(ns: list[exp.Expr], pos: list[int] = literals) -> exp.Expr:
            for p in pos:
                text = ns[p].this.this.strip()
                bare = text[:-1] if text.endswith("Z") else text[:-6]
                ns[p].this.set("this", bare)
            return _root(ns)

        yield "TIMESTAMPTZ literals without their UTC offset (read in the UTC session)", strip


def join_key_swap(tree: exp.Expr, scope: Scope) -> Sites:
    """``a.k = b.k`` joined on a shared other column, or one side on another ``*_id`` column."""
    idx = _index(tree)
    for node in nodes(tree):
        if not _is_join_equality(node):
            continue
        left, right = scope.resolve(node.this), scope.resolve(node.expression)
        if left is None or right is None or node.this.table == node.expression.table:
            continue
        lcols, rcols = scope.schema[left[0]], scope.schema[right[0]]
        li, ri = idx[id(node.this)], idx[id(node.expression)]
        options: list[tuple[str, int, str, int | None, str]] = []
        for name in lcols:
            if left[0] == right[0] or name not in rcols or name in (left[1], right[1]):
                continue
            if lcols[name] == rcols[name]:
                options.append(
                    (f"joined on {name} instead of {left[1]}/{right[1]}", li, name, ri, name)
                )
        sides = ((li, left, right, node.this), (ri, right, left, node.expression))
        for pos, (table, col), other, ref in sides:
            want = scope.schema[other[0]][other[1]]
            for name, cls in scope.schema[table].items():
                if name != col and cls == want and (name == "id" or name.endswith("_id")):
                    options.append(
                        (f"{ref.sql('duckdb')} replaced by {name} of {table}", pos, name, None, "")
                    )
        for desc, p1, n1, p2, n2 in options:

            def edit(
                ns: list[exp.Expr],
                p1: int = p1,
                n1: str = n1,
                p2: int | None = p2,
                n2: str = n2,
            ) -> exp.Expr:
                ns[p1].set("this", exp.to_identifier(n1))
                if p2 is not None:
                    ns[p2].set("this", exp.to_identifier(n2))
                return _root(ns)

            yield desc, edit


def _exists_sites(tree: exp.Expr, idx: dict[int, int]) -> Sites:
    for node in nodes(tree):
        if not isinstance(node, exp.Exists) or isinstance(node.parent, exp.Not):
            continue
        sub = node.this
        source = sub.args.get("from_")
        if not isinstance(sub, exp.Select) or source is None or sub.args.get("joins"):
            continue
        if not isinstance(source.this, exp.Table) or sub.args.get("where") is None:
            continue
        if not isinstance(node.parent, exp.And | exp.Where):
            continue
        i = idx[id(node)]

        def edit(ns: list[exp.Expr], i: int = i) -> exp.Expr:
            ex = ns[i]
            outer = next(Scope({}, frozenset()).selects_around(ex))
            sub = ex.this
            join = exp.Join(this=sub.args["from_"].this, on=sub.args["where"].this)
            if not drop_conjunct(ex):
                raise SqlglotError("EXISTS cannot be removed")
            outer.append("joins", join)
            return _root(ns)

        yield "EXISTS (...) written as a plain JOIN (rows repeat per match)", edit


def _unaggregate_sites(tree: exp.Expr, idx: dict[int, int]) -> Sites:
    joined = {fold(j.this.name) for j in tree.find_all(exp.Join) if isinstance(j.this, exp.Table)}
    for cte in tree.find_all(exp.CTE):
        body = cte.this
        if fold(cte.alias) not in joined or not isinstance(body, exp.Select):
            continue
        if not body.args.get("group") or body.args.get("joins") or body.args.get("having"):
            continue
        aggs = [a for a in body.find_all(exp.AggFunc) if not isinstance(a.parent, exp.Window)]
        if not aggs or not all(isinstance(a, exp.Sum | exp.Min | exp.Max) for a in aggs):
            continue
        i = idx[id(body)]

        def edit(ns: list[exp.Expr], i: int = i) -> exp.Expr:
            sel = ns[i]
            for agg in list(sel.find_all(exp.Sum, exp.Min, exp.Max)):
                agg.replace(agg.this)
            sel.set("group", None)
            return _root(ns)

        yield f"pre-aggregation of {cte.alias} removed (joined row by row)", edit


def one_to_many_join(tree: exp.Expr, scope: Scope) -> Sites:
    """EXISTS made a JOIN; a GROUP BY CTE that is joined made row-level."""
    idx = _index(tree)
    yield from _exists_sites(tree, idx)
    yield from _unaggregate_sites(tree, idx)


def join_type_swap(tree: exp.Expr, scope: Scope) -> Sites:
    """Each INNER JOIN ... ON made LEFT, each LEFT JOIN made INNER."""
    idx = _index(tree)
    for join in tree.find_all(exp.Join):
        side, kind = join.side.upper(), join.kind.upper()
        if kind in ("CROSS", "SEMI", "ANTI", "ASOF") or join.args.get("on") is None:
            continue
        if side not in ("", "LEFT"):
            continue
        i, new = idx[id(join)], "" if side == "LEFT" else "LEFT"

        def edit(ns: list[exp.Expr], i: int = i, new: str = new) -> exp.Expr:
            ns[i].set("side", new or None)
            ns[i].set("kind", None)
            return _root(ns)

        yield f"{side or 'INNER'} JOIN {join.this.sql('duckdb')} made {new or 'INNER'}", edit


def remove_distinct(tree: exp.Expr, scope: Scope) -> Sites:
    """SELECT DISTINCT made SELECT."""
    idx = _index(tree)
    for sel in tree.find_all(exp.Select):
        if sel.args.get("distinct"):
            i = idx[id(sel)]

            def edit(ns: list[exp.Expr], i: int = i) -> exp.Expr:
                ns[i].set("distinct", None)
                return _root(ns)

            yield "DISTINCT removed", edit


def reverse_order(tree: exp.Expr, scope: Scope) -> Sites:
    """One ORDER BY key (of the query or a window) sorted the other way."""
    idx = _index(tree)
    for node in tree.find_all(exp.Ordered):
        i = idx[id(node)]

        def edit(ns: list[exp.Expr], i: int = i) -> exp.Expr:
            ns[i].set("desc", None if ns[i].args.get("desc") else True)
            return _root(ns)

        yield f"ORDER BY {node.this.sql('duckdb')} reversed", edit


def drop_tie_breaker(tree: exp.Expr, scope: Scope) -> Sites:
    """The last key of an ORDER BY with two or more keys dropped."""
    idx = _index(tree)
    for order in tree.find_all(exp.Order):
        if len(order.expressions) >= 2:
            i = idx[id(order.expressions[-1])]

            def edit(ns: list[exp.Expr], i: int = i) -> exp.Expr:
                ns[i].pop()
                return _root(ns)

            yield f"tie-breaker {order.expressions[-1].this.sql('duckdb')} dropped", edit


def change_limit(tree: exp.Expr, scope: Scope) -> Sites:
    """LIMIT n made n+1, and n-1 when n > 1."""
    idx = _index(tree)
    for limit in tree.find_all(exp.Limit):
        value = limit.expression
        if not isinstance(value, exp.Literal) or value.is_string or not value.this.isdigit():
            continue
        n, i = int(value.this), idx[id(value)]
        for new in (n + 1, n - 1) if n > 1 else (n + 1,):

            def edit(ns: list[exp.Expr], i: int = i, new: int = new) -> exp.Expr:
                ns[i].replace(exp.Literal.number(new))
                return _root(ns)

            yield f"LIMIT {n} made {new}", edit
