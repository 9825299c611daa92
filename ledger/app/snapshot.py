"""Read the log into a projection state, checking every byte the state is built from.

This is the one read path of everything a user is shown (``report``, ``runs``,
``gate`` on a ledger, ``rescore``, ``baseline freeze`` through the store's own
checked reads). One pass over the rows from seq 0 (:meth:`Ledger.scan_rows`):

* every body is hashed and must equal its stored leaf hash, and the chain must
  hold, before anything in it is used (ChainBrokenError names the first bad seq);
* the tree head printed beside a report is computed over exactly the leaves read;
* stream, type, case and attempt come from the checked body, never from the
  query columns beside it; each stream's own chain (stream_seq, stream_prev) is
  checked on the way;
* attempt events of runs that were not asked for are only counted (their envelope
  is decoded, not the whole body), so a report of one run does not decode every
  run's evidence.

Signatures are ``verify``'s job; a report names the tree head it was built over,
which a reader compares with a signed checkpoint. There is no cache: an earlier
release kept the fold in ``<ledger>.projections.db``, which nothing verified; it is
no longer read (and may be deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from ledger import codec
from ledger.app import tree_index
from ledger.errors import ChainBrokenError, UsageError, VerificationError
from ledger.events import LEDGER_STREAM, BankPublished, tag_of
from ledger.merkle import TreeAccumulator
from ledger.store import GENESIS_CHAIN, Ledger, link_of
from projections import caseruns
from projections.caseruns import ATTEMPT_EVENTS, State
from projections.replay import paused_gc

__all__ = ["Snapshot", "read_state"]

T = TypeVar("T")
_ATTEMPT_TAGS = frozenset(tag_of(cls) for cls in ATTEMPT_EVENTS)


class _Envelope(msgspec.Struct):
    """What filing an event needs; every other field of the body is skipped."""

    type: str
    stream: str
    stream_seq: int
    at: str
    stream_prev: str | None = None
    case_id: str | None = None
    attempt: int | None = None


_ENV: msgspec.json.Decoder[_Envelope] = msgspec.json.Decoder(_Envelope)


@dataclass(frozen=True)
class Snapshot:
    """A projection state and the tree head of exactly the events it was folded from."""

    state: State
    size: int
    root: bytes
    #: stream -> (stream_seq, leaf hash) of its last event in the snapshot.
    heads: dict[str, tuple[int, bytes]]


def read_state(
    ledger: Ledger, *, at_size: int | None = None, runs: Iterable[str] | None = None
) -> Snapshot:
    """The fold state at tree size ``at_size`` (default: the whole log), checked while read.

    ``runs`` limits the CaseRuns kept to those runs (every run is still listed, with
    its RunStarted, RunFinished and event count).

    Raises:
        UsageError: ``at_size`` beyond the log (exit 2).
        ChainBrokenError / VerificationError: a body, leaf hash, chain or stream chain
            does not hold; the message names the seq (exit 1).
    """
    size = ledger.size()
    stop = size if at_size is None else at_size
    if stop < 0 or stop > size:
        raise UsageError(
            f"--at-size {stop} is out of range: the ledger has {size} events",
            hint=f"use a tree size from 0 to {size}",
        )
    wanted = None if runs is None else frozenset(runs)
    if wanted is not None:
        index = tree_index.open_index(ledger)
        for again in (False, True):
            if index is None:
                break
            try:
                return _read_indexed(ledger, index, stop, wanted)
            except tree_index.IndexMismatch:
                if again:
                    raise ChainBrokenError(
                        f"the stream index of {ledger.location} disagrees with its events "
                        "(a stream column was edited)",
                        seq=None,
                        hint="run `caseledger verify`, which names the seq",
                    ) from None
                index = tree_index.rebuild(ledger)
    return _read_all(ledger, stop, wanted)


def _read_all(ledger: Ledger, stop: int, wanted: frozenset[str] | None) -> Snapshot:
    """Every row from seq 0, checked and folded (attempt events of other runs counted)."""
    state = caseruns.initial()
    tree = TreeAccumulator()
    heads: dict[str, tuple[int, bytes]] = {}
    apply, touch, decode, envelope = caseruns.apply, caseruns.touch_run, codec.decode, _ENV.decode
    attempt_tags = _ATTEMPT_TAGS
    with paused_gc():
        for row in ledger.scan_rows(stop):
            seq, body, leaf = row[0], row[1], row[2]
            tree.append(leaf)
            head = _decoded(seq, envelope, body)
            _check_stream(seq, head, heads)
            heads[head.stream] = (head.stream_seq, leaf)
            if head.type in attempt_tags and wanted is not None and head.stream not in wanted:
                touch(state, head.stream, head.at)
                state.size = seq + 1
                continue
            event = _decoded(seq, decode, body)
            state = apply(state, (seq, leaf, event))
    state.size = stop
    # CaseRuns in key order (run, case, attempt), of listed runs only, as asked.
    keep = state.runs if wanted is None else wanted.intersection(state.runs)
    found = state.caseruns
    state.caseruns = {key: found[key] for key in sorted(found) if found[key].run_id in keep}
    return Snapshot(state, stop, tree.root(), heads)


def _decoded(seq: int, decoder: Callable[[bytes], T], body: bytes) -> T:
    try:
        return decoder(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise VerificationError(f"seq {seq}: body is not a known event: {exc}", seq=seq) from None


def _check_stream(seq: int, head: _Envelope, heads: dict[str, tuple[int, bytes]]) -> None:
    last = heads.get(head.stream)
    want_seq, want_prev = (0, None) if last is None else (last[0] + 1, link_of(last[1]))
    if head.stream_seq != want_seq or head.stream_prev != want_prev:
        raise ChainBrokenError(
            f"seq {seq}: stream {head.stream}: stream_seq {head.stream_seq} after "
            f"{head.stream_prev}, expected stream_seq {want_seq} after {want_prev}",
            seq=seq,
        )


_BANK_TAG = tag_of(BankPublished)


def _read_indexed(
    ledger: Ledger, index: tree_index.TreeIndex, stop: int, wanted: frozenset[str]
) -> Snapshot:
    """The fold of the wanted runs (and every bank) read through the stream index.

    Below the index's size N, each stream asked for (and the ``ledger`` stream, for
    the banks) is read by the ledger's stream index: every body is hashed and must
    equal the verified leaf the tree has at its seq, its envelope must name the
    stream, the stream's own chain (stream_seq 0, 1, ... each naming the previous
    leaf) must hold and end at the head the index recorded at N (so an edited stream
    column can neither hide nor add an event). Rows from N to ``stop`` are read in
    full, as without an index. The root is that of the verified leaves below N and
    the leaves read after it.
    """
    prefix = min(index.size, stop)
    items: list[tuple[int, bytes, bytes]] = []
    heads: dict[str, tuple[int, bytes]] = {}
    for stream in (LEDGER_STREAM, *sorted(wanted - {LEDGER_STREAM})):
        last: tuple[int, int, bytes] | None = None
        for count, (seq, body, leaf) in enumerate(ledger.indexed_stream(stream, index.size)):
            if type(body) is not bytes or codec.leaf_hash(body) != index.leaf(seq):
                raise tree_index.IndexMismatch(f"seq {seq}: not the leaf of the tree")
            head = _decoded(seq, _ENV.decode, body)
            want_prev = None if last is None else link_of(last[2])
            if head.stream != stream or head.stream_seq != count or head.stream_prev != want_prev:
                raise tree_index.IndexMismatch(f"seq {seq}: stream chain")
            last = (count, seq, leaf)
            if seq < prefix and (stream != LEDGER_STREAM or head.type == _BANK_TAG):
                items.append((seq, leaf, body))
                heads[stream] = (head.stream_seq, leaf)
        if last != index.heads.get(stream):
            raise tree_index.IndexMismatch(f"stream {stream}: head differs")
    state = caseruns.initial()
    apply, decode = caseruns.apply, codec.decode
    items.sort()
    with paused_gc():
        for seq, leaf, body in items:
            state = apply(state, (seq, leaf, _decoded(seq, decode, body)))
        if stop <= index.size:
            root = index.accumulator(stop).root()
        else:
            root = _read_tail(ledger, index, stop, wanted, state, heads)
    state.size = stop
    found = state.caseruns
    state.caseruns = {key: found[key] for key in sorted(found) if found[key].run_id in wanted}
    state.runs = {run: info for run, info in state.runs.items() if run in wanted}
    return Snapshot(state, stop, root, heads)


def _read_tail(
    ledger: Ledger,
    index: tree_index.TreeIndex,
    stop: int,
    wanted: frozenset[str],
    state: State,
    heads: dict[str, tuple[int, bytes]],
) -> bytes:
    """Fold the rows from the index's size to ``stop``, each checked; returns the root."""
    tree = index.accumulator(index.size)
    chains = {s: (n, leaf) for s, (n, _, leaf) in index.heads.items()}
    apply, decode = caseruns.apply, codec.decode
    for seq, body, leaf in _tail_rows(ledger, index.size, stop):
        tree.append(leaf)
        head = _decoded(seq, _ENV.decode, body)
        _check_stream(seq, head, chains)
        chains[head.stream] = (head.stream_seq, leaf)
        if head.stream in wanted or head.type == _BANK_TAG:
            heads[head.stream] = (head.stream_seq, leaf)
            state = apply(state, (seq, leaf, _decoded(seq, decode, body)))
    return tree.root()


def _tail_rows(ledger: Ledger, start: int, stop: int) -> Iterator[tuple[int, bytes, bytes]]:
    """(seq, body, leaf) of rows ``start`` .. ``stop``-1: no gap, each body hashing to its
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
        yield seq, body, leaf
    if expected != stop:
        raise ChainBrokenError(
            f"seq {expected}: the ledger ends at size {expected}, not {stop}", seq=expected
        )
