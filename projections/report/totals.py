"""A run's totals and its ``caseledger runs`` row, from the fold state.

Part of the report build (``build.py``): :func:`run_totals` is the one definition of
the figures of a run's row that depend on its attempts (the runner records them in
RunFinished, ``verify --recompute`` re-derives them); :func:`run_overview` and
:func:`recorded_overview` make the rows.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ledger.errors import InternalError, UsageError
from ledger.events import CaseSpec, Event, RunFinished, RunStarted, RunTotals
from projections import aggregates, calibration, caseruns, quality
from projections.caseruns import BankInfo, RunInfo, State, attempts_of_run

__all__ = [
    "RunRow",
    "bank_cases",
    "fold_stream",
    "recorded_overview",
    "run_overview",
    "run_totals",
    "state_totals",
    "stream_totals",
]


def bank_cases(state: State, started: RunStarted) -> tuple[CaseSpec, ...]:
    """The cases of the bank ``started`` names, in the run's order (UsageError when the
    bank is not published in the state's events)."""
    bank = state.banks.get(started.bank_hash)
    if bank is None:
        raise UsageError(
            f"run {started.run_id} names bank {started.bank_hash}, which is not published "
            f"in the first {state.size} events",
            hint="build the report at a tree size that includes the BankPublished event",
        )
    by_id = {c.id: c for c in bank.event.cases}
    return tuple(by_id[c] for c in started.case_ids if c in by_id)


def _on(state: State, started: RunStarted) -> str:
    """``:<engine>`` for a run on a bank that is not on DuckDB (as ``--bank`` spells it)."""
    bank = state.banks.get(started.bank_hash)
    engine = "duckdb" if bank is None else bank.event.build.engine
    return "" if engine == "duckdb" else f":{engine}"


def run_totals(state: State, run_id: str) -> RunTotals:
    """The figures of a run's ``runs`` row that depend on its attempts, under its own scorer.

    The one definition: ``caseledger runs`` computes them so when it folds a run, the
    runner when it records them in the run's RunFinished (``RunFinished.totals``),
    ``verify --recompute`` when it re-derives them. ``first_event`` is the earliest
    date the run's events folded so far claim.
    """
    info = state.runs[run_id]
    started = info.started
    attempts = attempts_of_run(state, run_id, started.versions.scorer)
    cases = bank_cases(state, started)
    return RunTotals(
        done=sum(1 for a in attempts if a.outcome != "unscored"),
        planned=len(attempts),
        result_correct_rate=quality.summarize(attempts).result_correct_rate,
        score=aggregates.summarize(cases, attempts).scores.model_score,
        first_event=info.first_at,
    )


def stream_totals(bank: BankInfo, items: Iterable[tuple[int, bytes, Event]]) -> RunTotals | None:
    """:func:`run_totals` of the run whose stream ``items`` are (seq, leaf hash, event), in
    log order (a run's events, up to and not including the RunFinished to carry them),
    on ``bank`` (the BankPublished its RunStarted names). None when the stream holds no
    RunStarted, is a calibration run's (its row is not made of attempts), or holds a
    RunWithdrawn (such a run is folded by ``runs``, which then marks it withdrawn).
    Model and self-test runs (``run_kind`` ``model``, ``self_test``) get totals: their
    rows are made alike.
    """
    return state_totals(fold_stream(bank, items))


def fold_stream(bank: BankInfo, items: Iterable[tuple[int, bytes, Event]]) -> State:
    """The CaseRuns fold of one run's stream ``items`` (seq, leaf hash, event) on ``bank``,
    as :func:`stream_totals` folds it."""
    state = caseruns.initial()
    state.banks[bank.event.content_sha256] = bank
    for item in items:
        state = caseruns.apply(state, item)
    return state


def state_totals(state: State) -> RunTotals | None:
    """:func:`stream_totals` of the state :func:`fold_stream` made (None as it says)."""
    if len(state.runs) != 1:
        return None
    ((run_id, info),) = state.runs.items()
    if info.started.run_kind == "calibration" or info.withdrawn is not None:
        return None
    return run_totals(state, run_id)


class RunRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of ``caseledger runs`` (its ``--json`` is these fields, by name)."""

    run: str
    run_kind: str
    #: ``<bank id>@<version>``, with ``:<engine>`` for a bank not on DuckDB.
    bank: str
    bank_hash: str
    adapter: str
    profile: str
    requested_model: str | None
    status: str
    done: int
    planned: int
    result_correct_rate: str | None
    score: str | None
    scorer_version: str
    first_event: str
    kill_rate: str | None
    #: The withdrawal's reason, only for a withdrawn run (other listings keep their shape).
    withdrawn: str | msgspec.UnsetType = msgspec.UNSET


def _overview_row(state: State, info: RunInfo, totals: RunTotals) -> RunRow:
    """A ``runs`` row from a run's RunStarted, last RunFinished, withdrawal and totals."""
    started = info.started
    return RunRow(
        run=started.run_id,
        run_kind=started.run_kind,
        bank=f"{started.bank_id}@{started.bank_version}{_on(state, started)}",
        bank_hash=started.bank_hash,
        adapter=started.adapter_kind,
        profile=started.profile,
        requested_model=started.requested_model,
        status=info.finished.status if info.finished is not None else "unfinished",
        done=totals.done,
        planned=totals.planned,
        result_correct_rate=totals.result_correct_rate,
        score=totals.score,
        scorer_version=started.versions.scorer,
        first_event=totals.first_event,
        kill_rate=None,
        withdrawn=msgspec.UNSET if info.withdrawn is None else info.withdrawn.reason,
    )


def recorded_overview(state: State, started: RunStarted, finished: RunFinished) -> RunRow:
    """The ``runs`` row of a model run whose last event is ``finished``, a RunFinished
    carrying ``totals``: the same row :func:`run_overview` gives when it folds the run.

    ``state`` holds the published banks (for the bank's engine; a bank not published
    fails as in the fold). The fold's first date also counts the RunFinished's own.
    """
    totals = finished.totals
    if isinstance(totals, msgspec.UnsetType):
        raise InternalError(ValueError("a RunFinished without totals"), where="runs")
    bank_cases(state, started)  # a run on a bank that is not published fails as folded
    info = RunInfo(started, -1, started.at, started.at, finished=finished)
    first = min(totals.first_event, finished.at)
    return _overview_row(state, info, msgspec.structs.replace(totals, first_event=first))


def run_overview(state: State) -> list[RunRow]:
    """One row per run (in run id order) for ``caseledger runs``, under each run's own scorer."""
    rows = []
    for run_id in sorted(state.runs):
        info = state.runs[run_id]
        started = info.started
        row = _overview_row(state, info, run_totals(state, run_id))
        if started.run_kind == "calibration":
            # No attempts and no score: done when its totals are recorded.
            cal = calibration.summarize(state.calibrations.get(run_id))
            row = msgspec.structs.replace(
                row,
                done=row.planned if cal.finished else 0,
                result_correct_rate=None,
                score=None,
                kill_rate=cal.kill_rate,
            )
        rows.append(row)
    return rows
