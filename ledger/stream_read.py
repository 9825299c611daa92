"""One stream of the log read through the verified tree index (issue 34), every byte checked.

What a run reads at its start and end, what ``bank list`` reads of the ledger stream,
and what the full reads of ``ledger.app.snapshot`` share: the envelope of an event
(what filing it needs), a body decoded or its seq named, a stream's chain checked,
a stream's rows found by the store's stream index checked against the verified tree
(:func:`stream_below`), every stream listed by the index (:func:`every_stream_listed`)
and the rows after the index read in full (:func:`tail_rows`). It reads events only
(no projection): the run machinery and the bank registry, beneath the projections,
read through it.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import TypeVar

import msgspec

from ledger import codec, tree_index
from ledger.errors import ChainBrokenError, VerificationError
from ledger.store import GENESIS_CHAIN, Ledger, StoredEvent, link_of
from ledger.tree_index import check_stream

__all__ = [
    "ENVELOPE",
    "Envelope",
    "Row",
    "decoded",
    "every_stream_listed",
    "rows_after",
    "stream_below",
    "stream_events",
    "stream_names",
    "tail_rows",
]

T = TypeVar("T")


class Envelope(msgspec.Struct):
    """What filing an event needs; every other field of the body is skipped."""

    type: str
    stream: str
    stream_seq: int
    at: str
    stream_prev: str | None = None
    case_id: str | None = None
    attempt: int | None = None


ENVELOPE: msgspec.json.Decoder[Envelope] = msgspec.json.Decoder(Envelope)


#: (seq, leaf hash, body) of one checked row to fold.
Row = tuple[int, bytes, bytes]


def decoded(seq: int, decoder: Callable[[bytes], T], body: bytes) -> T:
    try:
        return decoder(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise VerificationError(f"seq {seq}: body is not a known event: {exc}", seq=seq) from None


def stream_below(
    ledger: Ledger,
    index: tree_index.TreeIndex,
    stream: str,
    prefix: int,
    heads: dict[str, tuple[int, bytes]],
) -> Iterator[tuple[Row, Envelope]]:
    """The stream's rows below ``prefix`` found by the stream index, each checked.

    Every body must hash to the verified leaf at its seq and name the stream; the
    stream's chain must hold and end, below the index's size N, at the head the
    index recorded (rows between ``prefix`` and N are checked, not yielded).
    """
    last: tuple[int, int, bytes] | None = None
    # closed here, also when a check stops the read early, while the store is open
    with contextlib.closing(ledger.indexed_stream_columns(stream, index.size)) as rows:
        for count, (seq, body, leaf, stream_seq, kind) in enumerate(rows):
            if type(body) is not bytes or codec.leaf_hash(body) != index.leaf(seq):
                raise tree_index.IndexMismatch(f"seq {seq}: not the leaf of the tree")
            head = decoded(seq, ENVELOPE.decode, body)
            want_prev = None if last is None else link_of(last[2])
            if head.stream != stream or head.stream_seq != count or head.stream_prev != want_prev:
                raise tree_index.IndexMismatch(f"seq {seq}: stream chain")
            if (stream_seq, kind) != (head.stream_seq, head.type):
                # the columns were edited: the full read names the seq (exit 1)
                raise tree_index.IndexMismatch(f"seq {seq}: the row's columns differ from its body")
            if last is not None and seq <= last[1]:
                raise tree_index.IndexMismatch(f"seq {seq}: stream out of order")
            last = (count, seq, leaf)
            if seq < prefix:
                heads[stream] = (count, leaf)
                yield (seq, leaf, body), head
    if last != index.heads.get(stream):
        raise tree_index.IndexMismatch(f"stream {stream}: head differs")


def every_stream_listed(ledger: Ledger, index: tree_index.TreeIndex) -> None:
    """Raise IndexMismatch unless the index's stream heads cover every event below its
    size: each head must be the row the verified tree has at its seq, naming that
    stream and stream_seq (so the stream has exactly stream_seq + 1 events there), and
    these counts must add up to the size. A stream dropped from the index (which would
    drop a run from a report of every run) is caught so, for one row read per stream."""
    if not index.heads_in_tree:
        for stream, (_, seq, leaf) in index.heads.items():
            if not 0 <= seq < index.size or index.leaf(seq) != leaf:
                raise tree_index.IndexMismatch(f"stream {stream}: head is not in the tree")
        index.heads_in_tree = True
    total = 0
    for stream, (count, seq, leaf) in index.heads.items():
        try:
            stored = ledger.get(seq)
        except ChainBrokenError:
            raise tree_index.IndexMismatch(f"seq {seq}: body") from None
        if stored is None or stored.leaf_hash != leaf:
            raise tree_index.IndexMismatch(f"stream {stream}: head row")
        head = decoded(seq, ENVELOPE.decode, stored.body)
        if head.stream != stream or head.stream_seq != count:
            raise tree_index.IndexMismatch(f"stream {stream}: head names another event")
        total += count + 1
    if total != index.size:
        raise tree_index.IndexMismatch(f"the streams hold {total} events, not {index.size}")


def stream_events(ledger: Ledger, stream: str) -> list[StoredEvent]:
    """Every row of one stream (a run id, or ``ledger``) in order, read through the
    verified tree index: what a run reads at its start and end (issue 34), without
    reading the whole log as :meth:`Ledger.stream_events` does.

    Checked as strongly as that read: below the index's size N (a signed stored
    checkpoint's), the index's stream heads must cover every event (one row read per
    stream, :func:`every_stream_listed`, so no stream's rows can be hidden from it),
    each of the stream's rows found by the store's stream index must hash to the
    verified leaf at its seq, name the stream and continue its chain to the recorded
    head; every row from N to the end is read in full (leaf, chain, every stream's
    chain), as in a report. The index is extended to the newest checkpoint first
    (:func:`ledger.tree_index.open_index`: only the rows since its last size).

    The ledger is also handed the verified tree of the first N leaves
    (:meth:`Ledger.adopt_tree`), so the checkpoint a writer signs at a run's end reads
    only the rows after N under the write lock. A ledger on a server has no index
    file: the whole log is checked into an index in memory first
    (:func:`ledger.tree_index.in_memory`, N = the log's size), before the lock.
    Without an index (no stored checkpoint, or an index that still disagrees after a
    rebuild) the whole log is read, as before, which names a bad seq.
    """
    return _through_index(
        ledger, lambda index: _stream_through(ledger, index, stream), ledger.stream_events, stream
    )


def stream_names(ledger: Ledger) -> set[str]:
    """Every stream name of the log (run ids and ``ledger``), read through the verified
    tree index as :func:`stream_events` reads a stream: the index's heads, each checked
    against the tree and the stored row (:func:`every_stream_listed`), and the streams
    of the rows after it, read in full. Without an index, the whole log is read."""

    def through(index: tree_index.TreeIndex) -> set[str]:
        every_stream_listed(ledger, index)
        return set(index.heads) | {head.stream for _, head in rows_after(ledger, index)}

    return _through_index(ledger, through, lambda _: set(ledger.streams()), "")


#: The verified index each open ledger last read through (issue 34): a run reads four
#: times (its bank, its run id, its start, its end), and the index is opened again only
#: when a newer checkpoint was stored since.
_OPENED: weakref.WeakKeyDictionary[Ledger, tree_index.TreeIndex] = weakref.WeakKeyDictionary()


def _through_index(
    ledger: Ledger,
    read: Callable[[tree_index.TreeIndex], T],
    whole: Callable[[str], T],
    stream: str,
) -> T:
    """``read`` through the ledger's verified index (rebuilt once when it disagrees; a
    server ledger's built in memory), the writer handed its tree
    (:meth:`Ledger.adopt_tree`); else ``whole(stream)``."""
    held = _OPENED.get(ledger)
    index = tree_index.reopen(ledger, held)
    if index is None and tree_index.index_path(ledger) is None:
        # A ledger on a server has no index file: the whole log checked once into an
        # index in memory (as run_snapshots does), read before the write lock, so the
        # writer's checkpoint at a run's end reads only the rows after it under the lock.
        index = tree_index.in_memory(ledger, ledger.size())
    for again in (False, True):
        if index is None:
            break
        try:
            found = read(index)
        except tree_index.IndexMismatch:
            index = None if again else tree_index.rebuild(ledger)
            continue
        if index is not held:
            ledger.adopt_tree(index.accumulator(index.size))
            _OPENED[ledger] = index
        return found
    _OPENED.pop(ledger, None)
    return whole(stream)


def _stream_through(ledger: Ledger, index: tree_index.TreeIndex, stream: str) -> list[StoredEvent]:
    """:func:`stream_events` through ``index``; IndexMismatch where it disagrees."""
    every_stream_listed(ledger, index)
    if stream not in index.heads and next(iter(ledger.indexed_stream(stream, index.size)), None):
        raise tree_index.IndexMismatch(f"stream {stream}: not in the index")
    out: list[StoredEvent] = []
    for (seq, leaf, body), _ in stream_below(ledger, index, stream, index.size, {}):
        stored = ledger.get(seq)  # the whole row (chain, key id, signature), body hashed
        if stored is None or stored.leaf_hash != leaf or stored.body != body:
            raise tree_index.IndexMismatch(f"seq {seq}: row changed while read")
        out.append(stored)
    # The rows after the index are read whole once (issue 34: not read again by seq).
    out += [row for row, head in rows_after(ledger, index) if head.stream == stream]
    return out


def rows_after(
    ledger: Ledger, index: tree_index.TreeIndex, stop: int | None = None
) -> Iterator[tuple[StoredEvent, Envelope]]:
    """Every row from the index's size to ``stop`` (the end), whole as stored, with its
    envelope: read in full (:func:`tail_rows`), each stream's chain continuing from the
    index's heads."""
    chains = {s: (n, leaf) for s, (n, _, leaf) in index.heads.items()}
    end = ledger.size() if stop is None else stop
    for row in tail_rows(ledger, index.size, end):
        head = decoded(row.seq, ENVELOPE.decode, row.body)
        check_stream(row.seq, head, chains)
        chains[head.stream] = (head.stream_seq, row.leaf_hash)
        yield row, head


def tail_rows(ledger: Ledger, start: int, stop: int) -> Iterator[StoredEvent]:
    """Rows ``start`` .. ``stop``-1, whole as stored: no gap, each body hashing to its
    leaf and the chain continuing from the stored chain of ``start``-1."""
    prev = GENESIS_CHAIN
    if start:
        before = ledger.get(start - 1)
        if before is None:
            raise ChainBrokenError(f"seq {start - 1}: missing", seq=start - 1)
        prev = before.chain
    expected, chain_hash, leaf_of = start, codec.chain_hash, codec.leaf_hash
    for row in ledger.iter_events(start, stop):
        seq, body, leaf = row.seq, row.body, row.leaf_hash
        if seq != expected:
            raise ChainBrokenError(
                f"seq {expected}: missing (the next stored row is seq {seq})", seq=expected
            )
        if type(body) is not bytes or type(leaf) is not bytes or leaf_of(body) != leaf:
            raise ChainBrokenError(f"seq {seq}: body does not hash to its leaf hash", seq=seq)
        prev = chain_hash(prev, leaf)
        if prev != row.chain:
            raise ChainBrokenError(
                f"seq {seq}: chain is {link_of(row.chain)}, expected {link_of(prev)}", seq=seq
            )
        expected += 1
        yield row
    if expected != stop:
        raise ChainBrokenError(
            f"seq {expected}: the ledger ends at size {expected}, not {stop}", seq=expected
        )
