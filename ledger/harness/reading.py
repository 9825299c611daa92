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

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import msgspec

from ledger import events
from ledger.engines import engine_rules
from ledger.engines.reading import Reading, Readings, ReadRequest
from ledger.errors import BankError
from ledger.harness import ast_rules
from ledger.harness import limits as limits_mod

__all__ = ["READINGS_KEPT", "READING_KEPT_CHARS", "KeptReadings", "read", "readings_of"]

#: How many readings of distinct requests a :class:`KeptReadings` keeps, and the longest
#: SQL text kept.
READINGS_KEPT = 4096
READING_KEPT_CHARS = 65536


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


class KeptReadings:
    """The readings of the last :data:`READINGS_KEPT` requests, shared by the threads that
    read through it (issue 34).

    A run sends the same SQL many times, and variant diagnostics read each answer once per
    variant database: a request already read (the same text, tables, rules, reference SQL,
    engine and limits) is answered with the reading kept, without a worker. A reading that
    ran out of its CPU budget is never kept (the only part of a reading that depends on
    the machine rather than on the request), nor one of a text over
    :data:`READING_KEPT_CHARS`. While one thread reads a request, another asking for the
    same waits for that reading instead of reading it a second time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[ReadRequest, Reading] = OrderedDict()
        self._reading: dict[ReadRequest, threading.Event] = {}

    def read(
        self, request: ReadRequest, read: Callable[[ReadRequest], Reading | None]
    ) -> Reading | None:
        """The kept reading of ``request``, else ``read(request)`` (kept when it may be)."""
        if len(request.sql) > READING_KEPT_CHARS:
            return read(request)
        key = msgspec.structs.replace(request, spent_ns=0)
        while True:
            with self._lock:
                kept = self._kept.get(key)
                if kept is not None:
                    self._kept.move_to_end(key)
                    return kept
                busy = self._reading.get(key)
                if busy is None:
                    done = self._reading[key] = threading.Event()
                    break
            busy.wait()  # then look again: kept, or read here if it could not be kept
        try:
            reading = read(request)
            if reading is not None and not limits_mod.over_budget(reading.violations):
                with self._lock:
                    self._kept[key] = reading
                    if len(self._kept) > READINGS_KEPT:
                        self._kept.popitem(last=False)
            return reading
        finally:
            with self._lock:
                del self._reading[key]
            done.set()
