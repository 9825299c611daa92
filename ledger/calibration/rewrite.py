"""AST helpers for the mutation operators: column resolution, conjuncts, node addressing.

Pure functions over sqlglot trees (DuckDB dialect). A mutation is addressed by
the position of a node in ``tree.walk()`` order, which ``tree.copy()``
preserves, so an operator can look at the original tree and edit a fresh copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp

from ledger.harness.guard import fold

__all__ = [
    "Edit",
    "Schema",
    "Scope",
    "conjuncts",
    "drop_conjunct",
    "is_constant",
    "is_validity_column",
    "nodes",
]

# table -> column -> type class (ledger.engines.cells.type_class), names folded.
Schema = dict[str, dict[str, str]]
# Receives the copy's nodes in walk order, edits them in place, returns the new root.
Edit = Callable[[list[exp.Expr]], exp.Expr]

# Column names that carry a validity / status / refund rule (pattern 3), folded.
_VALIDITY = re.compile(r"valid|status|state|active|refund|cancel|delet|enabled|flag|^is_")


def nodes(tree: exp.Expr) -> list[exp.Expr]:
    """Every node of ``tree`` in walk order (the addressing used by edits)."""
    return list(tree.walk())


def is_validity_column(name: str) -> bool:
    """True for a column name that reads like a validity, status or refund flag.

    >>> is_validity_column("valid"), is_validity_column("status"), is_validity_column("region")
    (True, True, False)
    """
    return bool(_VALIDITY.search(fold(name)))


def is_constant(node: exp.Expr) -> bool:
    """A literal, a typed literal (``TIMESTAMP '...'``), NULL, or an expression of those only."""
    if isinstance(node, exp.Column | exp.Subquery | exp.Select | exp.AggFunc | exp.Window):
        return False
    return not any(isinstance(n, exp.Column | exp.Select) for n in node.walk())


def conjuncts(where: exp.Expr | None) -> list[exp.Expr]:
    """The AND-ed parts of a WHERE / HAVING / ON condition (parentheses looked through)."""
    if where is None:
        return []
    cond = where.this if isinstance(where, exp.Where | exp.Having) else where
    out: list[exp.Expr] = []

    def walk(node: exp.Expr) -> None:
        if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
            walk(node.this)
        elif isinstance(node, exp.And):
            walk(node.this)
            walk(node.expression)
        else:
            out.append(node)

    walk(cond)
    return out


def drop_conjunct(part: exp.Expr) -> bool:
    """Remove one conjunct from its AND chain (or its whole WHERE/HAVING). False if impossible."""
    parent = part.parent
    while isinstance(parent, exp.Paren):
        part, parent = parent, parent.parent
    if isinstance(parent, exp.And):
        other = parent.expression if parent.this is part else parent.this
        parent.replace(other)
        return True
    if isinstance(parent, exp.Where | exp.Having):
        parent.pop()
        return True
    return False  # the sole condition of a JOIN ... ON: dropping it changes the join kind


@dataclass(frozen=True)
class Scope:
    """Resolves columns of one tree to published tables (None when a CTE or unknown)."""

    schema: Schema
    ctes: frozenset[str]

    @classmethod
    def of(cls, tree: exp.Expr, schema: Schema) -> Scope:
        """The scope of a parsed reference query."""
        ctes = frozenset(fold(c.alias) for c in tree.find_all(exp.CTE) if c.alias)
        return cls(schema, ctes)

    def sources(self, select: exp.Select) -> dict[str, str | None]:
        """alias -> published table (None for CTEs, subqueries and unknown names)."""
        out: dict[str, str | None] = {}
        items = [select.args.get("from_"), *(select.args.get("joins") or [])]
        for item in items:
            if item is None:
                continue
            source = item.this
            alias = fold(source.alias_or_name)
            if isinstance(source, exp.Table) and not source.args.get("db"):
                name = fold(source.name)
                out[alias] = name if name in self.schema and name not in self.ctes else None
            elif isinstance(source, exp.Table) and fold(source.text("db")) == "main":
                name = fold(source.name)
                out[alias] = name if name in self.schema else None
            else:
                out[alias] = None
        return out

    def selects_around(self, node: exp.Expr) -> Iterator[exp.Select]:
        """Enclosing SELECTs from the innermost out, stopping at a CTE boundary."""
        cur = node.parent
        while cur is not None:
            if isinstance(cur, exp.Select):
                yield cur
            if isinstance(cur, exp.CTE):
                return
            cur = cur.parent

    def resolve(self, col: exp.Column) -> tuple[str, str] | None:
        """(table, column) of a column reference, when it reads a published table."""
        name = fold(col.name)
        qualifier = fold(col.table) if col.table else None
        for select in self.selects_around(col):
            sources = self.sources(select)
            if qualifier is not None:
                if qualifier in sources:
                    table = sources[qualifier]
                    return (table, name) if table and name in self.schema[table] else None
                continue
            found = [t for t in sources.values() if t and name in self.schema[t]]
            if len(found) == 1:
                return found[0], name
            if found or any(t is None for t in sources.values()):
                return None  # ambiguous, or possibly a CTE / subquery column
        return None

    def type_of(self, col: exp.Column) -> str | None:
        """The type class of a resolved column."""
        where = self.resolve(col)
        return None if where is None else self.schema[where[0]][where[1]]
