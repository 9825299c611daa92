"""A run's counters and its summary, folded from its stream (``ledger.run.runner``).

``Progress`` is what the CLI shows while a run goes; ``RunSummary`` the end-of-run
numbers, made by :func:`summarise` from the run's stream (the final outcome of each
planned attempt, by ``projections/outcome.py``'s rule, and with the bank the report's
own figures from ``projections.runsummary``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from ledger import events
from ledger.harness.attempt import AttemptKey
from ledger.store import StoredEvent
from projections.caseruns import State
from projections.outcome import Terminal
from projections.outcome import terminal as outcome_of
from projections.runsummary import FailureGroup, RetryFigures, figures_of, run_figures

TERMINAL = (events.ScoreComputed, events.AttemptCancelled)


@dataclass
class Progress:
    """Counters the CLI shows while a run goes. ``phase``: ``starting`` (the SQL
    workers start, the run's start is recorded, no call yet) or ``running`` (the
    calls are under way; the SQL workers may still be starting: ``workers_ready``)."""

    planned: int
    done: int = 0
    correct: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    phase: str = "running"
    #: Attempts whose SQL ran and whose result differs from gold (``result_correct`` is
    #: False, the report's "wrong"): neither correct nor failed (issue 35).
    wrong: int = 0
    #: Every SQL worker has started (set by the last one to start; issue 34): the
    #: calls do not wait for them, only the judging of an answer's SQL does.
    workers_ready: bool = True


@dataclass(frozen=True)
class RunSummary:
    """The end-of-run numbers for the one-screen summary, over the whole run.

    ``done`` counts attempts with a final outcome (scored, or cancelled for a
    reason a resume does not retry; the last terminal of any scorer version counts,
    as for resume). ``correct`` and ``failures`` count those attempts' outcomes under
    the scorer version the run recorded in RunStarted, as ``caseledger runs`` and the
    report show them, so a later rescore does not change the summary. ``total_score``
    is the weighted model score of the report.

    With the bank (``summarise(..., bank=...)``, as ``run`` does) the report's own
    figures are filled in (``projections.runsummary``): ``scored`` (attempts with a
    score; cancelled attempts are not among them), ``cancelled`` by reason, the
    result-correct and format-ok rates, ``format_ok``, and ``groups``: the failures
    by category and sub-kind with the first message of each. ``message`` is the
    RunFinished message (why a run failed or was cancelled).
    """

    run_id: str
    status: str
    planned: int
    done: int
    correct: int
    failures: dict[str, int]
    total_score: Decimal | None = None
    message: str = ""
    scored: int | None = None
    format_ok: int | None = None
    result_correct_rate: str | None = None
    format_ok_rate: str | None = None
    cancelled: dict[str, int] = field(default_factory=dict)
    format_ok_na: str | None = None  # why format-ok does not apply (issue 31)
    groups: tuple[FailureGroup, ...] = ()
    #: The report's wrong (the SQL ran, the result differs from gold) and the model
    #: calls that were tried again, with the bank (issue 35).
    wrong: int | None = None
    retries: RetryFigures | None = None


def attempt_states(
    stored: Iterable[StoredEvent], scorer_version: str | None = None
) -> dict[AttemptKey, Terminal]:
    """The terminal of each attempt that has one (projections/outcome.py), under
    ``scorer_version`` (None: a ScoreComputed of any version ends an attempt, the
    rule resume follows)."""
    return _terminals((item.event() for item in stored), scorer_version)


def _terminals(
    decoded: Iterable[events.EventBase], scorer_version: str | None
) -> dict[AttemptKey, Terminal]:
    by_attempt: dict[AttemptKey, list[events.EventBase]] = {}
    for event in decoded:
        if isinstance(event, TERMINAL):
            by_attempt.setdefault((event.case_id, event.attempt), []).append(event)
    return {key: outcome_of(found, scorer_version) for key, found in by_attempt.items()}


def is_final(state: Terminal | None) -> bool:
    # Scored, or cancelled for a reason a resume does not retry.
    return state is not None and state.final


def plan_keys(cases: Sequence[events.CaseSpec], attempts: int) -> list[AttemptKey]:
    """Every case of the bank times attempts 1..N, in bank order."""
    return [(c.id, n) for c in cases for n in range(1, attempts + 1)]


def count_outcome(progress: Progress, last: events.EventBase) -> None:
    if isinstance(last, events.ScoreComputed):
        if last.result_correct:
            progress.correct += 1
        elif last.result_correct is False:
            progress.wrong += 1
        if last.failure_kind != "none":
            progress.failures[last.failure_kind] = progress.failures.get(last.failure_kind, 0) + 1
    elif isinstance(last, events.AttemptCancelled):
        progress.failures[last.reason] = progress.failures.get(last.reason, 0) + 1


def summarise(
    stored: Sequence[StoredEvent],
    planned: Sequence[AttemptKey],
    bank: events.BankPublished | None = None,
    folded: State | None = None,
) -> RunSummary:
    """The summary of a run from its stream: the final outcome of each planned attempt.

    ``status`` is the last RunFinished's (``running`` when there is none yet). With
    ``bank`` (the run's published bank) the report's figures are added, from ``folded``
    when given (the CaseRuns fold of ``stored``, but for its RunFinished, on ``bank``:
    ``Session.folded``) instead of folding ``stored`` again.
    """
    run_id, status, message, recorded = "", "running", "", None
    decoded = [item.event() for item in stored]
    for event in decoded:
        run_id = event.stream
        if isinstance(event, events.RunStarted):
            recorded = event.versions.scorer
        elif isinstance(event, events.RunFinished):
            status, message = event.status, event.message
    states = _terminals(decoded, None)
    views = states if recorded is None else _terminals(decoded, recorded)
    progress = Progress(planned=len(planned))
    for key in planned:
        if is_final(states.get(key)):
            progress.done += 1
            view = views.get(key)
            if view is not None and view.event is not None and view.final:
                count_outcome(progress, view.event)
    summary = RunSummary(
        run_id=run_id,
        status=status,
        planned=progress.planned,
        done=progress.done,
        correct=progress.correct,
        failures=dict(sorted(progress.failures.items())),
        message=message,
    )
    if bank is None or recorded is None:
        return summary
    figures = (
        run_figures(
            bank,
            ((item.seq, item.leaf_hash, e) for item, e in zip(stored, decoded, strict=True)),
        )
        if folded is None
        else figures_of(bank, folded)
    )
    return dataclasses.replace(
        summary,
        total_score=None if figures.model_score is None else Decimal(figures.model_score),
        scored=figures.scored,
        format_ok=figures.format_ok,
        result_correct_rate=figures.result_correct_rate,
        format_ok_rate=figures.format_ok_rate,
        format_ok_na=figures.format_ok_na,
        cancelled=figures.cancelled,
        groups=figures.groups,
        wrong=figures.wrong,
        retries=figures.retries,
    )


def progress_of(summary: RunSummary) -> Progress:
    return Progress(
        planned=summary.planned,
        done=summary.done,
        correct=summary.correct,
        failures=dict(summary.failures),
    )
