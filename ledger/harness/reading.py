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

from ledger import events
from ledger.engines import engine_rules
from ledger.engines.reading import Reading, Readings, ReadRequest
from ledger.errors import BankError
from ledger.harness import ast_rules
from ledger.harness import limits as limits_mod

__all__ = ["read", "readings_of"]


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
    dialect = engine_rules(req.engine)[0]
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
