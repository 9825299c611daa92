"""The end-of-run figures of one run, as the report computes them (issue 20, "The run").

``caseledger run`` prints these at the end of a run. Nothing here defines a metric:
the weighted score is ``projections.aggregates.summarize``'s ``scores.model_score``, the
rates and the failure categories are ``projections.quality.summarize``'s, each over
the run's planned attempts under the scorer version the run recorded, as the
report and ``caseledger runs`` show them. What is added is the breakdown of each
failure category by sub-kind, with the first message of each (in plan order), so
a user sees *why* attempts failed without opening the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ledger.events import BankPublished, Event, ScoreComputed
from projections import aggregates, caseruns, quality
from projections.caseruns import Attempt

__all__ = [
    "FailureGroup",
    "RetryFigures",
    "RunFigures",
    "failure_of",
    "figures_of",
    "retry_figures",
    "run_figures",
]

# How much of a first failure message the summary keeps (one line of a screen).
MESSAGE_CHARS = 160


class FailureGroup(NamedTuple):
    """Attempts of one failure category and sub-kind, and the first one's message."""

    category: str
    sub_kind: str
    attempts: int
    first_message: str


class RetryFigures(NamedTuple):
    """The model calls of a run that were tried more than once (ModelResponded /
    ProviderFailed ``tries``, docs/running.md "Retries")."""

    #: Attempts whose call was tried more than once.
    attempts: int
    #: Tries beyond the first, over the run.
    extra_tries: int
    #: The outcome of every try that failed (``rate_limited``, ``server_error``, ...).
    failed_tries: dict[str, int]
    #: Microseconds waited before tries (backoff and the server's Retry-After).
    waited_us: int
    #: Tries whose wait the server asked for (Retry-After).
    retry_after: int


def retry_figures(attempts: Iterable[Attempt]) -> RetryFigures | None:
    """The retries of the run's attempts; None when no call was tried twice."""
    retried = extra = waited = asked = 0
    kinds: dict[str, int] = {}
    for a in attempts:
        holder = a.response if a.response is not None else a.failure
        tries = getattr(holder, "tries", None)
        if not isinstance(tries, tuple) or len(tries) < 2:
            continue
        retried += 1
        extra += len(tries) - 1
        for t in tries:
            waited += t.waited_us
            asked += t.retry_after_ms is not None
            if t.outcome != "ok":
                kinds[t.outcome] = kinds.get(t.outcome, 0) + 1
    if not retried:
        return None
    return RetryFigures(retried, extra, dict(sorted(kinds.items())), waited, asked)


class RunFigures(NamedTuple):
    """The report's figures of one run (strings as the report shows them)."""

    planned: int
    scored: int
    correct: int
    format_ok: int
    #: Why format-ok does not apply (a benchmark's predictions), else None (issue 31).
    format_ok_na: str | None
    result_correct_rate: str | None
    format_ok_rate: str | None
    model_score: str | None
    failures: dict[str, int]
    cancelled: dict[str, int]
    groups: tuple[FailureGroup, ...]
    #: Attempts whose SQL ran and whose result differs from gold (quality's "wrong").
    wrong: int = 0
    retries: RetryFigures | None = None


def _one_line(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 3] + "..."


def _scored_failure(a: Attempt, score: ScoreComputed) -> tuple[str, str, str]:
    kind = score.failure_kind
    detail = score.failure_detail if isinstance(score.failure_detail, str) else None
    execution = a.execution
    if a.failure is not None:
        status = a.failure.http_status
        sub = a.failure.kind + (f" (HTTP {status})" if status is not None else "")
        return kind, sub, a.failure.message
    if kind == "protocol":
        return kind, detail or "contract_error", (a.parsed.error if a.parsed else None) or ""
    if kind == "guard":
        violations = a.guarded.violations if a.guarded is not None else ()
        if violations:
            return kind, detail or violations[0].check, violations[0].message
        if execution is not None and execution.error_kind is not None:
            return kind, detail or execution.error_kind, execution.error_message or ""
        return kind, detail or "guard", ""
    if kind == "execution" and execution is not None:
        return kind, detail or execution.error_kind or "error", execution.error_message or ""
    return kind, detail or kind, ""


def failure_of(a: Attempt) -> tuple[str, str, str] | None:
    """(category, sub-kind, message) of a failed or cancelled attempt; None otherwise.

    The category is the report's (``quality.FAILURE_CATEGORIES``), or ``cancelled``
    for an attempt cancelled for any reason (its sub-kind is the reason). The
    sub-kind is the adapter's failure kind with its HTTP status (provider,
    policy_refusal), the cap or ``contract_error`` (protocol), the guard's first
    violation (guard), the SQL error kind (execution).
    """
    if a.outcome == "scored" and a.score is not None:
        if a.score.failure_kind == "none":
            return None
        return _scored_failure(a, a.score)
    if a.outcome == "cancelled" and a.cancel is not None:
        return "cancelled", a.cancel.reason, a.cancel.message
    return None


def run_figures(bank: BankPublished, run_events: Iterable[tuple[int, bytes, Event]]) -> RunFigures:
    """The figures of the one run whose events (seq, leaf hash, event) are given, on ``bank``.

    Raises:
        ValueError: the events hold no RunStarted.
    """
    state = caseruns.apply(caseruns.initial(), (0, b"", bank))
    for item in run_events:
        state = caseruns.apply(state, item)
    return figures_of(bank, state)


def figures_of(bank: BankPublished, state: caseruns.State) -> RunFigures:
    """:func:`run_figures` of a state that folded the events of one run on ``bank`` (the
    runner's end folds its stream once, for its totals and these figures).

    Raises:
        ValueError: the state holds no run, or more than one.
    """
    if len(state.runs) != 1:
        raise ValueError("the events of exactly one run are needed")
    run_id, info = next(iter(state.runs.items()))
    started = info.started
    attempts = caseruns.attempts_of_run(state, run_id, started.versions.scorer)
    by_id = {c.id: c for c in bank.cases}
    cases = tuple(by_id[c] for c in started.case_ids if c in by_id)
    q = quality.summarize(attempts)
    groups: dict[tuple[str, str], FailureGroup] = {}
    for a in attempts:
        found = failure_of(a)
        if found is None:
            continue
        category, sub, message = found
        seen = groups.get((category, sub))
        groups[(category, sub)] = (
            FailureGroup(category, sub, 1, _one_line(message))
            if seen is None
            else seen._replace(attempts=seen.attempts + 1)
        )
    return RunFigures(
        planned=q.total,
        scored=q.evaluated,
        correct=q.correct,
        format_ok=sum(
            1 for a in attempts if a.outcome == "scored" and a.score and a.score.format_ok
        ),
        format_ok_na=quality.NO_CONTRACT if quality.imported_only(attempts) else None,
        result_correct_rate=q.result_correct_rate,
        format_ok_rate=q.format_ok_rate,
        model_score=aggregates.summarize(cases, attempts).scores.model_score,
        failures={k: v for k, v in q.failures.items() if v},
        cancelled=dict(q.cancelled),
        groups=tuple(sorted(groups.values(), key=lambda g: (g.category, -g.attempts, g.sub_kind))),
        wrong=q.wrong,
        retries=retry_figures(attempts),
    )
