"""The oracle under calibration: the real guard, sandboxed worker and scorer, on several databases.

``Oracle.judge`` runs one SQL text through the runner's own judge
(``ledger.harness.pipeline.judge``: the guard under the default caps, then the
worker with the case's max_rows, a worker crash retried once, then the scorer)
on one database, as a strict query-plan-v1 answer against the gold of that
database. What it reports is the scorer's own ``result_correct``; nothing here
compares results itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledger.bank.model import CaseDef
from ledger.closing import Closing
from ledger.codec import digest
from ledger.engines.duckdb_worker import WorkerPool
from ledger.engines.process import ExecResult
from ledger.engines.reading import Reading, ReadRequest
from ledger.errors import InternalError, LedgerError, broken
from ledger.events import CaseSpec, GoldResult, OutputParsed, Plan
from ledger.harness import pipeline
from ledger.harness.reading import KeptReadings
from ledger.harness.score import SCORER_VERSION
from ledger.run.sqlpool import hold_ctrl_c

__all__ = ["Judged", "Oracle"]

# The envelope of evidence built only to be scored, never appended.
_ENVELOPE: dict[str, Any] = {
    "stream": "calibration",
    "stream_seq": 0,
    "stream_prev": None,
    "at": "1970-01-01T00:00:00.000000Z",
}
_PLAN = Plan(grain="", sources=(), joins=(), filters=(), metrics=(), steps=(), risks=())


@dataclass(frozen=True)
class Judged:
    """One SQL on one database: the scorer's result_correct, or why there is none.

    ``error_kind`` is ``guard``, ``sql_runtime``, ``timeout``, ``memory``,
    ``worker_crash`` (twice) or ``scoring``; ``result_digest`` is the digest of
    the typed result the worker returned (columns and rows); ``total`` is the
    attempt's score as the scorer computed it (never altered here).
    """

    database: str
    result_correct: bool | None
    error_kind: str | None
    message: str | None
    result_digest: str | None
    result: ExecResult | None = None
    total: Decimal | None = None


class _ReadOnce(Closing):
    """One database's pool, reading each SQL text once for every database of the oracle.

    A reading (``ledger.harness.reading``) is a function of its request alone: the text,
    the tables, the case's rules and reference SQL, the engine and the caps, never the
    rows. The oracle asks the same request of every database (one ``tables`` for all), so
    the reading the first database's worker made serves the others (issue 34: a run's
    variant diagnostics read every answer once per variant). Executing stays on this
    database's own workers.
    """

    def __init__(self, pool: WorkerPool, kept: KeptReadings) -> None:
        self._pool = pool
        self._kept = kept

    def execute(
        self, sql: str, *, max_rows: int, max_result_bytes: int, max_cell_bytes: int
    ) -> ExecResult:
        return self._pool.execute(
            sql, max_rows=max_rows, max_result_bytes=max_result_bytes, max_cell_bytes=max_cell_bytes
        )

    def read(self, request: ReadRequest) -> Reading | None:
        return self._kept.read(request, self._pool.read)

    def close(self) -> None:
        """Nothing: the oracle stops its pools."""


class Oracle(Closing):
    """Worker pools over named databases (``base`` and each variant) of one bank.

    Use as a context manager: every worker process is stopped on exit.
    """

    def __init__(
        self, databases: Mapping[str, Path], tables: frozenset[str], *, timeout_s: float = 5.0
    ) -> None:
        self.tables = tables
        self.scorer_version = SCORER_VERSION
        self._kept = KeptReadings()
        # The databases' workers start side by side (issue 34: a run with variant
        # diagnostics opens them before its first model call; one after another they
        # took the sum of their start times). Each starting thread blocks Ctrl-C, so a
        # worker it starts inherits a blocked SIGINT as one started on the main thread
        # does. Every start ends before this goes on (a Ctrl-C included); then any
        # failure stops every pool that started, and the first failure in database
        # order is raised.
        starting = ThreadPoolExecutor(max(1, len(databases)), "caseledger-oracle-start",
                                      initializer=hold_ctrl_c)  # fmt: skip
        futures = {
            name: starting.submit(WorkerPool, path, timeout_s=timeout_s)
            for name, path in databases.items()
        }
        try:
            try:
                wait(futures.values())
            finally:
                starting.shutdown(wait=True)
                self._pools: dict[str, WorkerPool] = {
                    name: f.result() for name, f in futures.items() if f.exception() is None
                }
            for future in futures.values():
                future.result()  # the first failure, in database order
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every worker."""
        for pool in self._pools.values():
            pool.close()

    def judge(self, case: CaseDef | CaseSpec, sql: str, database: str, gold: GoldResult) -> Judged:
        """Guard, execute and score ``sql`` for ``case`` on ``database`` against ``gold``."""
        spec = case.spec() if isinstance(case, CaseDef) else case
        parsed = OutputParsed(
            **_ENVELOPE,
            case_id=case.id,
            attempt=1,
            protocol_strict=True,
            recovered_from_fence=False,
            plan=_PLAN,
            sql=sql,
            summary="",
            assumptions=(),
            error=None,
        )
        started = time.thread_time_ns()
        try:
            judged = pipeline.judge(
                pipeline.Bench(spec, gold, self.tables, None),
                parsed=parsed,
                pool=_ReadOnce(self._pools[database], self._kept),
                version=self.scorer_version,
                spent_ns=lambda: time.thread_time_ns() - started,
            )
        except LedgerError:
            raise
        except Exception as exc:
            # A scorer bug is never a verdict: the calibration (or attempt) records nothing.
            raise InternalError(
                exc, where=f"nothing was recorded for case {case.id} on database {database}"
            ) from exc
        verdict = judged.guard
        if verdict is None:  # a strict answer always has SQL to guard
            raise broken(f"case {case.id}: a strict answer was not guarded")
        if not verdict.passed:
            why = "; ".join(f"{v.check}: {v.message}" for v in verdict.violations)
            return Judged(database, None, "guard", why, None)
        result = judged.executions[-1]
        if result.error_kind is not None:
            return Judged(database, None, result.error_kind, result.error_message, None, result)
        if judged.score is None:  # a named refusal: evidence that does not fit
            if judged.refusal is None:
                raise broken(f"case {case.id}: no score and no refusal")
            return Judged(database, None, "scoring", judged.refusal.message, None, result)
        fields = judged.score
        body = {"columns": result.columns, "rows": result.rows, "truncated": result.truncated}
        return Judged(
            database, fields["result_correct"], None, None, digest(body), result, fields["total"]
        )
