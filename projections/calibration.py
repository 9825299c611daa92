"""The calibration view of one calibration run: kill rate, mutant counts, controls, survivors.

Read from the run's CalibrationFinished (the totals and the kill rate as
recorded) and its CalibrationMutantJudged / CalibrationControlChecked events
(survivors, reviewed equivalents, failed controls, counts per operator).
Mutated and reference SQL never enter the log, so they cannot appear here:
a mutant is named by case, mutant id and operator, and its SQL only by its
SHA-256. A calibration run has no score and no rank; it checks the oracle.
Without a CalibrationFinished (a report built in the middle of the batch)
the counts come from the judged events and the kill rate is null.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ledger.errors import InternalError
from ledger.events import (
    CalibrationControlChecked,
    CalibrationFinished,
    CalibrationMutantJudged,
)
from projections.caseruns import CalibrationRecord
from projections.report import schema as S

__all__ = ["APPLICABLE", "CONSUMES", "STATUSES", "summarize"]

CONSUMES = (CalibrationMutantJudged, CalibrationControlChecked, CalibrationFinished)
#: Mutant statuses in the order reports list them.
STATUSES = ("killed", "survived", "equivalent", "blocked", "unsupported", "not_applicable")
#: The statuses of mutants that were run (``applicable``).
APPLICABLE = ("killed", "survived", "equivalent", "blocked")


def _mutant(m: CalibrationMutantJudged) -> S.Mutant:
    """A survived or equivalent mutant: it ran, so its SQL has a hash."""
    if m.sql_sha256 is None:
        raise InternalError(ValueError(f"mutant {m.mutant_id} without SQL"), where="calibration")
    return S.Mutant(
        case=m.case_id,
        mutant=m.mutant_id,
        operator=m.operator,
        pattern=m.pattern,
        sql_sha256=m.sql_sha256,
    )


def _counts(counts: Mapping[str, int]) -> S.MutantCounts:
    unknown = sorted(set(counts) - set(STATUSES))
    if unknown:
        raise InternalError(ValueError(f"mutant status {unknown[0]!r}"), where="calibration")
    return S.MutantCounts(
        killed=counts.get("killed", 0),
        survived=counts.get("survived", 0),
        equivalent=counts.get("equivalent", 0),
        blocked=counts.get("blocked", 0),
        unsupported=counts.get("unsupported", 0),
        not_applicable=counts.get("not_applicable", 0),
    )


def summarize(record: CalibrationRecord | None) -> S.Calibration:
    """The calibration block of a run entry (every number a count or a decimal string).

    >>> s = summarize(None)
    >>> s.finished, s.kill_rate, s.counts.killed, s.positive_controls.total
    (False, None, 0, 0)
    """
    record = record or CalibrationRecord()
    judged = {s: 0 for s in STATUSES}
    operators: dict[str, dict[str, int]] = {}
    for m in record.mutants:
        judged[m.status] = judged.get(m.status, 0) + 1
        row = operators.setdefault(m.operator, dict.fromkeys(STATUSES, 0))
        row[m.status] = row.get(m.status, 0) + 1
    fin = record.finished
    if fin is not None:
        counts = {
            "killed": fin.killed,
            "survived": fin.survived,
            "equivalent": fin.equivalent,
            "blocked": fin.blocked,
            "unsupported": fin.unsupported,
            "not_applicable": fin.not_applicable,
        }
        passed, total = fin.controls_passed, fin.controls_total
    else:
        counts = judged
        passed = sum(1 for c in record.controls if c.passed)
        total = len(record.controls)
    failed = [
        S.FailedControl(case=c.case_id, index=c.index, sql_sha256=c.sql_sha256)
        for c in record.controls
        if not c.passed
    ]
    return S.Calibration(
        finished=fin is not None,
        calibration_sha256=None if fin is None else fin.calibration_sha256,
        scorer_version=None if fin is None else fin.scorer_version,
        kill_rate=None if fin is None or fin.kill_rate is None else str(fin.kill_rate),
        counts=_counts({s: counts.get(s, 0) for s in STATUSES}),
        applicable=sum(counts.get(s, 0) for s in APPLICABLE),
        judged_events=len(record.mutants),
        positive_controls=S.PositiveControls(passed=passed, total=total, failed=failed),
        passed=None if fin is None else fin.passed,
        survivors=[_mutant(m) for m in record.mutants if m.status == "survived"],
        equivalents=[
            S.ReviewedMutant(**msgspec.structs.asdict(_mutant(m)), review=m.review)
            for m in record.mutants
            if m.status == "equivalent"
        ],
        operators={name: _counts(operators[name]) for name in sorted(operators)},
        variants=[]
        if fin is None
        else [
            S.VariantDatabase(
                id=v.variant_id,
                stale=v.stale,
                tables_digest=v.tables_digest,
                gold_digest=v.gold_digest,
            )
            for v in fin.variants
        ],
        report_digest=None if fin is None else fin.report_digest,
    )
