"""What every diagnostic of a run shares (understanding slices, the answer contract):
read one run, find each attempt's scored answer, count what was left alone, and
append the new diagnostic events in one batch on the run's stream.

Diagnostics never change a score: they are events after it, each folded by its own
projection (``projections/slices.py``, ``projections/claims.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec

from ledger.app.snapshot import read_state
from ledger.errors import UsageError
from ledger.events import BankPublished, EventBase, OutputParsed, ScoreComputed, SqlExecuted
from ledger.harness.attempt import Stream
from ledger.keys import Signer
from ledger.store import Ledger
from projections.caseruns import Attempt, CaseRun, State, attempts_of_run
from projections.outcome import terminal as outcome_of
from projections.report.jsonio import plain

__all__ = [
    "DiagnosticRecording",
    "DiagnosticView",
    "append_diagnostics",
    "diagnostic_view",
    "executed_answer",
    "run_state",
]


@dataclass
class DiagnosticRecording:
    """What a diagnostic recorder appended and left alone, per reason."""

    run_id: str
    appended: int = 0
    already: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        """Count one attempt left without a diagnostic event."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


#: A diagnostic's summary (its report block) and the struct of one attempt's row.
B = TypeVar("B", bound=msgspec.Struct)
R = TypeVar("R", bound=msgspec.Struct)


@dataclass(frozen=True)
class DiagnosticView(Generic[B, R]):
    """One run's diagnostic counts as a command shows them."""

    run_id: str
    bank: str
    scorer_version: str
    planned: int
    summary: B
    attempts: list[R]

    def document(self, appended: int) -> dict[str, Any]:
        """The ``--json`` document of a diagnostic command: the run, its bank, the
        scorer viewed, planned and newly appended counts, the summary, every attempt."""
        return {
            "run": self.run_id,
            "bank": self.bank,
            "scorer_version": self.scorer_version,
            "planned": self.planned,
            "appended": appended,
            **plain(self.summary),
            "attempts": plain(self.attempts),
        }


V = TypeVar("V", bound=DiagnosticView[Any, Any])


def diagnostic_view(
    ledger: Ledger,
    run_id: str,
    scorer_version: str,
    kind: type[V],
    fold: Callable[[list[Attempt], BankPublished], tuple[B, list[R]]],
) -> V:
    """One run's diagnostic view: its planned attempts under ``scorer_version`` folded
    by ``fold`` (attempts, the run's bank) into the summary and the attempt rows.

    Raises:
        UsageError: no such run.
    """
    state = run_state(ledger, run_id)
    bank = state.banks[state.runs[run_id].started.bank_hash].event
    attempts = attempts_of_run(state, run_id, scorer_version)
    summary, rows = fold(attempts, bank)
    return kind(
        run_id=run_id,
        bank=f"{bank.bank_id}@{bank.version}",
        scorer_version=scorer_version,
        planned=len(attempts),
        summary=summary,
        attempts=rows,
    )


def run_state(ledger: Ledger, run_id: str) -> State:
    """The fold of one run (and the banks), every byte read checked.

    Raises:
        UsageError: no such run.
    """
    state = read_state(ledger, runs=[run_id]).state
    if run_id not in state.runs:
        raise UsageError(
            f"no run {run_id!r} in {ledger.path}", hint="`caseledger runs` lists the runs"
        )
    return state


def executed_answer(caserun: CaseRun) -> tuple[OutputParsed, str, SqlExecuted, str] | None:
    """The OutputParsed and SqlExecuted (with their links) the latest score names, when
    its SQL executed; None otherwise."""
    score = outcome_of([s.event for s in caserun.steps], None).score
    if not isinstance(score, ScoreComputed):
        return None
    named = set(score.evidence)
    parsed: tuple[OutputParsed, str] | None = None
    executed: tuple[SqlExecuted, str] | None = None
    for step in caserun.steps:
        if step.link not in named:
            continue
        if isinstance(step.event, OutputParsed):
            parsed = (step.event, step.link)
        elif isinstance(step.event, SqlExecuted):
            executed = (step.event, step.link)
    if parsed is None or executed is None or not executed[0].ok or not parsed[0].sql:
        return None
    return parsed[0], parsed[1], executed[0], executed[1]


def append_diagnostics(
    ledger: Ledger,
    signer: Callable[[], Signer],
    clock: Callable[[], str],
    run_id: str,
    kind: type[EventBase],
    pending: Iterable[dict[str, Any]],
) -> int:
    """Append one ``kind`` event per field set of ``pending`` on the run's stream, in
    one batch signed by ``signer()`` (called only when there is something to append);
    the number appended."""
    fields = list(pending)
    if not fields:
        return 0
    stream = Stream(run_id, clock, ledger.stream_events(run_id)[-1])
    batch = [stream.make(kind, **f)[0] for f in fields]
    ledger.append(batch, signer())
    return len(batch)
