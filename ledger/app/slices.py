"""Understanding slices of a run: record a SliceComputed per executed answer, then count.

``record_slices`` reads the run from the log, finds every attempt whose latest
score (any scorer version) names an OutputParsed with SQL and a SqlExecuted
that ran, and appends, for each one that has no slice under
:data:`ledger.harness.slices.SLICER_VERSION` yet, a SliceComputed on the run's
stream: the first component where its SQL departs from the case's reference
SQL (``ledger.harness.slices.first_divergence``, in the dialect of the bank's
engine). The reference SQL is read from the bank files kept beside the ledger
(checked against the published hash), never from an event; the event records
only its hash. Correct answers are sliced too, so a rescore that changes a
verdict finds its slice already there; projections count the wrong ones.

Nothing here changes a score: the events are diagnostics after the score,
folded by ``projections/slices.py``. ``slice_view`` is the read side the
command prints (every byte of the log checked while read).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.app.diagnostics import (
    DiagnosticRecording,
    DiagnosticView,
    append_diagnostics,
    diagnostic_view,
    executed_answer,
    run_state,
)
from ledger.bank.registry import PublishedBank, bank_paths
from ledger.engines import engine_rules
from ledger.errors import BankError, UsageError
from ledger.events import BankPublished, SliceComputed
from ledger.harness.score import SCORER_VERSION
from ledger.harness.slices import SLICER_VERSION, first_divergence
from ledger.keys import Signer
from ledger.store import Ledger
from projections import slices as slice_view_mod
from projections.caseruns import Attempt, CaseRun
from projections.report import schema as S

__all__ = ["SliceRecording", "SliceView", "record_slices", "slice_view"]


class SliceRecording(DiagnosticRecording):
    """What ``record_slices`` appended and left alone, per reason."""


def _references(home: Path, info: BankPublished, seq: int) -> dict[str, str]:
    db_path, files_dir = bank_paths(home, info.content_sha256, info.build.engine)
    try:
        return PublishedBank(info, seq, db_path, files_dir).references()
    except BankError as exc:
        raise UsageError(
            f"cannot compute slices for runs on bank {info.bank_id}@{info.version}: {exc.message}",
            hint="slices compare with the reference SQL kept beside the ledger; publish "
            "the bank folder again (caseledger bank publish) to restore it",
        ) from None


def _has_slice(caserun: CaseRun, parsed_link: str) -> bool:
    return any(
        isinstance(s.event, SliceComputed)
        and s.event.slicer_version == SLICER_VERSION
        and parsed_link in s.event.evidence
        for s in caserun.steps
    )


def record_slices(
    ledger: Ledger,
    signer: Callable[[], Signer],
    home: Path,
    *,
    run_id: str,
    clock: Callable[[], str],
) -> SliceRecording:
    """Append the missing SliceComputed events of one run (none when all are there).

    ``signer`` is called only when there is something to append. ``clock`` gives
    each event's ``at`` (a writer's claim).

    Raises:
        UsageError: no such run; the bank files are missing or edited.
    """
    state = run_state(ledger, run_id)
    started = state.runs[run_id].started
    info = state.banks[started.bank_hash]
    bank = info.event
    cases = {c.id: c for c in bank.cases}
    dialect, _ = engine_rules(bank.build.engine)
    tables = {t.name: [c.name for c in t.columns] for t in bank.tables}
    summary = SliceRecording(run_id)
    pending: list[tuple[CaseRun, dict[str, Any]]] = []
    references: dict[str, str] | None = None
    for key in sorted(state.caseruns):
        caserun = state.caseruns[key]
        if caserun.run_id != run_id:
            continue
        answer = executed_answer(caserun)
        if answer is None:
            summary.skip("not_executed")
            continue
        parsed, parsed_link, _, executed_link = answer
        if _has_slice(caserun, parsed_link):
            summary.already += 1
            continue
        case = cases.get(caserun.case_id)
        if references is None:
            references = _references(home, bank, info.seq)
        reference = references.get(caserun.case_id)
        if case is None or reference is None:
            summary.skip("no_reference_sql")
            continue
        found = first_divergence(
            parsed.sql or "",
            reference,
            dialect,
            tables,
            order_significant=case.row_order_significant,
        )
        pending.append(
            (
                caserun,
                {
                    "case_id": caserun.case_id,
                    "attempt": caserun.attempt,
                    "slicer_version": SLICER_VERSION,
                    "evidence": (parsed_link, executed_link),
                    "reference_sql_sha256": case.reference_sql_sha256,
                    "component": found.component,
                    "detail": found.detail,
                },
            )
        )
    summary.appended = append_diagnostics(
        ledger, signer, clock, run_id, SliceComputed, (fields for _, fields in pending)
    )
    return summary


class SliceView(DiagnosticView[S.SliceBlock, slice_view_mod.SliceRow]):
    """A run's slices as the command shows them."""


def slice_view(ledger: Ledger, run_id: str, scorer_version: str = SCORER_VERSION) -> SliceView:
    """The slice counts of one run under a scorer version (which attempts are wrong).

    Raises:
        UsageError: no such run.
    """

    def fold(
        attempts: list[Attempt], bank: BankPublished
    ) -> tuple[S.SliceBlock, list[slice_view_mod.SliceRow]]:
        cases = {c.id: c for c in bank.cases}
        return (
            slice_view_mod.summarize(attempts, cases),
            slice_view_mod.attempt_rows(attempts, cases),
        )

    return diagnostic_view(ledger, run_id, scorer_version, SliceView, fold)
