"""How a batch of appended items becomes rows (part of :class:`ledger.store.Ledger`).

Each item (an event, or a Draft whose stream envelope is filled in here from the
stream's head) is encoded once, checked for secrets and for its declared shape, and
given the next seq, unless an equal event is already in the batch or stored in the
log at its own (stream, stream_seq): then the stored seq is returned and nothing is
written again; another event stored there is a fork of the stream (refused). A stream
head read from the store's stream index is checked against its row's body first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ledger import codec
from ledger.errors import ChainBrokenError, SecretLeakError, StoreConflictError, UsageError
from ledger.events import EventBase
from ledger.store_rows import (
    ENVELOPE_FIELDS,
    Draft,
    check_leaf,
    envelope_of,
    link_of,
    validate_body,
)
from ledger.stores import Backend

__all__ = ["AppendPlan"]


class AppendPlan:
    """The planning half of an append; :class:`ledger.store.Ledger` provides the state."""

    _db: Backend
    _clock: Callable[[], str]
    _secret_checks: list[Callable[[bytes], str | None]]

    def _plan(
        self, items: Sequence[EventBase | Draft], size: int, known: dict[bytes, int]
    ) -> tuple[list[tuple[int, EventBase, bytes, bytes]], list[int]]:
        """(seq, event, leaf hash, body) of each new row, and the seq of every item."""
        heads: dict[str, tuple[int, str | None]] = {}
        pending = dict(known)
        planned: list[tuple[int, EventBase, bytes, bytes]] = []
        seqs: list[int] = []
        for item in items:
            event = self._complete(item, heads)
            body = codec.encode(event)
            for check in self._secret_checks:
                if (what := check(body)) is not None:
                    raise SecretLeakError(
                        f"append refused: the {type(event).__name__} event of stream "
                        f"{event.stream} contains {what}; nothing of its batch was appended "
                        "(a provider or command text escaped the scrubber: a caseledger bug, "
                        "see docs/adapters.md, Secrets)"
                    )
            leaf = codec.leaf_hash(body)
            seen = pending.get(leaf)
            if seen is not None:
                seqs.append(seen)
                continue
            if not isinstance(item, Draft) and not self._continues(event, heads):
                # A stored copy of a complete event no longer continues its stream.
                stored = self._stored_copies([event], [leaf]).get(leaf)
                if stored is not None:
                    seqs.append(stored)
                    continue
                self._check_link(event, heads)
            validate_body(body)
            seq = size + len(planned)
            planned.append((seq, event, leaf, body))
            heads[event.stream] = (event.stream_seq, link_of(leaf))
            pending[leaf] = seq
            seqs.append(seq)
        return planned, seqs

    def _stored_copies(self, events: list[EventBase], leaves: list[bytes]) -> dict[bytes, int]:
        """leaf hash -> stored seq of those events already in the log.

        A stored copy sits at the event's own (stream, stream_seq), found through the
        ordered stream index. Another event stored there is a fork of the stream:
        StoreConflictError, nothing written.
        """
        keys = [(e.stream, e.stream_seq) for e in events]
        stored = self._db.rows_at(keys)
        found: dict[bytes, int] = {}
        for key, leaf in zip(keys, leaves, strict=True):
            rows = stored.get(key, [])
            same = [seq for seq, other in rows if other == leaf]
            if same:
                found[leaf] = same[0]
            elif rows:
                raise StoreConflictError(
                    f"stream {key[0]}: stream_seq {key[1]} is already stored at seq "
                    f"{rows[0][0]} as another event ({link_of(rows[0][1])}), not "
                    f"{link_of(leaf)}",
                    hint="import the stream's events in order, onto the stream head",
                )
        return found

    def _stream_head(
        self, stream: str, heads: dict[str, tuple[int, str | None]]
    ) -> tuple[int, str | None]:
        # (stream_seq of the last event, its link); (-1, None) for a new stream.
        if stream not in heads:
            row = self._db.stream_head(stream)
            heads[stream] = (-1, None) if row is None else (row[0], link_of(row[1]))
            if row is not None:
                self._check_head(stream, row[0], row[1], row[2])
        return heads[stream]

    def _complete(
        self, item: EventBase | Draft, heads: dict[str, tuple[int, str | None]]
    ) -> EventBase:
        if isinstance(item, EventBase):
            return item
        if not isinstance(item, Draft):
            raise UsageError(f"cannot append a {type(item).__name__}: expected an event or a Draft")
        clash = [f for f in ENVELOPE_FIELDS if f in item.fields]
        if clash:
            raise UsageError(f"a Draft must not set {', '.join(clash)}: the store fills them in")
        last, prev = self._stream_head(item.stream, heads)
        try:
            return item.cls(
                stream=item.stream,
                stream_seq=last + 1,
                stream_prev=prev,
                at=self._clock(),
                **item.fields,
            )
        except TypeError as exc:
            raise UsageError(f"bad {item.cls.__name__} draft: {exc}") from None

    def _check_head(self, stream: str, stream_seq: int, leaf: bytes, seq: int) -> None:
        """The row the stream index names as a stream's head must say so in its checked body."""
        row = next(iter(self._db.select("body, leaf_hash", seq, seq + 1, 1)), None)
        if row is None or row[1] != leaf:
            raise ChainBrokenError(f"stream {stream}: its head row is missing", seq=None)
        body = row[0]
        check_leaf(seq, body, leaf)
        head = envelope_of(seq, body)
        if head.stream != stream or head.stream_seq != stream_seq:
            raise ChainBrokenError(
                f"seq {seq}: the stream columns say {stream}#{stream_seq}, the body says "
                f"{head.stream}#{head.stream_seq}",
                seq=seq,
                hint="the ledger file was edited; run `caseledger verify` and restore a good copy",
            )

    def _continues(self, event: EventBase, heads: dict[str, tuple[int, str | None]]) -> bool:
        last, prev = self._stream_head(event.stream, heads)
        return event.stream_seq == last + 1 and event.stream_prev == prev

    def _check_link(self, event: EventBase, heads: dict[str, tuple[int, str | None]]) -> None:
        last, prev = self._stream_head(event.stream, heads)
        if event.stream_seq != last + 1 or event.stream_prev != prev:
            raise StoreConflictError(
                f"stream {event.stream}: event has stream_seq {event.stream_seq} after "
                f"{event.stream_prev}, but the stream head is stream_seq {last} ({prev})",
                hint="import the stream's events in order, onto the stream head",
            )
