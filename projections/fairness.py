"""Fairness class of the model runs shown together: single_model, controlled_harness, or not.

Controls are read from the ``invocation`` recorded with every attempt
(ModelResponded / ProviderFailed), never from configuration. Two or more runs
are ``controlled_harness`` when, over every planned attempt of every run, they
share one harness kind, one prompt contract digest, response mode ``text``, a
single call, tools ``off`` and retries 0. Otherwise the class is
``not_controlled`` and ``differing_controls`` names each control that differs
or has a disallowed value; an attempt without invocation evidence (no model
call recorded) makes ``invocation_evidence`` differ: missing evidence is never
equal. Provider, auth mode, model and the explicit generation parameters
(temperature, reasoning effort, max tokens, ...) are disclosed variables: they
are listed, and the ones that differ are named, but they never break the class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from ledger.events import Invocation, ModelResponded, ProviderFailed
from projections.caseruns import Attempt
from projections.numbers import rate
from projections.report import schema as S

__all__ = [
    "CONSTRAINTS",
    "CONSUMES",
    "CONTROLS",
    "DISCLOSED",
    "RunInvocations",
    "classify",
    "invocation_of",
    "run_invocations",
]

CONSUMES = (ModelResponded, ProviderFailed)
CONTROLS = (
    "harness_kind",
    "response_mode",
    "single_call",
    "tools",
    "retries",
    "prompt_contract_digest",
)
#: Controls that must also have one specific value.
CONSTRAINTS: dict[str, object] = {
    "response_mode": "text",
    "single_call": True,
    "tools": "off",
    "retries": 0,
}
DISCLOSED = ("provider", "auth_mode", "model")


def invocation_of(attempt: Attempt) -> Invocation | None:
    """The invocation recorded with the attempt's model call, if any."""
    r = attempt.response or attempt.failure
    return r.invocation if r is not None else None


class RunInvocations(NamedTuple):
    """What :func:`classify` reads of one run's attempts: its distinct invocations in
    order of first use, and how many attempts and recorded invocations it has. A report
    keeps this instead of the attempts, so a section's fairness needs no run in memory."""

    distinct: list[Invocation]
    invocations: int
    attempts: int


def run_invocations(attempts: Sequence[Attempt]) -> RunInvocations:
    """The :class:`RunInvocations` of a run's planned attempts."""
    distinct: list[Invocation] = []
    count = 0
    for a in attempts:
        inv = invocation_of(a)
        if inv is None:
            continue
        count += 1
        if inv not in distinct:
            distinct.append(inv)
    return RunInvocations(distinct, count, len(attempts))


def _values(invocations: Sequence[Invocation], name: str) -> list[Any]:
    seen: list[Any] = []
    for inv in invocations:
        value = getattr(inv, name)
        if value not in seen:
            seen.append(value)
    return seen


def _one_or_list(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else (sorted(values, key=repr) if values else None)


def classify(runs: Sequence[tuple[str, Sequence[Attempt] | RunInvocations]]) -> S.Fairness:
    """The fairness block for model runs ``[(run id, planned attempts), ...]`` (any order);
    a run may be given as its :class:`RunInvocations` instead (the same block: every
    value below depends only on the distinct invocations in order and the two counts)."""
    ordered = sorted(runs, key=lambda r: r[0])
    controls: dict[str, S.Controls] = {}
    disclosed: dict[str, S.Disclosed] = {}
    coverage: dict[str, str | None] = {}
    per_run: dict[str, list[Invocation]] = {}
    missing: list[str] = []
    for run_id, given in ordered:
        found = given if isinstance(given, RunInvocations) else run_invocations(given)
        invocations = found.distinct
        per_run[run_id] = invocations
        coverage[run_id] = rate(found.invocations, found.attempts)
        if found.invocations < found.attempts or not found.attempts:
            missing.append(run_id)
        controls[run_id] = S.Controls(
            **{c: _one_or_list(_values(invocations, c)) for c in CONTROLS}
        )
        params: dict[str, Any] = {}
        for inv in invocations:
            for key, value in inv.parameters.items():
                params.setdefault(key, [])
                if value not in params[key]:
                    params[key].append(value)
        disclosed[run_id] = S.Disclosed(
            **{d: _one_or_list(_values(invocations, d)) for d in DISCLOSED},
            parameters={k: _one_or_list(v) for k, v in sorted(params.items())},
        )
    differing: list[str] = []
    if missing:
        differing.append("invocation_evidence")
    everything = [inv for invs in per_run.values() for inv in invs]
    for control in CONTROLS:
        values = _values(everything, control)
        wanted = CONSTRAINTS.get(control, values[0] if values else None)
        if len(values) > 1 or (values and values[0] != wanted):
            differing.append(control)
    klass: Literal["single_model", "controlled_harness", "not_controlled"]
    if len(ordered) < 2:
        klass = "single_model"
    else:
        klass = "controlled_harness" if not differing else "not_controlled"
    return S.Fairness(
        class_=klass,
        runs=[r for r, _ in ordered],
        controls=controls,
        differing_controls=differing,
        missing_invocation_evidence=missing,
        invocation_coverage=coverage,
        disclosed=disclosed,
        disclosed_differences=_disclosed_differences(disclosed),
    )


def _disclosed_differences(disclosed: dict[str, S.Disclosed]) -> list[str]:
    if len(disclosed) < 2:
        return []
    found = []
    rows = list(disclosed.values())
    for name in DISCLOSED:
        if len({repr(getattr(r, name)) for r in rows}) > 1:
            found.append(name)
    keys = sorted({k for r in rows for k in r.parameters})
    for key in keys:
        if len({repr(r.parameters.get(key)) for r in rows}) > 1:
            found.append(key)
    return found
