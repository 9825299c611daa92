"""The early stop: attempts in a row failing the same provider or infrastructure way.

Part of the runner (``ledger.run.runner``): ``Streak`` counts the recorded
attempts and raises ``EarlyStop`` at ``--max-consecutive-failures`` (docs/running.md).
A refusal or a tool request is the model's own answer and never counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger import events

#: Attempts in a row failing the same way that stop a run (``--max-consecutive-failures``).
DEFAULT_MAX_CONSECUTIVE_FAILURES = 5
#: ProviderFailed kinds that are the model's own answer, never a reason to stop a run.
_MODEL_KINDS = frozenset({"policy_refusal", "tool_use"})


class EarlyStop(Exception):
    """Internal: attempts in a row failed the same way (``RunPlan.max_consecutive_failures``)."""


class Streak:
    """Counts attempts in a row that failed with the same provider or infrastructure failure."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.signature: tuple[str, int | None] | None = None
        self.count = 0
        self.first = ""

    def add(self, batch: Sequence[events.EventBase]) -> None:
        """Count one recorded attempt; raise EarlyStop when the limit is reached."""
        found = _failure_signature(batch)
        if found is None:
            self.signature, self.count = None, 0
            return
        signature, message = found
        if signature != self.signature:
            self.signature, self.count, self.first = signature, 0, message
        self.count += 1
        if self.limit and self.count >= self.limit:
            kind, status = signature
            what = kind + (f" (HTTP {status})" if status is not None else "")
            raise EarlyStop(
                f"{self.count} attempts in a row failed the same way, {what}: {self.first}"
            )


def _failure_signature(
    batch: Sequence[events.EventBase],
) -> tuple[tuple[str, int | None], str] | None:
    # (kind, HTTP status) and message of a provider or infrastructure failure; None else.
    for event in batch:
        if isinstance(event, events.ProviderFailed) and event.kind not in _MODEL_KINDS:
            return (event.kind, event.http_status), event.message
        if isinstance(event, events.AttemptCancelled) and event.reason == "infrastructure":
            return ("infrastructure", None), event.message
    return None
