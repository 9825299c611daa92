"""The worker protocol's "read this SQL" messages (issue 21), beside ``process``'s.

A SQL worker answers a :class:`ReadRequest` (read the text, run nothing) with a
:class:`Reading`: the guard's verdict and the :class:`Readings` the scorer will ask
for. These are data (msgpack, never pickle). What reads the SQL is the harness's
(``ledger.harness.reading``: the guard, the AST rules, the structural match): the
engines do not import the harness, so a worker imports the module ``READER`` names
at its first request to read (``ledger.engines.process.serve``; a worker only asked to
execute never imports sqlglot) and calls its ``read(request)`` for each request.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ledger import events

__all__ = ["READER", "ReadRequest", "Reading", "Readings"]

#: The module whose ``read(ReadRequest) -> Reading`` a worker calls (named, not imported).
READER = "ledger.harness.reading"


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
    asks :meth:`match_for` and :meth:`rules_for` first; for any other text or
    arguments, or a value not computed, it calls the functions of
    ``ledger.harness.ast_rules`` itself, so the result is always theirs.
    """

    sql: str
    dialect: str
    reference_sql: str | None
    rule_names: tuple[str, ...]
    match: bool | None = None
    rules: tuple[events.AstRule, ...] | None = None

    def match_for(self, sql: str, reference_sql: str, dialect: str) -> bool | None:
        """The structural match of ``sql`` against ``reference_sql`` when it was computed
        for exactly these arguments, else None (the caller computes it)."""
        if (sql, reference_sql, dialect) == (self.sql, self.reference_sql, self.dialect):
            return self.match
        return None

    def rules_for(
        self, sql: str, rules: Sequence[str], dialect: str
    ) -> tuple[events.AstRule, ...] | None:
        """The AST rules of ``sql`` when they were computed for exactly these arguments,
        else None (the caller computes them)."""
        if (sql, tuple(rules), dialect) == (self.sql, self.rule_names, self.dialect):
            return self.rules
        return None


class Reading(msgspec.Struct, frozen=True):
    """The guard stage of one attempt (``limits.Judged``) and the readings the scorer uses."""

    passed: bool
    violations: tuple[events.Violation, ...]
    ast_digest: str | None
    readings: Readings
