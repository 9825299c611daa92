"""Reading an answer's SQL in the SQL worker that is about to execute it (issue 21).

Reading a SQL text (sqlglot's parse, the guard's checks and digest, the AST rules
and the structural match: ``ledger.harness.limits.judge_sql``) is pure Python and
was most of the runner's CPU. On the runner's judge threads it holds the GIL, so
two cores could not read two answers at once. A worker process has its own
interpreter: the runner sends it a :class:`ReadRequest` first, the worker reads
the text with the very same functions and answers with a :class:`Reading` (the
guard's verdict, and the AST rules and structural match the scorer will ask for);
only SQL the verdict passed is then sent to be executed (``Request``), as before.

Nothing about the verdict changes: the functions are the same, the inputs are the
same (the SQL, the published tables, the case's rules and reference SQL, the
run's caps) and the result is data (msgpack, never pickle). The CPU budget of
``judge_budget_ms`` counts the parent's time so far (the output parse) plus the
worker's thread time. ``verify --recompute`` still re-derives every score in the
auditor's own process, so a worker that answered wrongly would be caught there.

When a worker cannot read (it died, it timed out, it reported a fault, or the
engine's executor has no ``read``), the runner reads in its own process, as it did
before: this is a way to use the cores, never a second definition of the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec

from ledger import events
from ledger.errors import BankError

__all__ = ["ReadRequest", "Reading", "Readings", "prepare", "read", "readings_of"]


class ReadRequest(msgspec.Struct, frozen=True, tag="read"):
    """Read one SQL text (the worker answers with a :class:`Reading`; nothing runs)."""

    sql: str
    tables: tuple[str, ...]
    rules: tuple[str, ...]
    reference_sql: str | None
    engine: str
    limits: events.Limits
    #: CPU time (ns) the attempt's judging used before this request (the output parse).
    spent_ns: int = 0


class Readings(msgspec.Struct, frozen=True):
    """The AST rules and structural match of one SQL text, as the scorer asks for them.

    ``match`` None: not computed (no reference SQL, or it could not be); ``rules``
    None: not computed (the guard refused the SQL, or they could not be). The scorer
    calls :meth:`structural_match` and :meth:`check_rules` instead of the functions of
    ``ledger.harness.ast_rules``; for any other text or arguments, or a value not
    computed, they call those functions, so the result is always theirs.
    """

    sql: str
    dialect: str
    reference_sql: str | None
    rule_names: tuple[str, ...]
    match: bool | None = None
    rules: tuple[events.AstRule, ...] | None = None

    def structural_match(self, sql: str, reference_sql: str, dialect: str) -> bool:
        """``ast_rules.structural_match(sql, reference_sql, dialect)``."""
        if self.match is not None and (sql, reference_sql, dialect) == (
            self.sql,
            self.reference_sql,
            self.dialect,
        ):
            return self.match
        from ledger.harness import ast_rules

        return ast_rules.structural_match(sql, reference_sql, dialect)

    def check_rules(
        self, sql: str, rules: Sequence[str], dialect: str
    ) -> tuple[events.AstRule, ...]:
        """``ast_rules.check_rules(sql, rules, dialect)``."""
        if self.rules is not None and (sql, tuple(rules), dialect) == (
            self.sql,
            self.rule_names,
            self.dialect,
        ):
            return self.rules
        from ledger.harness import ast_rules

        return ast_rules.check_rules(sql, rules, dialect)


class Reading(msgspec.Struct, frozen=True):
    """The guard stage of one attempt (``limits.Judged``) and the readings the scorer uses."""

    passed: bool
    violations: tuple[events.Violation, ...]
    ast_digest: str | None
    readings: Readings


def prepare() -> None:
    """Import what :func:`read` needs (a worker calls this once it is ready, before its
    first request, so that the import overlaps the parent's own preparations)."""
    from ledger.harness import ast_rules, limits  # noqa: F401


def readings_of(
    sql: str,
    rules: Sequence[str],
    reference_sql: str | None,
    dialect: str,
    *,
    passed: bool,
    match: bool | None = None,
    found: tuple[events.AstRule, ...] | None = None,
) -> Readings:
    """What the scorer will ask of ``sql``: the structural match (when there is a reference)
    and the AST rules (when the guard ``passed`` it). ``match`` and ``found``: those already
    computed (``limits.Judged``), used as they are; what raises is left not computed."""
    from ledger.harness import ast_rules

    try:
        if match is None and reference_sql is not None:
            match = ast_rules.structural_match(sql, reference_sql, dialect)
    except RecursionError:
        match = None
    try:
        if not passed:
            found = None
        elif found is None:
            found = ast_rules.check_rules(sql, rules, dialect)
    except (RecursionError, BankError):
        found = None
    return Readings(sql, dialect, reference_sql, tuple(rules), match, found)


def read(req: ReadRequest) -> Reading:
    """Read ``req.sql`` as ``limits.judge_sql`` does (in the calling thread's CPU budget)."""
    from ledger.harness import functions
    from ledger.harness import limits as limits_mod

    start = time.thread_time_ns()

    def spent_ns() -> int:
        return req.spent_ns + time.thread_time_ns() - start

    judged = limits_mod.judge_sql(
        req.sql,
        req.tables,
        rules=req.rules,
        reference_sql=req.reference_sql,
        limits=req.limits,
        spent_ns=spent_ns,
        engine=req.engine,
    )
    dialect = functions.engine_rules(req.engine)[0]
    readings = readings_of(
        req.sql,
        req.rules,
        req.reference_sql,
        dialect,
        passed=judged.passed,
        match=judged.match,
        found=judged.rules,
    )
    return Reading(judged.passed, tuple(judged.violations), judged.ast_digest, readings)
