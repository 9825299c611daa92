"""Which event ends an attempt: the one definition every reader uses.

An attempt's events are read in log order. Its *terminal* event is the LAST of

* its AttemptCancelled events, and
* its ScoreComputed events with ``scorer_version`` V,

where V is the scorer version of the view (a report, ``--scorer V``), or any
version when V is None (the runner's resume and summary count, a rescore's
choice of the score to re-derive, a baseline's re-derived scorecard). Every
other event (PromptSent, SqlExecuted, VariantChecked, ...) never ends an attempt.
The outcome is ``scored`` when the terminal is a ScoreComputed, ``cancelled``
when it is an AttemptCancelled, ``unscored`` when there is none.

An outcome is *final* (a resume never runs the attempt again) when it is scored,
or cancelled for a reason other than ``interrupted``; because the last terminal
counts, an attempt cancelled as interrupted and then scored by a resume is final,
and one scored and then cancelled as interrupted is not.

Callers: ``projections/caseruns.resolve`` (reports), ``ledger/run/runner``
(resume, summary), ``ledger/app/rescore`` and ``ledger/app/baseline``. The function is
pure: it reads its arguments only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from ledger.events import AttemptCancelled, EventBase, ScoreComputed

__all__ = ["RETRYABLE_CANCEL", "Outcome", "Terminal", "terminal"]

Outcome = Literal["scored", "cancelled", "unscored"]

#: Cancellation reasons after which a resume runs the attempt again.
RETRYABLE_CANCEL = frozenset({"interrupted"})


class Terminal(msgspec.Struct, frozen=True):
    """The terminal event of one attempt: its position in the events given, and the outcome.

    ``index`` and ``event`` are None when the outcome is ``unscored``.
    """

    outcome: Outcome
    index: int | None = None
    event: ScoreComputed | AttemptCancelled | None = None

    @property
    def score(self) -> ScoreComputed | None:
        """The terminal ScoreComputed, when the attempt is scored."""
        return self.event if isinstance(self.event, ScoreComputed) else None

    @property
    def final(self) -> bool:
        """Scored, or cancelled for a reason a resume does not retry."""
        if isinstance(self.event, AttemptCancelled):
            return self.event.reason not in RETRYABLE_CANCEL
        return self.outcome == "scored"


UNSCORED = Terminal("unscored")


def terminal(events: Iterable[EventBase], scorer_version: str | None) -> Terminal:
    """The terminal event of one attempt's ``events`` (log order) under ``scorer_version``.

    ``scorer_version`` None: a ScoreComputed of any version ends the attempt.

    >>> from ledger.events import PromptSent
    >>> ps = PromptSent(stream="r", stream_seq=1, stream_prev=None, at="t", case_id="c",
    ...                 attempt=1, prompt="p", prompt_sha256="sha256:")
    >>> cancel = AttemptCancelled(stream="r", stream_seq=2, stream_prev=None, at="t",
    ...                           case_id="c", attempt=1, reason="interrupted", message="m")
    >>> t = terminal([ps, cancel, ps], "2.0.0")
    >>> t.outcome, t.index, t.final
    ('cancelled', 1, False)
    >>> terminal([ps], None).outcome
    'unscored'
    """
    found = UNSCORED
    for i, event in enumerate(events):
        if isinstance(event, AttemptCancelled):
            found = Terminal("cancelled", i, event)
        elif isinstance(event, ScoreComputed) and (
            scorer_version is None or event.scorer_version == scorer_version
        ):
            found = Terminal("scored", i, event)
    return found
