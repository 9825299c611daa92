"""AST capability rules over the model's SQL (sqlglot, DuckDB dialect), and structural match.

Each rule is one small predicate over the parsed tree (DESIGN.md fine print):

==================== ====================================================
rule                 passes when the query contains
==================== ====================================================
window_function      any ``OVER`` (a window function call)
cte                  any ``WITH``
not_exists           ``NOT EXISTS (...)`` (``NOT IN`` does not count)
correlated_subquery  a subquery that references a column of an enclosing
                     query, through that query's table or alias name (a
                     correlated ``EXISTS`` counts)
left_join            ``LEFT [OUTER] JOIN`` (not LEFT SEMI / LEFT ANTI)
group_by             ``GROUP BY``
having               ``HAVING``
distinct_count       ``COUNT(DISTINCT ...)``
case_when            a ``CASE`` expression
set_operation        ``UNION [ALL]``, ``INTERSECT`` or ``EXCEPT``
==================== ====================================================

SQL that does not parse passes no rule. An unknown rule name is a bank
error: the bank loader checks names against :data:`KNOWN_RULES`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from ledger.errors import BankError
from ledger.events import AstRule
from ledger.harness import sqlparse

__all__ = ["KNOWN_RULES", "RULES", "check_rules", "structural_match", "validate_rules"]

DIALECT = "duckdb"

E = TypeVar("E", bound=exp.Expr)


def _window_function(tree: exp.Expr) -> bool:
    return tree.find(exp.Window) is not None


def _cte(tree: exp.Expr) -> bool:
    return tree.find(exp.With) is not None


def _not_exists(tree: exp.Expr) -> bool:
    for node in tree.find_all(exp.Not):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Exists):
            return True
    return False


def _outer_sources(scope: Scope) -> set[str]:
    names: set[str] = set()
    parent = scope.parent
    while parent is not None:
        names.update(parent.sources)
        parent = parent.parent
    return names


def _correlated_subquery(tree: exp.Expr) -> bool:
    # A column qualified with a name that is not a source of its own scope but is one
    # of an enclosing scope. Unqualified columns cannot be resolved without the
    # schema, so they never count (sqlglot would call them "external" by default).
    for scope in traverse_scope(tree):
        if not scope.can_be_correlated:
            continue
        outer = _outer_sources(scope)
        for column in scope.external_columns:
            if column.table and column.table in outer:
                return True
    return False


def _left_join(tree: exp.Expr) -> bool:
    return any(
        j.side.upper() == "LEFT" and j.kind.upper() in ("", "OUTER")
        for j in tree.find_all(exp.Join)
    )


def _group_by(tree: exp.Expr) -> bool:
    return tree.find(exp.Group) is not None


def _having(tree: exp.Expr) -> bool:
    return tree.find(exp.Having) is not None


def _distinct_count(tree: exp.Expr) -> bool:
    return any(isinstance(c.this, exp.Distinct) for c in tree.find_all(exp.Count))


def _case_when(tree: exp.Expr) -> bool:
    return tree.find(exp.Case) is not None


def _set_operation(tree: exp.Expr) -> bool:
    return tree.find(exp.SetOperation) is not None


RULES: dict[str, Callable[[exp.Expr], bool]] = {
    "window_function": _window_function,
    "cte": _cte,
    "not_exists": _not_exists,
    "correlated_subquery": _correlated_subquery,
    "left_join": _left_join,
    "group_by": _group_by,
    "having": _having,
    "distinct_count": _distinct_count,
    "case_when": _case_when,
    "set_operation": _set_operation,
}
KNOWN_RULES: frozenset[str] = frozenset(RULES)


def validate_rules(rules: Sequence[str], *, where: str) -> None:
    """Raise BankError naming ``where`` (e.g. ``cases.yaml case r07``) for an unknown rule."""
    unknown = sorted(set(rules) - KNOWN_RULES)
    if unknown:
        raise BankError(
            f"{where}: unknown required_ast rule(s) {unknown}",
            hint=f"use only {sorted(KNOWN_RULES)}",
        )


def _parse(sql: str, dialect: str = DIALECT) -> exp.Expr | None:
    try:
        trees = sqlparse.parse(sql, dialect)
    except SqlglotError:
        return None
    found = [t for t in trees if t is not None]
    return found[0] if len(found) == 1 else None


def check_rules(sql: str, rules: Sequence[str], dialect: str = DIALECT) -> tuple[AstRule, ...]:
    """Each required rule and whether the SQL has it, in the order given.

    Raises:
        BankError: a rule name outside :data:`KNOWN_RULES` (fail closed).

    >>> [(r.rule, r.passed) for r in check_rules(
    ...     "SELECT a FROM t WHERE a NOT IN (SELECT b FROM u)", ["not_exists", "cte"])]
    [('not_exists', False), ('cte', False)]
    """
    validate_rules(rules, where="required_ast")
    tree = _parse(sql, dialect)
    return tuple(AstRule(rule=r, passed=tree is not None and RULES[r](tree)) for r in rules)


def _of(nodes: list[exp.Expr], kind: type[E]) -> Iterator[E]:
    return (node for node in nodes if isinstance(node, kind))


@functools.lru_cache(maxsize=512)
def _canonical(sql: str, dialect: str = DIALECT) -> str | None:
    """The SQL after normalisation, or None when it does not parse (see structural_match).

    Cached: every attempt of a case compares with the same reference SQL, and the
    result is an immutable string.
    """
    tree = _parse(sql, dialect)
    if tree is None:
        return None
    # A copy (the parse is shared), with its nodes in walk() order: every renaming below
    # only swaps a leaf (an identifier) for another, so the nodes of each kind are the
    # ones find_all() would yield, in its order, without walking the tree five times.
    tree, nodes = sqlparse.copy_tree(tree)
    # 1. identifiers casefolded, quoted or not (as result column names are compared)
    for ident in _of(nodes, exp.Identifier):
        ident.set("this", ident.name.casefold())
        ident.set("quoted", False)
    # 2. table, subquery and CTE aliases renamed t1, t2, ... in order of appearance,
    #    and every qualifier that used them follows
    renames: dict[str, str] = {}
    for table_alias in _of(nodes, exp.TableAlias):
        if table_alias.name and table_alias.name not in renames:
            renames[table_alias.name] = f"t{len(renames) + 1}"
        if table_alias.name:
            table_alias.set("this", exp.to_identifier(renames[table_alias.name]))
    for table in _of(nodes, exp.Table):
        if not table.args.get("alias") and table.name in renames:
            table.set("this", exp.to_identifier(renames[table.name]))  # a CTE reference
    # 3. output column aliases renamed c1, c2, ...; bare references to them follow
    outputs: dict[str, str] = {}
    for alias in _of(nodes, exp.Alias):
        if alias.alias and alias.alias not in outputs:
            outputs[alias.alias] = f"c{len(outputs) + 1}"
        if alias.alias:
            alias.set("alias", exp.to_identifier(outputs[alias.alias]))
    for column in _of(nodes, exp.Column):
        if column.table and column.table in renames:
            column.set("table", exp.to_identifier(renames[column.table]))
        elif not column.table and column.name in outputs:
            column.set("this", exp.to_identifier(outputs[column.name]))
    # 4. whitespace and keyword case: regenerated by one generator (the copy is ours:
    #    the generator may change it instead of copying it once more)
    try:
        return Dialect.get_or_raise(dialect).generate(tree, copy=False, normalize=True)
    except SqlglotError:  # read but not writable (DuckDB's `date()` without its argument)
        return None


def structural_match(sql: str, reference_sql: str, dialect: str = DIALECT) -> bool:
    """True when two queries are equal after sqlglot normalisation (auxiliary, never scored).

    Normalised: keyword case and whitespace (both regenerated by sqlglot's
    DuckDB generator), identifier case and quoting (casefolded), table/CTE
    aliases (renamed ``t1, t2, ...`` by first appearance) and output column
    aliases (``c1, c2, ...``). Anything else (join order, predicate order,
    ``COUNT(*)`` vs ``COUNT(1)``) still differs. Unparseable SQL never matches.

    >>> structural_match("select O.id AS x from orders o", 'SELECT "o".ID  total FROM Orders AS o')
    True
    >>> structural_match("SELECT 1", "SELECT 2")
    False
    """
    left, right = _canonical(sql, dialect), _canonical(reference_sql, dialect)
    return left is not None and left == right
