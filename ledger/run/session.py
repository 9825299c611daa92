"""The one writer of a run: appends its batches and keeps its stream head true to the log.

Part of the runner (``ledger.run.runner``): one attempt per transaction, or several
in a group commit (``stage`` then ``flush``); ``finish`` closes the run with
RunFinished and its totals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ledger import events, stream_read
from ledger.adapters.base import MissingRecording, Request
from ledger.errors import InternalError, LedgerError, broken
from ledger.harness.attempt import AttemptKey, AttemptWriter, Stream
from ledger.harness.limits import TextPolicy
from ledger.keys import Signer
from ledger.run.calls import Outcome
from ledger.store import Ledger, StoredEvent
from projections.caseruns import BankInfo, State
from projections.report.totals import fold_stream, state_totals


@contextlib.contextmanager
def recording(key: AttemptKey) -> Iterator[None]:
    """Where one attempt's events are judged and made: an exception that is not a
    LedgerError is a caseledger bug (in the scorer, the guard, ...), raised as an
    InternalError naming the attempt, of which nothing was recorded (the attempts
    before it were); never an infrastructure cancellation."""
    try:
        yield
    except LedgerError:
        raise
    except Exception as exc:
        raise InternalError(
            exc, where=f"nothing was recorded for case {key[0]} attempt {key[1]}"
        ) from exc


class Session:
    """The one writer of a run: appends batches, keeps the stream head true to the log."""

    def __init__(
        self,
        ledger: Ledger,
        signer: Signer,
        run_id: str,
        clock: Callable[[], str],
        bank: events.BankPublished | None = None,
        stored: list[StoredEvent] | None = None,
        texts: TextPolicy | None = None,
    ) -> None:
        """``stored``: the run's stream as just read (checked) by the caller, else read here;
        ``texts``: how the run stores free text (cut, secrets scrubbed: issue 30)."""
        self.ledger, self.signer, self.run_id, self.clock = ledger, signer, run_id, clock
        self.texts = texts
        #: The run's bank: with it, a RunFinished carries the run's totals (issue 22).
        self.bank = bank
        self.stored: list[StoredEvent] = []
        self.last_seqs: list[int] = []  # the seqs of the last batch append() wrote
        self.stream = Stream(run_id, clock, None, texts)
        # The group commit: staged batches, each with the stream head after it.
        self.group: list[tuple[list[events.EventBase], tuple[int, str | None]]] = []
        #: The CaseRuns fold of the stream :meth:`finish` read for the totals (None before
        #: it, or without a bank): the run's summary takes its figures from it too.
        self.folded: State | None = None
        self.group_head: tuple[int, str | None] = (-1, None)
        self.resync(stored)

    def resync(self, stored: list[StoredEvent] | None = None) -> None:
        """Re-read the stream head from the log (after an interrupt it is the only truth).

        ``stored``: the stream as the caller has just read it, instead of reading it
        again. Attempts staged and not appended are dropped (the caller records them
        again).
        """
        self.group = []
        self.stored = (
            stream_read.stream_events(self.ledger, self.run_id) if stored is None else stored
        )
        last = self.stored[-1] if self.stored else None
        self.stream = Stream(self.run_id, self.clock, last, self.texts)

    def append(self, build: Callable[[Stream], list[events.EventBase]]) -> list[events.EventBase]:
        """Build a batch on the stream head and append it in one transaction, or not at all."""
        seq, prev = self.stream.seq, self.stream.prev
        try:
            batch = build(self.stream)
            self.last_seqs = self.ledger.append(batch, self.signer)
        except BaseException:
            self.stream.rollback(seq, prev)
            raise
        return batch

    def stage(self, build: Callable[[Stream], list[events.EventBase]]) -> list[events.EventBase]:
        """Build one attempt's batch on the stream head into the open group (not yet appended).

        The group is appended by :meth:`flush`; a batch that fails to build leaves the
        stream head where it was.
        """
        seq, prev = self.stream.seq, self.stream.prev
        try:
            batch = build(self.stream)
        except BaseException:
            self.stream.rollback(seq, prev)
            raise
        if not self.group:
            self.group_head = (seq, prev)
        self.group.append((batch, (self.stream.seq, self.stream.prev)))
        return batch

    def flush(self) -> list[list[events.EventBase]]:
        """Append the open group in ONE durable transaction (a group commit); returns its batches.

        Every attempt of the group is recorded, or none is. When the store refuses the
        group (a LedgerError, e.g. an event holding a secret), the attempts are appended
        one by one instead, so those before the refused one are recorded and the error
        names the refused one; the stream head then stays after the last recorded attempt.
        """
        group, self.group = self.group, []
        if not group:
            return []
        seq, prev = self.group_head
        try:
            self.ledger.append([e for batch, _ in group for e in batch], self.signer)
        except LedgerError:
            self.stream.rollback(seq, prev)
            for batch, head in group:  # the refused one raises; those before it stay
                self.ledger.append(batch, self.signer)
                self.stream.rollback(*head)
        except BaseException:
            self.stream.rollback(seq, prev)
            raise
        return [batch for batch, _ in group]

    def unflushed(self) -> int:
        """Attempts staged and not yet appended."""
        return len(self.group)

    def one(self, cls: type[events.EventBase], **fields: Any) -> events.EventBase:
        """Append one event."""
        return self.append(lambda stream: [stream.make(cls, **fields)[0]])[0]

    def cancel(self, key: AttemptKey, reason: str, message: str) -> events.EventBase:
        """AttemptCancelled for one attempt."""
        return self.one(
            events.AttemptCancelled, case_id=key[0], attempt=key[1], reason=reason, message=message
        )

    def finish(self, status: str, message: str = "") -> list[StoredEvent] | None:
        """RunFinished with the run's final status and, for a model or self-test run, its totals.

        The totals (issue 22: what ``caseledger runs`` shows of the run's attempts)
        are folded from the run's stream as recorded, read back from the log, by the
        definition ``runs`` folds with (``projections.report.build.stream_totals``: its
        fold is kept in :attr:`folded`); ``verify --recompute`` re-derives them.

        Returns the run's stream as read for the totals followed by the RunFinished as
        stored (what reading the stream again would give: the RunFinished was appended
        onto the head of the stream read, or the append failed), so that the run's
        summary needs no second read of the log; None when nothing was read (no bank).
        """
        fields: dict[str, Any] = {"status": status, "message": message}
        rows: list[StoredEvent] | None = None
        if self.bank is not None:
            rows = stream_read.stream_events(self.ledger, self.run_id)
            self.folded = fold_stream(
                BankInfo(-1, self.bank), ((r.seq, r.leaf_hash, r.event()) for r in rows)
            )
            totals = state_totals(self.folded)
            if totals is not None:
                fields["totals"] = totals
        self.one(events.RunFinished, **fields)
        finished = self.ledger.get(self.last_seqs[-1]) if rows is not None else None
        return None if rows is None or finished is None else [*rows, finished]

    def record(
        self, writer: AttemptWriter, request: Request, outcome: Outcome
    ) -> list[events.EventBase]:
        """Record one model answer as its attempt's batch; returns the batch."""
        key = (request.case_id, request.attempt)
        if isinstance(outcome, Exception):
            raise broken(f"case {key[0]} attempt {key[1]}: an exception passed as an answer")
        answer, tries = outcome.outcome, outcome.tries
        if isinstance(answer, MissingRecording):
            return [self.cancel(key, "missing_recording", answer.message)]
        with recording(key):
            return self.append(lambda s: writer.events_for(s, key, request.prompt, answer, tries))
