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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from ledger import codec
from ledger.errors import ChainBrokenError, UsageError, VerificationError
from ledger.events import tag_of
from ledger.merkle import TreeAccumulator
from ledger.store import Ledger, link_of
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
