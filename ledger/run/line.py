"""The judging line of a run: answers taken from the calls, judged ahead, staged in order.

Part of the runner (``ledger.run.runner``): each answer is judged
(``AttemptWriter.prepare``) on a judge thread while the recording thread stages the
oldest one's batch into the session's open group, in the order the answers arrived.
"""

from __future__ import annotations

import collections
import functools
import queue
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

from ledger import events
from ledger.adapters.base import Answer, MissingRecording, Reply, Request
from ledger.harness.attempt import AttemptKey, AttemptWriter, Prepared, Stream
from ledger.run.calls import AdapterFault, Calls, Outcome
from ledger.run.session import Session, recording

#: How long the recording thread waits for a new answer at a time while the oldest
#: one is being judged (``Line._fill``): it checks the judgement between waits.
FILL_POLL_S = 0.002


class Line:
    """Answers taken from the calls, judged on the judge threads, staged in arrival order.

    ``depth``: answers judged ahead of the one being staged; ``window``: answers taken
    and not yet appended (judged ahead plus staged in the open group), at most.
    """

    def __init__(
        self,
        session: Session,
        writer: AttemptWriter,
        calls: Calls,
        judges: ThreadPoolExecutor,
        depth: int,
        window: int,
    ) -> None:
        self.session, self.writer, self.calls, self.judges = session, writer, calls, judges
        self.depth, self.window = depth, window
        self.pending: collections.deque[Pending] = collections.deque()
        self.staged: list[Pending] = []
        self.taken = 0
        self._failed = False  # the last answer taken was a failure: take no more ahead

    def more(self) -> bool:
        """Answers are still to come or to stage."""
        return self.taken < len(self.calls.requests) or bool(self.pending)

    def room(self) -> bool:
        """Another answer may be taken ahead now.

        Never after a failure (an early stop then records the answers it counted and the
        calls under way only, as without the line) and never past the window.
        """
        ahead = len(self.pending)
        return (
            not (self._failed and ahead)
            and ahead < self.depth
            and ahead + len(self.staged) < self.window
        )

    def take(self, *, block: bool, timeout: float | None = None) -> bool:
        """Take one answer from the calls and start judging it; False when none was ready
        (``block``: waiting for one, at most ``timeout`` seconds when given)."""
        if self.taken >= len(self.calls.requests):
            return False
        try:
            request, outcome = self.calls.get(timeout if block else 0)
        except queue.Empty:
            return False
        self.taken += 1
        judged: Future[Prepared] | None = None
        if isinstance(outcome, Answer) and not isinstance(outcome.outcome, MissingRecording):
            judged = self.judges.submit(
                self.writer.prepare,
                (request.case_id, request.attempt),
                request.prompt,
                outcome.outcome,
                outcome.tries,
            )
        self.pending.append(Pending(request, outcome, judged))
        self._failed = not isinstance(outcome, Answer) or not isinstance(outcome.outcome, Reply)
        return True

    def stage(self) -> list[events.EventBase]:
        """Stage the oldest answer's batch in the open group (waiting for its judgement).

        Raises:
            AdapterFault: the adapter raised on this call (the answer is dropped).
            InternalError: a caseledger bug judging or building it (nothing of it is staged).
        """
        item = self.pending[0]
        request, outcome, judged = item
        key = (request.case_id, request.attempt)
        if isinstance(outcome, Exception):
            self.pending.popleft()
            raise AdapterFault(request, outcome)
        build: Callable[[Stream], list[events.EventBase]]
        answer = outcome.outcome
        with recording(key):
            if judged is None:
                message = answer.message if isinstance(answer, MissingRecording) else ""
                build = _cancellation(key, "missing_recording", message)
            else:
                self._fill(judged)
                prepared = judged.result()
                build = functools.partial(self.writer.build, prepared=prepared)
            batch = self.session.stage(build)
        self.pending.popleft()
        self.staged.append(item)
        return batch

    def _fill(self, judged: Future[Prepared]) -> None:
        """While ``judged`` (the oldest answer) is still being judged, take the answers
        that come in meanwhile, within :meth:`room`, and start judging them.

        Without this the recording thread took answers only between two stagings, and
        the calls run at most ``--concurrency`` answers ahead of it: with one call
        thread, about one answer was judged at a time and the SQL workers sat idle.
        """
        while not judged.done() and self.room() and self.taken < len(self.calls.requests):
            self.take(block=True, timeout=FILL_POLL_S)

    def unrecorded(self) -> list[tuple[Request, Outcome, Prepared | None]]:
        """Answers taken and not appended, in arrival order, each with its judgement when
        it is ready (used on a stop to record them)."""
        out: list[tuple[Request, Outcome, Prepared | None]] = []
        for request, outcome, judged in [*self.staged, *self.pending]:
            prepared = None
            if judged is not None and judged.done() and judged.exception() is None:
                prepared = judged.result()
            out.append((request, outcome, prepared))
        self.staged, self.pending = [], collections.deque()
        return out


class Pending(NamedTuple):
    request: Request
    outcome: Outcome
    # None: nothing to judge (no recording, or the adapter raised)
    judged: Future[Prepared] | None


def _cancellation(
    key: AttemptKey, reason: str, message: str
) -> Callable[[Stream], list[events.EventBase]]:
    def build(stream: Stream) -> list[events.EventBase]:
        event, _ = stream.make(
            events.AttemptCancelled, case_id=key[0], attempt=key[1], reason=reason, message=message
        )
        return [event]

    return build
