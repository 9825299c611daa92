"""Quality of one run: result-correct and format-ok rates, failure classification, coverage.

``total`` is the number of planned attempts (every case of the run x attempts
1..N) and the denominator of every rate here. ``evaluated`` counts attempts
with complete evidence: a ScoreComputed under the scorer version of the view.
Correct, wrong (executed, not correct) and unknown (nothing executed, cancelled
or never recorded) add up to ``total``. Failure kinds come from the scores
(``failure_kind``); a cancellation is counted under its reason in
``cancelled``, and a cancellation for an infrastructure reason (a worker that
crashed twice, a scoring fault) also counts as an ``infrastructure`` failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.events import AttemptCancelled, OutputParsed, ScoreComputed, SqlExecuted
from projections.caseruns import Attempt
from projections.numbers import rate
from projections.report import schema as S

__all__ = ["CONSUMES", "FAILURE_CATEGORIES", "NO_CONTRACT", "imported_only", "summarize"]

CONSUMES = (ScoreComputed, AttemptCancelled, SqlExecuted, OutputParsed)
#: Why format-ok does not apply to a run of a benchmark's own predictions (issue 31).
NO_CONTRACT = (
    "not applicable: the answers are a benchmark's predictions (plain SQL, "
    "--replay-format), which carry no answer contract"
)
#: The report's failure categories (ScoreComputed.failure_kind other than none), in
#: report order; not the adapters' Failure kinds (ledger.adapters.base.ADAPTER_FAILURE_KINDS).
FAILURE_CATEGORIES = (
    "policy_refusal",
    "protocol",
    "guard",
    "execution",
    "provider",
    "infrastructure",
)


def imported_only(attempts: Sequence[Attempt]) -> bool:
    """True when every parsed answer of the run is a public benchmark's prediction
    (``OutputParsed.imported``): format-ok then does not apply (:data:`NO_CONTRACT`)."""
    parsed = [a.parsed for a in attempts if a.parsed is not None]
    return bool(parsed) and all(p.imported is True for p in parsed)


def summarize(attempts: Sequence[Attempt]) -> S.Quality:
    """Counts and rates over every planned attempt of a run. ``format_ok_rate`` is None
    for a run of a benchmark's own predictions (:func:`imported_only`)."""
    total = len(attempts)
    evaluated = correct = wrong = format_ok = sql_ok = 0
    failures = dict.fromkeys(FAILURE_CATEGORIES, 0)
    cancelled: dict[str, int] = {}
    unscored = 0
    for a in attempts:
        execution = a.execution
        if execution is not None and execution.ok:
            sql_ok += 1
        if a.outcome == "scored" and a.score is not None:
            evaluated += 1
            score = a.score
            correct += score.result_correct is True
            wrong += score.result_correct is False
            format_ok += score.format_ok
            if score.failure_kind != "none":
                failures[score.failure_kind] = failures.get(score.failure_kind, 0) + 1
        elif a.outcome == "cancelled" and a.cancel is not None:
            reason = a.cancel.reason
            cancelled[reason] = cancelled.get(reason, 0) + 1
            if reason == "infrastructure":
                failures["infrastructure"] += 1
        else:
            unscored += 1
    unknown = total - correct - wrong
    return S.Quality(
        total=total,
        evaluated=evaluated,
        coverage=rate(evaluated, total),
        correct=correct,
        wrong=wrong,
        unknown=unknown,
        unscored=unscored,
        result_correct_rate=rate(correct, total),
        format_ok_rate=None if imported_only(attempts) else rate(format_ok, total),
        sql_exec_success_rate=rate(sql_ok, total),
        failures=dict(sorted(failures.items())),
        failure_rates={k: rate(v, total) for k, v in sorted(failures.items())},
        cancelled=dict(sorted(cancelled.items())),
    )
