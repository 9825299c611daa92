"""The slicer's reading of SQL: query helpers over sqlglot trees and a canonical text.

Part of ``ledger.harness.slices``: what the signature of a query is made of (its
conjuncts, aliases, measures, maximal subqueries, tables) and the canonical text two
expressions are compared by (operands sorted, comparisons flipped one way, temporal
literals typed), so that a rewrite that means the same is not a divergence.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

_MEASURE = "<measure>"
_TEMPORAL = {
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPNTZ: "timestamp",
    exp.DataType.Type.DATETIME: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
}


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
