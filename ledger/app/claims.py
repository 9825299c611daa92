"""The answer contract of a run: record a ClaimsChecked per executed answer, then count.

``record_claims`` reads the run from the log, finds every attempt whose latest
score (any scorer version) names an OutputParsed with a non-empty ``summary``
and a SqlExecuted that ran, and appends, for each one without a check under
:data:`ledger.harness.claims.CLAIMS_VERSION` yet, a ClaimsChecked on the run's
stream: every claim read from the summary with its verdict against the
executed rows and against the case's gold (both read from the log: the
SqlExecuted event and the BankPublished gold, no file is opened).

Nothing here changes a score: the events are diagnostics after the score,
folded by ``projections/claims.py``. ``claims_view`` is the read side the
command prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger.app.diagnostics import (
    DiagnosticRecording,
    DiagnosticView,
    append_diagnostics,
    diagnostic_view,
    executed_answer,
    run_state,
)
from ledger.events import ClaimCheck, ClaimsChecked, GoldResult
from ledger.harness.claims import CLAIMS_VERSION, Table, check_summary
from ledger.harness.score import SCORER_VERSION
from ledger.keys import Signer
from ledger.store import Ledger
from projections import claims as claims_view_mod
from projections.caseruns import Attempt, CaseRun
from projections.report import schema as S

__all__ = ["ClaimsRecording", "ClaimsView", "claims_view", "record_claims"]


class ClaimsRecording(DiagnosticRecording):
    """What ``record_claims`` appended and left alone, per reason."""


def _checked(caserun: CaseRun, parsed_link: str) -> bool:
    return any(
        isinstance(s.event, ClaimsChecked)
        and s.event.claims_version == CLAIMS_VERSION
        and parsed_link in s.event.evidence
        for s in caserun.steps
    )


def _table(columns: Any, rows: Any, truncated: bool = False) -> Table:
    return Table(
        tuple((c.name, c.type) for c in columns),
        tuple(tuple(r) for r in rows),
        truncated,
    )


def record_claims(
    ledger: Ledger,
    signer: Callable[[], Signer],
    *,
    run_id: str,
    clock: Callable[[], str],
) -> ClaimsRecording:
    """Append the missing ClaimsChecked events of one run (none when all are there).

    ``signer`` is called only when there is something to append. ``clock`` gives
    each event's ``at`` (a writer's claim).

    Raises:
        UsageError: no such run.
    """
    state = run_state(ledger, run_id)
    started = state.runs[run_id].started
    bank = state.banks[started.bank_hash].event
    gold: dict[str, GoldResult] = {g.case_id: g for g in bank.gold}
    summary = ClaimsRecording(run_id)
    pending: list[dict[str, Any]] = []
    for key in sorted(state.caseruns):
        caserun = state.caseruns[key]
        if caserun.run_id != run_id:
            continue
        answer = executed_answer(caserun)
        if answer is None:
            summary.skip("not_executed")
            continue
        parsed, parsed_link, executed, executed_link = answer
        if not (parsed.summary or "").strip():
            summary.skip("no_summary")
            continue
        if _checked(caserun, parsed_link):
            summary.already += 1
            continue
        result = _table(executed.columns, executed.rows, executed.truncated)
        g = gold.get(caserun.case_id)
        found = check_summary(
            parsed.summary or "", result, None if g is None else _table(g.columns, g.rows)
        )
        pending.append(
            {
                "case_id": caserun.case_id,
                "attempt": caserun.attempt,
                "claims_version": CLAIMS_VERSION,
                "evidence": (parsed_link, executed_link),
                "gold_digest": None if g is None else g.digest,
                "claims": tuple(
                    ClaimCheck(
                        kind=c.kind,
                        text=c.text,
                        reading=c.reading,
                        verdict=c.verdict,
                        detail=c.detail,
                        gold_verdict=c.gold_verdict,
                    )
                    for c in found
                ),
            }
        )
    summary.appended = append_diagnostics(ledger, signer, clock, run_id, ClaimsChecked, pending)
    return summary


class ClaimsView(DiagnosticView[S.ClaimBlock, claims_view_mod.ClaimRow]):
    """A run's answer contract as the command shows it."""


def claims_view(ledger: Ledger, run_id: str, scorer_version: str = SCORER_VERSION) -> ClaimsView:
    """The claim counts of one run (``scorer_version``: which results are correct).

    Raises:
        UsageError: no such run.
    """

    def fold(
        attempts: list[Attempt], _bank: Any
    ) -> tuple[S.ClaimBlock, list[claims_view_mod.ClaimRow]]:
        return claims_view_mod.summarize(attempts), claims_view_mod.attempt_rows(attempts)

    return diagnostic_view(ledger, run_id, scorer_version, ClaimsView, fold)
