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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from ledger import codec, tree_index
from ledger.errors import UsageError
from ledger.events import (
    LEDGER_STREAM,
    BankPublished,
    EventImported,
    PromptStored,
    RunFinished,
    RunStarted,
    tag_of,
)
from ledger.merkle import TreeAccumulator
from ledger.store import Ledger
from ledger.stream_read import (
    ENVELOPE,
    Row,
    decoded,
    every_stream_listed,
    rows_after,
    stream_below,
)
from ledger.tree_index import check_stream
from projections import caseruns
from projections.caseruns import ATTEMPT_EVENTS, State
from projections.replay import paused_gc

__all__ = [
    "RecordedRun",
    "Snapshot",
    "read_state",
    "run_listing",
    "run_snapshots",
]

T = TypeVar("T")
# A run's stored prompts (issue 22) are skipped with its attempt events when it is not asked for.
_ATTEMPT_TAGS = frozenset(tag_of(cls) for cls in (*ATTEMPT_EVENTS, PromptStored))


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

    ``runs`` limits the CaseRuns kept to those runs. Read through the tree index (a
    ledger file with a stored checkpoint), only those runs are listed and only their
    rows are read; read whole (no index, or a server ledger), every run is still
    listed, with its RunStarted, RunFinished and event count.

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
                # Rebuilt once (the index may be the stale side); then the ledger's own
                # columns disagree with its bodies: the full read names the seq.
                index = None if again else tree_index.rebuild(ledger)
    return _read_all(ledger, stop, wanted)


def _read_all(ledger: Ledger, stop: int, wanted: frozenset[str] | None) -> Snapshot:
    """Every row from seq 0, checked and folded (attempt events of other runs counted)."""
    state = caseruns.initial()
    tree = TreeAccumulator()
    heads: dict[str, tuple[int, bytes]] = {}
    apply, touch, decode = caseruns.apply, caseruns.touch_run, codec.decode
    envelope = ENVELOPE.decode
    attempt_tags = _ATTEMPT_TAGS
    with paused_gc():
        for row in ledger.scan_rows(stop):
            seq, body, leaf = row[0], row[1], row[2]
            tree.append(leaf)
            head = decoded(seq, envelope, body)
            check_stream(seq, head, heads)
            heads[head.stream] = (head.stream_seq, leaf)
            if head.type in attempt_tags and wanted is not None and head.stream not in wanted:
                touch(state, head.stream, head.at)
                state.size = seq + 1
                continue
            event = decoded(seq, decode, body)
            state = apply(state, (seq, leaf, event))
    state.size = stop
    # CaseRuns in key order (run, case, attempt), of listed runs only, as asked.
    keep = state.runs if wanted is None else wanted.intersection(state.runs)
    found = state.caseruns
    state.caseruns = {key: found[key] for key in sorted(found) if found[key].run_id in keep}
    return Snapshot(state, stop, tree.root(), heads)


_BANK_TAG = tag_of(BankPublished)
_RUN_TAG = tag_of(RunStarted)
#: A run imported from another machine starts with its RunStarted inside one (docs/exchange.md).
_RUN_TAGS = (_RUN_TAG, tag_of(EventImported))


@dataclass
class _Indexed:
    """What every read through the index shares: the verified index, the tree size
    asked for, the ledger stream's events (and banks) below it and the rows after the
    index, read once."""

    index: tree_index.TreeIndex
    stop: int
    root: bytes
    banks: list[Row]
    #: stream -> its rows from the index's size to ``stop`` (checked, in order).
    tail: dict[str, list[Row]]
    #: stream -> (stream_seq, leaf) of its last event below ``stop``.
    heads: dict[str, tuple[int, bytes]]


def _indexed(ledger: Ledger, index: tree_index.TreeIndex, stop: int) -> _Indexed:
    """The ledger stream's events below N and the rows after N, each checked."""
    prefix = min(index.size, stop)
    heads: dict[str, tuple[int, bytes]] = {}
    # Every event of the ledger stream is folded (banks, and whatever else a fold
    # reads from it); the fold ignores the rest (signers, checkpoints issued).
    banks = [row for row, _ in stream_below(ledger, index, LEDGER_STREAM, prefix, heads)]
    tail: dict[str, list[Row]] = {}
    if stop <= index.size:
        root = index.accumulator(stop).root()
    else:
        tree = index.accumulator(index.size)
        for row, head in rows_after(ledger, index, stop):
            seq, body, leaf = row.seq, row.body, row.leaf_hash
            tree.append(leaf)
            heads[head.stream] = (head.stream_seq, leaf)
            if head.type == _BANK_TAG or head.stream == LEDGER_STREAM:
                banks.append((seq, leaf, body))
            else:
                tail.setdefault(head.stream, []).append((seq, leaf, body))
        root = tree.root()
    return _Indexed(index, stop, root, banks, tail, heads)


def _fold_runs(ledger: Ledger, shared: _Indexed, wanted: frozenset[str]) -> Snapshot:
    """The state of the banks and the ``wanted`` runs, in seq order."""
    prefix = min(shared.index.size, shared.stop)
    heads: dict[str, tuple[int, bytes]] = {}
    items = list(shared.banks)
    for stream in sorted(wanted - {LEDGER_STREAM}):
        items.extend(row for row, _ in stream_below(ledger, shared.index, stream, prefix, heads))
        items.extend(shared.tail.get(stream, ()))
    heads.update(shared.heads)  # the ledger stream's, and those of the rows after N
    items.sort()
    state = caseruns.initial()
    apply, decode = caseruns.apply, codec.decode
    with paused_gc():
        for seq, leaf, body in items:
            state = apply(state, (seq, leaf, decoded(seq, decode, body)))
    state.size = shared.stop
    found = state.caseruns
    state.caseruns = {key: found[key] for key in sorted(found) if found[key].run_id in wanted}
    state.runs = {run: info for run, info in state.runs.items() if run in wanted}
    heads = {s: h for s, h in heads.items() if s in wanted or s == LEDGER_STREAM}
    return Snapshot(state, shared.stop, shared.root, heads)


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
    return _fold_runs(ledger, _indexed(ledger, index, stop), wanted)


@dataclass(frozen=True)
class RecordedRun:
    """A run whose last event is a RunFinished carrying its totals (issue 22), read
    without folding the run: its RunStarted and that RunFinished, each the body of the
    verified leaf at its seq, and ``banks``, a state holding the published banks only."""

    banks: State
    started: RunStarted
    finished: RunFinished


def run_listing(ledger: Ledger) -> Iterator[Snapshot | RecordedRun]:
    """What ``caseledger runs`` reads: each run of the whole log in run id order, as a
    :class:`RecordedRun` when its last event is a RunFinished with totals, else as the
    snapshot :func:`run_snapshots` folds.

    Every row of the log is checked first, streamed (:func:`ledger.tree_index.check_log`:
    body to leaf hash, chain, the row's columns against its body, and each leaf against
    the signed tree below the index's size), so a damaged row of a run listed from two
    of its rows still stops the listing, naming its seq (issue 33).

    A run is read as recorded only through the verified tree index (a ledger file's,
    or the one a server ledger gets in memory), when its last event there (the head the
    index recorded, checked against the tree by :func:`run_snapshots`' own check of
    every head, or the last of the checked rows after the index) is also the row the
    store's stream index names as the stream's last, and its first event is the run's
    RunStarted at stream_seq 0. Anything else (no totals: an older ledger, an unfinished
    run, a rescore, slice, claim or withdrawal after the RunFinished; a calibration run;
    an imported run; any disagreement) is folded, as before.
    """
    return _snapshots(ledger, None, None, recorded=True)


def run_snapshots(
    ledger: Ledger, *, at_size: int | None = None, runs: Iterable[str] | None = None
) -> Iterator[Snapshot]:
    """One snapshot per run at tree size ``at_size`` (default: the whole log), in run id
    order, each holding the banks and that run only: what ``caseledger runs`` and a
    streamed report fold, one run in memory at a time. ``runs`` keeps only those runs
    (a name that is no run is simply not yielded).

    Read through the tree index when there is one (the rows after it read once); a
    ledger on a server (no file for an index) gets one built in memory by checking the
    whole log once (:func:`ledger.tree_index.in_memory`); without either (rows that
    do not hold), the whole log is read into one snapshot, as before (it may then hold
    every run, and names the bad seq).

    Raises:
        UsageError: ``at_size`` beyond the log (exit 2).
    """
    found = _snapshots(ledger, at_size, runs, recorded=False)
    return (snap for snap in found if isinstance(snap, Snapshot))


def _snapshots(
    ledger: Ledger, at_size: int | None, runs: Iterable[str] | None, *, recorded: bool
) -> Iterator[Snapshot | RecordedRun]:
    """:func:`run_snapshots`, or with ``recorded`` :func:`run_listing`."""
    size = ledger.size()
    stop = size if at_size is None else at_size
    if stop < 0 or stop > size:
        raise UsageError(
            f"--at-size {stop} is out of range: the ledger has {size} events",
            hint=f"use a tree size from 0 to {size}",
        )
    wanted = None if runs is None else frozenset(runs)
    index = tree_index.open_index(ledger)
    if index is None and tree_index.index_path(ledger) is None:
        # A ledger on a server (issue 21): the whole log checked once into an index in
        # memory (32 bytes an event), then each run read through the store's stream index.
        index = tree_index.in_memory(ledger, stop)
    if recorded:
        # A finished run is listed from two of its rows: every row is checked first
        # (issue 33), against the signed tree too where the index has one.
        tree_index.check_log(ledger, index)
    for again in (False, True):
        if index is None:
            break
        try:
            shared = _indexed(ledger, index, stop)
            streams = set(index.heads) | set(shared.tail)
            if wanted is None:
                every_stream_listed(ledger, index)
            else:
                for stream in wanted - streams - {LEDGER_STREAM}:
                    # A run asked for that the index does not list must have no rows
                    # below it either (else the index lost it: rebuild).
                    if next(iter(ledger.indexed_stream(stream, index.size)), None) is not None:
                        raise tree_index.IndexMismatch(f"stream {stream}: not in the index")
                streams &= wanted
            found = sorted(s for s in streams if _is_run(ledger, index, shared, s))
            return _each_run(ledger, shared, found, recorded=recorded and wanted is None)
        except tree_index.IndexMismatch:
            index = None if again else tree_index.rebuild(ledger)
    return iter([_read_all(ledger, stop, wanted)])


def _each_run(
    ledger: Ledger, shared: _Indexed, runs: list[str], *, recorded: bool = False
) -> Iterator[Snapshot | RecordedRun]:
    """Each run's snapshot; a run whose stream disagrees with the index is read again
    after the index is rebuilt from the log (it may have been the stale side), then,
    if it still disagrees, by the full read (which names the seq of an edited row).
    With ``recorded``, a run whose last event carries its totals is yielded as a
    :class:`RecordedRun` instead (:func:`run_listing`)."""
    banks: tuple[_Indexed, State] | None = None
    for run in runs:
        wanted = frozenset([run])
        try:
            if recorded:
                if banks is None or banks[0] is not shared:
                    banks = (shared, _banks_state(shared))
                found = _recorded_run(ledger, shared, run, banks[1])
                if found is not None:
                    yield found
                    continue
            snap = _fold_runs(ledger, shared, wanted)
        except tree_index.IndexMismatch:
            snap = _again(ledger, shared.stop, wanted)
            index = tree_index.open_index(ledger)
            if index is not None:
                shared = _indexed(ledger, index, shared.stop)
        if snap.state.runs:  # a stream that starts after the tree size asked for is no run yet
            yield snap


_FINISHED_TAG = tag_of(RunFinished)


def _banks_state(shared: _Indexed) -> State:
    """A state holding only what the ledger stream's events below the tree size fold
    to (the published banks), as every run's snapshot holds them."""
    state = caseruns.initial()
    for seq, leaf, body in shared.banks:
        state = caseruns.apply(state, (seq, leaf, decoded(seq, codec.decode, body)))
    state.size = shared.stop
    return state


def _recorded_run(
    ledger: Ledger, shared: _Indexed, stream: str, banks: State
) -> RecordedRun | None:
    """The run as recorded when its last event is a RunFinished with totals (see
    :func:`run_listing`); None to fold it. Raises IndexMismatch where a row read
    through the index is not the verified leaf (the caller reads the run again)."""
    index = shared.index
    tail = shared.tail.get(stream)
    count = -1
    if tail:
        # the rows after the index: each checked (leaf, chain, stream chain) by _indexed
        seq, leaf, body = tail[-1]
    else:
        head = index.heads.get(stream)
        if head is None:
            return None
        count, seq, leaf = head
        stored = ledger.get(seq)  # its body hashed to its stored leaf
        if stored is None or stored.leaf_hash != leaf or index.leaf(seq) != leaf:
            raise tree_index.IndexMismatch(f"stream {stream}: head row")
        body = stored.body
    last = decoded(seq, ENVELOPE.decode, body)
    if last.stream != stream or last.type != _FINISHED_TAG:
        return None
    if not tail and last.stream_seq != count:
        raise tree_index.IndexMismatch(f"stream {stream}: head names another event")
    # The store's stream index must name the same row as the stream's last (a row
    # filed under another stream, or hidden from it, makes the run folded, checked).
    try:
        named = ledger.stream_head(stream)
    except (ValueError, TypeError):  # an edited stream_seq column (text): fold, which names it
        return None
    if named != (last.stream_seq, leaf, seq):
        return None
    finished = decoded(seq, codec.decode, body)
    if not isinstance(finished, RunFinished) or isinstance(finished.totals, msgspec.UnsetType):
        return None
    if stream in index.heads:
        first_seq, first_body, _ = next(iter(ledger.indexed_stream(stream, index.size)))
        if codec.leaf_hash(first_body) != index.leaf(first_seq):
            raise tree_index.IndexMismatch(f"stream {stream}: first event")
    else:
        first_seq, _, first_body = tail[0] if tail else (-1, b"", b"")
    started = decoded(first_seq, codec.decode, first_body)
    if (
        not isinstance(started, RunStarted)
        or started.stream != stream
        or started.stream_seq != 0
        or started.run_id != stream
        or first_seq > seq
    ):
        return None
    return RecordedRun(banks, started, finished)


def _again(ledger: Ledger, stop: int, wanted: frozenset[str]) -> Snapshot:
    """The runs' snapshot after the index disagreed: through a rebuilt index, else by
    the full read (which names the seq of an edited row), keeping only those runs."""
    index = tree_index.rebuild(ledger)
    if index is not None:
        try:
            return _read_indexed(ledger, index, stop, wanted)
        except tree_index.IndexMismatch:
            pass
    snap = _read_all(ledger, stop, wanted)
    snap.state.runs = {run: info for run, info in snap.state.runs.items() if run in wanted}
    return snap


def _is_run(ledger: Ledger, index: tree_index.TreeIndex, shared: _Indexed, stream: str) -> bool:
    """Whether the stream's first event (checked against the tree) is a RunStarted
    (or an imported run's first event, which import checks is its RunStarted)."""
    if stream == LEDGER_STREAM:
        return False
    if stream in index.heads:
        seq, body, _ = next(iter(ledger.indexed_stream(stream, index.size)), (-1, b"", b""))
        if seq < 0 or codec.leaf_hash(body) != index.leaf(seq):
            raise tree_index.IndexMismatch(f"stream {stream}: first event")
    else:
        seq, _, body = shared.tail[stream][0]
    return decoded(seq, ENVELOPE.decode, body).type in _RUN_TAGS
