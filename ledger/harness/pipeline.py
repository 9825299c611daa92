"""One judge: guard -> execute (a worker crash retried once) -> score.

Every path that turns an answer into a score goes through :func:`judge`:

- ``AttemptWriter.prepare`` (the runner, on its judge threads) judges a fresh
  answer; ``AttemptWriter.build`` only turns the :class:`Judgement` into events;
- ``rescore`` judges recorded evidence under another scorer version, re-executing
  the SQL when asked;
- ``verify --recompute`` re-derives each recorded score from its recorded evidence
  and re-executes its SQL to compare with the recorded SqlExecuted
  (:func:`execution_differences`);
- the calibration oracle judges a SQL text as a strict answer.

Each stage is either judged now or taken from the record. Without ``recorded``
the answer is fresh: its SQL is guarded under the run's caps
(``ledger.harness.limits.judge_sql``) and, when it passes, executed in ``pool``.
With ``recorded`` the recorded guard verdict is used as it is (a missing one stays
missing, so evidence that does not fit is refused by the scorer, never repaired);
the SQL is executed again in ``pool`` when one is given and the recorded verdict
passed it, else the recorded execution is scored. Only named refusals become data: a
``ScoringError`` is kept in ``Judgement.refusal`` (the runner cancels the attempt
as ``infrastructure``); any other exception is a caseledger bug and propagates
(each caller names where it stopped in an ``InternalError``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ledger import events
from ledger.engines import engine_rules
from ledger.engines.process import ExecResult
from ledger.engines.reading import Reading, Readings, ReadRequest
from ledger.harness import limits as limits_mod
from ledger.harness import score as score_mod
from ledger.secrets import MARKER, SecretSet

if TYPE_CHECKING:
    from ledger.engines.base import Executor

__all__ = [
    "COMPARED_FIELDS",
    "ENVELOPE",
    "MACHINE_STOPS",
    "Bench",
    "Judgement",
    "Recorded",
    "execution_differences",
    "judge",
    "stored_result",
]

#: The envelope of evidence built only to be scored, never appended (the scorer reads none).
ENVELOPE: dict[str, Any] = {
    "stream": "judge",
    "stream_seq": 0,
    "stream_prev": None,
    "at": "1970-01-01T00:00:00.000000Z",
}

#: The SqlExecuted fields a re-execution must reproduce (never ``sql_us``, the time,
#: nor ``error_message``, whose text may name the machine).
COMPARED_FIELDS = (
    "ok",
    "error_kind",
    "columns",
    "rows",
    "row_count",
    "truncated",
    "cells_truncated",
)
#: Error kinds that depend on the machine (its speed, its memory): never compared.
MACHINE_STOPS = frozenset({"timeout", "memory", "worker_crash"})

CRASHED_TWICE = "the SQL worker crashed twice"


@dataclass(frozen=True)
class Bench:
    """What an answer is judged against: the case, its gold, the published tables and the
    case's reference SQL (None: no structural match is computed)."""

    case: events.CaseSpec
    gold: events.GoldResult
    tables: frozenset[str]
    reference_sql: str | None
    engine: str = "duckdb"

    @classmethod
    def of(cls, bank: events.BankPublished, case_id: str, references: dict[str, str]) -> Bench:
        """The bench of ``case_id`` in a published bank.

        Raises:
            ScoringError: the bank has no such case (or no gold for it).
        """
        case = next((c for c in bank.cases if c.id == case_id), None)
        gold = next((g for g in bank.gold if g.case_id == case_id), None)
        if case is None or gold is None:
            raise score_mod.ScoringError(f"bank {bank.bank_id} has no case {case_id!r}")
        tables = frozenset(t.name for t in bank.tables)
        return cls(case, gold, tables, references.get(case_id), bank.build.engine)


@dataclass(frozen=True)
class Recorded:
    """Stages already on the record, used instead of judging them again."""

    guarded: events.SqlGuarded | None = None
    executed: events.SqlExecuted | None = None


@dataclass(frozen=True)
class Judgement:
    """One answer judged.

    ``guard`` is the verdict (judged now, or the recorded one), None when there was no
    SQL to judge; ``executions`` are the executions run now, in order (a worker crash
    followed by its one retry), empty when nothing ran now; ``score`` holds the
    ScoreComputed fields (all but envelope, case, attempt and evidence), None when the
    attempt is cancelled (see :attr:`cancelled`); ``refusal`` is the scorer's named
    refusal, if any.
    """

    guard: limits_mod.Judged | None
    executions: tuple[ExecResult, ...]
    score: dict[str, Any] | None
    refusal: score_mod.ScoringError | None = None

    @property
    def crashed_twice(self) -> bool:
        """The worker crashed on the try and on the retry: an infrastructure failure."""
        return bool(self.executions) and self.executions[-1].error_kind == "worker_crash"

    @property
    def cancelled(self) -> str | None:
        """Why there is no score (the AttemptCancelled message, reason infrastructure)."""
        if self.crashed_twice:
            return CRASHED_TWICE
        if self.refusal is not None:
            return f"scoring failed: {self.refusal}"
        return None


def _no_cpu() -> int:
    return 0


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__struct_fields__}


def _execute(
    pool: Executor, sql: str, max_rows: int, limits: events.Limits, secrets: SecretSet | None
) -> ExecResult:
    result = pool.execute(
        sql,
        max_rows=max_rows,
        max_result_bytes=limits.max_result_bytes,
        max_cell_bytes=limits.max_cell_bytes,
    )
    return stored_result(result, limits, secrets)


def stored_result(
    result: ExecResult, limits: events.Limits, secrets: SecretSet | None = None
) -> ExecResult:
    """An execution as it is stored and scored (issue 30): its error message cut to the run's
    ``max_text_bytes`` (listed in ``texts_cut`` with its whole length) and, with
    ``secrets``, every form of a secret scrubbed from the error message, the column names
    and types and every string in the rows (counted in ``scrubbed``). The score is computed
    on this, so the recorded evidence re-derives it; a result is never refused for what an
    answer made it print.
    """
    changes: dict[str, Any] = {}
    if result.error_message is not None:
        text, whole = limits_mod.cut_text(
            result.error_message, limits_mod.text_cap(limits), secrets
        )
        if text != result.error_message:
            changes["error_message"] = text
        if whole is not None:
            changes["texts_cut"] = (events.TextCut(field="error_message", bytes=whole),)
    if secrets:
        counter = [0]
        columns = tuple(
            events.Column(
                name=_scrub(c.name, secrets, counter), type=_scrub(c.type, secrets, counter)
            )
            for c in result.columns
        )
        rows = tuple(tuple(_scrub(cell, secrets, counter) for cell in row) for row in result.rows)
        if counter[0]:
            changes.update(columns=columns, rows=rows, scrubbed=counter[0])
    return msgspec.structs.replace(result, **changes) if changes else result


def _scrub(value: Any, secrets: SecretSet, counter: list[int]) -> Any:
    """An encoded cell (or name) with every string in it scrubbed; counts the strings changed."""
    if isinstance(value, str):
        clean = secrets.scrub(value)
        counter[0] += clean != value
        return clean
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, secrets, counter) for v in value)
    if isinstance(value, dict):
        return {_scrub(k, secrets, counter): _scrub(v, secrets, counter) for k, v in value.items()}
    return value


def _read(
    bench: Bench,
    sql: str,
    pool: Executor | None,
    limits: events.Limits,
    spent_ns: Callable[[], int],
) -> tuple[limits_mod.Judged, Readings | None]:
    """The guard stage of a fresh answer: read in a SQL worker of ``pool`` when it can
    (``ledger.harness.reading``: the same functions, on another core), else here."""
    read = getattr(pool, "read", None)
    if read is not None:
        request = ReadRequest(
            sql,
            tuple(sorted(bench.tables)),
            tuple(bench.case.required_ast),
            bench.reference_sql,
            bench.engine,
            limits,
            spent_ns(),
        )
        reading: Reading | None = read(request)
        if reading is not None:
            verdict = limits_mod.Judged(reading.passed, reading.violations, reading.ast_digest)
            return verdict, reading.readings
    verdict = limits_mod.judge_sql(
        sql,
        bench.tables,
        rules=bench.case.required_ast,
        reference_sql=bench.reference_sql,
        limits=limits,
        spent_ns=spent_ns,
        engine=bench.engine,
    )
    return verdict, None


def judge(
    bench: Bench,
    *,
    parsed: events.OutputParsed | None = None,
    failure: events.ProviderFailed | None = None,
    pool: Executor | None = None,
    recorded: Recorded | None = None,
    limits: events.Limits = limits_mod.DEFAULT_LIMITS,
    version: str = score_mod.SCORER_VERSION,
    spent_ns: Callable[[], int] = _no_cpu,
    secrets: SecretSet | None = None,
) -> Judgement:
    """Judge one answer (``parsed``, or the provider's ``failure``) against ``bench``.

    ``recorded`` None: a fresh answer (guard it now); else the recorded stages to use.
    ``spent_ns()`` is the CPU time (ns) the attempt's judging has used so far (the
    judge budget of ``limits``); ``pool`` None means execute nothing and score the
    recorded execution. Each execution is stored as :func:`stored_result` makes it
    (``secrets``: the run's, scrubbed from the result before it is scored).

    Raises:
        UsageError: unknown scorer ``version``.
        Exception: anything but a ScoringError is a caseledger bug and propagates.
    """
    case = bench.case
    source = parsed if parsed is not None else failure
    ids: dict[str, Any] = {"case_id": case.id, "attempt": 1 if source is None else source.attempt}
    verdict: limits_mod.Judged | None = None
    readings: Readings | None = None
    guarded = executed = None
    if recorded is not None:  # the record is the truth: a missing stage stays missing
        guarded, executed = recorded.guarded, recorded.executed
        if guarded is not None:
            verdict = limits_mod.Judged(guarded.passed, guarded.violations, guarded.ast_digest)
    elif parsed is not None and parsed.sql is not None:
        verdict, readings = _read(bench, parsed.sql, pool, limits, spent_ns)
        guarded = events.SqlGuarded(
            **ENVELOPE,
            **ids,
            passed=verdict.passed,
            violations=verdict.violations,
            ast_digest=verdict.ast_digest,
        )
    runs: list[ExecResult] = []
    sql = None if parsed is None else parsed.sql
    if pool is not None and verdict is not None and verdict.passed and sql:
        runs.append(_execute(pool, sql, case.max_rows, limits, secrets))
        if runs[-1].error_kind == "worker_crash":  # retried once, and both are recorded
            runs.append(_execute(pool, sql, case.max_rows, limits, secrets))
            if runs[-1].error_kind == "worker_crash":
                return Judgement(verdict, tuple(runs), None)
        executed = events.SqlExecuted(**ENVELOPE, **ids, **_fields(runs[-1]), worker_try=len(runs))
    try:
        fields = score_mod.score_attempt(
            case=case,
            gold=bench.gold,
            parsed=parsed,
            guarded=guarded,
            executed=executed,
            provider_failure=failure,
            reference_sql=bench.reference_sql,
            version=version,
            dialect=engine_rules(bench.engine)[0],
            readings=readings,
        )
    except score_mod.ScoringError as exc:
        return Judgement(verdict, tuple(runs), None, exc)
    return Judgement(verdict, tuple(runs), fields)


def execution_differences(recorded: events.SqlExecuted, rerun: ExecResult) -> list[str]:
    """The :data:`COMPARED_FIELDS` in which a re-execution differs from the recorded one.

    Cells are compared as stored (typed, encoded by ``ledger.engines.cells``), so a
    re-execution is equal exactly when its event would carry the same bytes in these
    fields. A recorded execution with secrets ``scrubbed`` from its result (issue 30)
    cannot be equal (the re-execution, made without the run's secrets, prints them): its
    columns and rows are equal when every recorded string equals the re-executed one
    with each ``[redacted]`` standing for a non-empty text.
    """
    scrubbed = recorded.scrubbed not in (msgspec.UNSET, 0)
    differ = [
        name
        for name in COMPARED_FIELDS
        if not _same(
            _builtins(getattr(recorded, name)),
            _builtins(getattr(rerun, name)),
            scrubbed and name in ("columns", "rows"),
        )
    ]
    if differ == ["error_kind"] and _reclassified(recorded, rerun):
        return []
    return differ


def _reclassified(recorded: events.SqlExecuted, rerun: ExecResult) -> bool:
    """True for a SQLite syntax error recorded as ``sql_runtime`` before issue 31 that the
    worker now reports as ``refused`` (one classification of parse failures): the same
    failure, with SQLite's own message, so a re-execution of an older run is equal."""
    return (
        recorded.error_kind == "sql_runtime"
        and rerun.error_kind == "refused"
        and recorded.error_message is not None
        and rerun.error_message == f"refused by SQLite: {recorded.error_message}"
    )


def _same(recorded: Any, rerun: Any, scrubbed: bool) -> bool:
    if not scrubbed or recorded == rerun:
        return bool(recorded == rerun)
    if isinstance(recorded, str) and isinstance(rerun, str):
        if MARKER not in recorded:
            return False
        pattern = ".+?".join(re.escape(part) for part in recorded.split(MARKER))
        return re.fullmatch(pattern, rerun, re.DOTALL) is not None
    if isinstance(recorded, list | tuple) and isinstance(rerun, list | tuple):
        return len(recorded) == len(rerun) and all(
            _same(a, b, scrubbed) for a, b in zip(recorded, rerun, strict=True)
        )
    if isinstance(recorded, dict) and isinstance(rerun, dict):
        return len(recorded) == len(rerun) and all(
            _same(list(a), list(b), scrubbed)
            for a, b in zip(recorded.items(), rerun.items(), strict=True)
        )
    return False


def _builtins(value: Any) -> Any:
    return None if value is msgspec.UNSET else msgspec.to_builtins(value, order="sorted")
