"""Mutation operators: named, documented error patterns applied to a case's reference SQL.

Each operator looks at the parsed reference query (sqlglot, DuckDB dialect)
and proposes zero or more sites; each site becomes one mutant with the stable
id ``<operator>#<site>`` (sites numbered in tree walk order). Operators are
pure: they never run SQL. ``OPERATORS`` is the one list, in report order; the
numbers in ``pattern`` are the eight error patterns of the acceptance method
(docs/calibration.md has an example of each).

Two operators are not SQL rewrites: ``stale_snapshot`` (pattern 7) runs the
unchanged reference on a variant marked ``stale`` and judges it against the
base gold, and ``changed_answer_number`` (pattern 8) is always
``not_applicable`` because answers are not checked yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ledger.calibration import _sites
from ledger.calibration.rewrite import Edit, Schema, Scope, nodes
from ledger.errors import broken

__all__ = [
    "ANSWER_NOT_CHECKED",
    "DIALECT",
    "OPERATORS",
    "OPERATOR_NAMES",
    "Mutant",
    "Operator",
    "mutants_for",
    "render",
]

DIALECT = "duckdb"
ANSWER_NOT_CHECKED = "answers are not checked yet"

SiteFinder = Callable[[exp.Expr, Scope], Iterator[tuple[str, Edit]]]


@dataclass(frozen=True)
class Operator:
    """One error pattern. ``kind`` is ``sql`` (a rewrite), ``snapshot`` or ``answer``."""

    name: str
    pattern: str
    description: str
    sites: SiteFinder | None = None
    kind: str = "sql"


@dataclass(frozen=True)
class Mutant:
    """One mutant of one case, or the record that an operator did not apply.

    ``status`` is ``candidate`` (to be executed), ``not_applicable`` or
    ``unsupported``. For a ``snapshot`` mutant ``variant`` names the stale
    variant the unchanged reference is run on.
    """

    case_id: str
    operator: str
    site: int | None
    status: str
    reason: str
    sql: str | None = None
    variant: str | None = None

    @property
    def id(self) -> str:
        """``operator#site``, or the bare operator name for a record without a site."""
        return self.operator if self.site is None else f"{self.operator}#{self.site}"


OPERATORS: tuple[Operator, ...] = (
    Operator("time_column_swap", "1", "creation time instead of deal time: a time column "
             "replaced by another time column of the same table", _sites.time_column_swap),
    Operator("count_distinct_dropped", "2", "COUNT(*) or COUNT(col) instead of "
             "COUNT(DISTINCT ...)", _sites.count_distinct_dropped),
    Operator("drop_validity_predicate", "3", "a validity / status / refund condition dropped",
             _sites.drop_validity_predicate),
    Operator("move_range_endpoint", "4", "a range endpoint moved (< to <=, >= to >, BETWEEN "
             "made half-open)", _sites.move_range_endpoint),
    Operator("drop_timezone", "4", "a timezone conversion dropped (AT TIME ZONE, timezone(), "
             "the UTC offset of a TIMESTAMPTZ literal)", _sites.drop_timezone),
    Operator("drop_scope_predicate", "5", "scope widened: an equality / IN predicate on a "
             "dimension dropped", _sites.drop_scope_predicate),
    Operator("join_key_swap", "6", "wrong join key: another column of compatible type, or "
             "a shared column such as the name instead of the id", _sites.join_key_swap),
    Operator("stale_snapshot", "7", "the answer read from an older snapshot (the reference "
             "run on a variant marked stale)", kind="snapshot"),
    Operator("changed_answer_number", "8", "correct data but a changed number in the answer",
             kind="answer"),
    Operator("one_to_many_join", "extra", "a one-to-many join that multiplies rows (EXISTS "
             "or IN made a join, a pre-aggregation removed)", _sites.one_to_many_join),
    Operator("join_type_swap", "extra", "INNER JOIN made LEFT, LEFT JOIN made INNER",
             _sites.join_type_swap),
    Operator("remove_distinct", "extra", "SELECT DISTINCT made SELECT", _sites.remove_distinct),
    Operator("reverse_order", "extra", "an ORDER BY key reversed (query or window)",
             _sites.reverse_order),
    Operator("drop_tie_breaker", "extra", "the last key of a multi-key ORDER BY dropped",
             _sites.drop_tie_breaker),
    Operator("change_limit", "extra", "LIMIT n made n+1 or n-1", _sites.change_limit),
)  # fmt: skip
OPERATOR_NAMES: tuple[str, ...] = tuple(op.name for op in OPERATORS)


def render(tree: exp.Expr) -> str:
    """DuckDB SQL text of a tree, pretty-printed (how mutants are shown and executed)."""
    return tree.sql(dialect=DIALECT, pretty=True)


def _parse(sql: str) -> exp.Expr | str:
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as exc:
        return f"does not parse: {str(exc).splitlines()[0]}"
    if len(statements) != 1:
        return f"expected one statement, found {len(statements)}"
    return statements[0]


def _sql_mutants(case_id: str, op: Operator, tree: exp.Expr, scope: Scope) -> list[Mutant]:
    if op.sites is None:
        raise broken(f"operator {op.name} has no site finder")
    baseline = render(tree)
    seen = {baseline}
    out: list[Mutant] = []
    for description, edit in op.sites(tree, scope):
        site = len(out)
        try:
            copy = tree.copy()
            text = render(edit(nodes(copy)))
            reparsed = _parse(text)
        except SqlglotError as exc:
            reparsed = f"cannot be generated: {str(exc).splitlines()[0]}"
            text = None
        if isinstance(reparsed, str):
            out.append(Mutant(case_id, op.name, site, "unsupported", reparsed, text))
            continue
        if text is None:  # only the except branch leaves it None, and it sets a reason
            raise broken(f"mutant of {op.name} at {site} has neither text nor reason")
        if text in seen:
            continue  # the same query as the reference or as an earlier site: not a mutant
        seen.add(text)
        out.append(Mutant(case_id, op.name, site, "candidate", description, text))
    if not out:
        return [Mutant(case_id, op.name, None, "not_applicable", f"no site for {op.description}")]
    return out


def mutants_for(
    case_id: str, reference_sql: str, schema: Schema, stale_variants: tuple[str, ...] = ()
) -> list[Mutant]:
    """Every operator's mutants (or not_applicable / unsupported records) for one case.

    Example:
        >>> schema = {"sales": {"region": "string", "amount": "numeric", "valid": "string"}}
        >>> ms = mutants_for("c1", "SELECT SUM(amount) FROM sales "
        ...                  "WHERE region = 'A' AND valid = 'Y'", schema)
        >>> [(m.id, m.status) for m in ms if m.status == "candidate"]
        [('drop_validity_predicate#0', 'candidate'), ('drop_scope_predicate#0', 'candidate')]
    """
    tree = _parse(reference_sql)
    out: list[Mutant] = []
    for op in OPERATORS:
        if op.kind == "answer":
            out.append(Mutant(case_id, op.name, None, "not_applicable", ANSWER_NOT_CHECKED))
        elif op.kind == "snapshot":
            if not stale_variants:
                reason = "no variant of calibration.yaml is marked stale"
                out.append(Mutant(case_id, op.name, None, "not_applicable", reason))
            for i, vid in enumerate(stale_variants):
                reason = f"the reference answered from stale snapshot {vid}"
                out.append(Mutant(case_id, op.name, i, "candidate", reason, reference_sql, vid))
        elif isinstance(tree, str):
            out.append(Mutant(case_id, op.name, None, "unsupported", f"reference SQL {tree}"))
        else:
            out.extend(_sql_mutants(case_id, op, tree, Scope.of(tree, schema)))
    return out
