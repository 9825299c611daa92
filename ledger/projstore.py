"""The projection store: the CaseRuns fold state kept in a file beside the ledger.

``<ledger dir>/<ledger stem>.projections.db`` is a plain SQLite file owned by
the application layer (the folds in ``projections/`` never see it):

* ``meta``: format, the ledger's origin, ``size`` (the last applied seq + 1)
  and the leaf hash of the last applied event;
* ``head``: the msgpack of the fold state without its CaseRuns (banks, runs,
  and the calibration events of calibration runs);
* ``caseruns``: one row per CaseRun: the msgpack list of the seqs of its steps
  (VariantChecked included). The events themselves stay in the ledger, which is
  append-only; :meth:`ProjectionStore.load` reads and decodes them by seq.

Catching up replays only the events after ``size``: attempt events are filed
by their envelope alone (run, case, attempt, date) and every other event is
decoded and folded. CaseRun rows are paged in from the file when an event
touches one and written back in batches, so a rebuild's memory does not grow
with the ledger. One transaction per catch-up:
an interrupted catch-up leaves the previous consistent state. When the file
does not match the ledger (another origin, a different leaf at ``size - 1``,
another format) it is dropped and rebuilt; ``rebuild`` always does that. A
report built from the store equals one built from a full replay (both run the
same fold over the same events).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from ledger import codec
from ledger.errors import StoreError, UsageError
from ledger.events import tag_of
from ledger.merkle import root_hash
from ledger.store import Ledger
from projections import caseruns
from projections.caseruns import ATTEMPT_EVENTS, CaseRun, Item, State, Step, caserun_key
from projections.replay import paused_gc, replay

__all__ = [
    "FORMAT",
    "ProjectionStore",
    "checkpoint_root",
    "items",
    "load_state",
    "replay_ledger",
    "store_path",
]

# /2: the fold also keeps VariantChecked steps and calibration events. A /1 file
# lacks them, so it is dropped and rebuilt like a store of another ledger.
FORMAT = "caseledger-projections/2"
_FLUSH_EVERY = 4096  # CaseRuns held in memory before they are written back

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS head (id INTEGER PRIMARY KEY CHECK (id = 0), body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS caseruns (
    key TEXT PRIMARY KEY, run_id TEXT NOT NULL, body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS caseruns_by_run ON caseruns (run_id);
"""

_ENC = msgspec.msgpack.Encoder(decimal_format="string")
_SEQS: msgspec.msgpack.Decoder[list[int]] = msgspec.msgpack.Decoder(list[int])
_HEAD: msgspec.msgpack.Decoder[State] = msgspec.msgpack.Decoder(State)
# The ``caseruns`` rows hold seq lists (a file whose rows hold msgpack CaseRuns, as
# /2 files written before this layout do, lacks this meta entry and is rebuilt).
_LAYOUT = "seqs"
_ATTEMPT_TAGS = frozenset(tag_of(cls) for cls in ATTEMPT_EVENTS)


class _Envelope(msgspec.Struct):
    """What filing an attempt event needs; every other field of the body is skipped."""

    type: str
    stream: str
    at: str
    case_id: str | None = None
    attempt: int | None = None


_ENV: msgspec.json.Decoder[_Envelope] = msgspec.json.Decoder(_Envelope)


def store_path(ledger_path: Path) -> Path:
    """``ledger.db`` -> ``ledger.projections.db`` in the same folder."""
    return ledger_path.with_name(ledger_path.stem + ".projections.db")


def items(ledger: Ledger, start: int = 0, stop: int | None = None) -> Iterator[Item]:
    """(seq, leaf hash, decoded event) for seq in [start, stop), streamed."""
    decode = codec.decode
    for seq, leaf, body in ledger.iter_bodies(start, stop):
        yield seq, leaf, decode(body)


def replay_ledger(ledger: Ledger, size: int | None = None) -> State:
    """A full in-memory replay of the first ``size`` events (all by default)."""
    stop = ledger.size() if size is None else size
    if stop > ledger.size():
        raise StoreError(f"the ledger has {ledger.size()} events, not {stop}")
    state = replay(items(ledger, 0, stop))
    state.size = stop  # also right for an empty range
    return state


class ProjectionStore:
    """The store file of one ledger. Use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ledger: Ledger | None = None
        try:
            self._conn = sqlite3.connect(path, isolation_level=None)
            self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot open the projection store {path}: {exc}",
                hint="delete it and run `caseledger rebuild`",
            ) from None

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> ProjectionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ meta

    def _meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def size(self) -> int:
        """How many events the stored state covers (0 when empty)."""
        return int(self._meta().get("size", "0"))

    def _matches(self, ledger: Ledger) -> bool:
        meta = self._meta()
        if not meta:
            return True  # empty: nothing to contradict
        size = int(meta.get("size", "-1"))
        if meta.get("format") != FORMAT or meta.get("caseruns") != _LAYOUT:
            return False
        if size < 0 or size > ledger.size():
            return False
        if size == 0:
            return True
        if meta.get("origin") != ledger.origin():
            return False
        last = ledger.get(size - 1)
        return last is not None and last.leaf_hash.hex() == meta.get("last_leaf")

    def drop(self) -> None:
        """Forget everything (the next catch-up replays the whole ledger)."""
        self._conn.executescript(
            "BEGIN; DELETE FROM meta; DELETE FROM head; DELETE FROM caseruns; COMMIT;"
        )

    # ------------------------------------------------------------ catch up

    def catch_up(self, ledger: Ledger) -> int:
        """Apply every event the store has not seen; returns the new size."""
        if not self._matches(ledger):
            self.drop()
        self._ledger = ledger
        start = self.size()
        stop = ledger.size()
        if start == stop and self._meta():
            return stop
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            with paused_gc():
                state = self._load_head()
                last_leaf = self._file_events(state, ledger, start, stop)
            state.size = stop
            conn.execute("INSERT OR REPLACE INTO head VALUES (0, ?)", (_ENC.encode(state),))
            meta = {"format": FORMAT, "size": str(stop), "caseruns": _LAYOUT}
            if stop:
                meta["origin"] = ledger.origin()
                if not last_leaf:
                    found = ledger.get(stop - 1)
                    assert found is not None
                    last_leaf = found.leaf_hash
                meta["last_leaf"] = last_leaf.hex()
            conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", sorted(meta.items()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return stop

    def _file_events(self, state: State, ledger: Ledger, start: int, stop: int) -> bytes:
        """Fold events [start, stop) into ``state``, filing attempt events by CaseRun.

        An attempt event is read only as far as its envelope (type, stream, case,
        attempt, date): its CaseRun row gets its seq and its run is counted with
        :func:`caseruns.touch_run`, as :func:`caseruns.apply` would. Every other
        event is decoded in full and folded by ``apply``. Returns the last leaf hash.
        """
        apply, touch, decode, envelope = (
            caseruns.apply,
            caseruns.touch_run,
            codec.decode,
            _ENV.decode,
        )
        attempt_tags = _ATTEMPT_TAGS
        # Runs with CaseRuns in the file: only their events can extend a stored row
        # (a rebuild starts with none; a catch-up's new run has none).
        stored = self._stored_runs()
        held: dict[str, tuple[str, list[int]]] = {}
        leaf = b""
        for seq, leaf, body in ledger.iter_bodies(start, stop):
            head = envelope(body)
            if head.type in attempt_tags and head.case_id is not None and head.attempt is not None:
                run_id, case_id, attempt, at = head.stream, head.case_id, head.attempt, head.at
            else:
                event = decode(body)
                if not isinstance(event, ATTEMPT_EVENTS):  # (an upcast old attempt event is)
                    state = apply(state, (seq, leaf, event))
                    continue
                run_id, case_id, attempt, at = event.stream, event.case_id, event.attempt, event.at
            key = caserun_key(run_id, case_id, attempt)
            row = held.get(key)
            if row is None:
                if len(held) >= _FLUSH_EVERY:
                    stored.update(self._flush(held))
                row = held[key] = (run_id, self._stored_seqs(key) if run_id in stored else [])
            row[1].append(seq)
            touch(state, run_id, at)
        self._flush(held)
        if stop > start:
            state.size = stop
        return leaf

    def rebuild(self, ledger: Ledger) -> int:
        """Drop the store and replay the whole ledger; returns the size."""
        self.drop()
        return self.catch_up(ledger)

    def _load_head(self) -> State:
        row = self._conn.execute("SELECT body FROM head WHERE id = 0").fetchone()
        state = caseruns.initial() if row is None else _HEAD.decode(row[0])
        state.caseruns = {}
        return state

    def _stored_seqs(self, key: str) -> list[int]:
        row = self._conn.execute("SELECT body FROM caseruns WHERE key = ?", (key,)).fetchone()
        return [] if row is None else _SEQS.decode(row[0])

    def _stored_runs(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT DISTINCT run_id FROM caseruns")}

    def _flush(self, held: dict[str, tuple[str, list[int]]]) -> set[str]:
        """Write the CaseRun rows in memory back and forget them; returns their run ids."""
        # In key order: the primary-key index then grows at a few places, not at random.
        encode = _ENC.encode
        rows = [(k, held[k][0], encode(held[k][1])) for k in sorted(held)]
        self._conn.executemany("INSERT OR REPLACE INTO caseruns VALUES (?, ?, ?)", rows)
        held.clear()
        return {row[1] for row in rows}

    # ------------------------------------------------------------ read

    def load(self, runs: Iterable[str] | None = None, ledger: Ledger | None = None) -> State:
        """The stored state with the CaseRuns of ``runs`` (all runs when None).

        The CaseRuns' events are read from ``ledger`` (by default the one the store
        was last caught up with) by the seqs the store filed for them.
        """
        state = self._load_head()
        wanted = sorted(state.runs) if runs is None else sorted(set(runs))
        owner: dict[int, str] = {}  # seq -> CaseRun key
        keys: list[str] = []
        for run_id in wanted:
            rows = self._conn.execute(
                "SELECT key, body FROM caseruns WHERE run_id = ? ORDER BY key", (run_id,)
            )
            for key, body in rows:
                keys.append(key)
                owner.update(dict.fromkeys(_SEQS.decode(body), key))
        if not owner:
            return state
        source = self._ledger if ledger is None else ledger
        if source is None:
            raise StoreError(
                f"the projection store {self.path} has no ledger to read CaseRuns from",
                hint="catch it up with its ledger first",
            )
        built: dict[str, CaseRun] = {}
        decode = codec.decode
        for seq, leaf, body in _bodies(source, sorted(owner)):
            event = decode(body)
            key = owner[seq]
            found = built.get(key)
            if found is None:
                found = built[key] = CaseRun(event.stream, event.case_id, event.attempt)  # type: ignore[union-attr]
            found.steps.append(Step(seq, leaf, event))
        state.caseruns = {key: built[key] for key in keys}
        return state


def _bodies(ledger: Ledger, seqs: list[int]) -> Iterator[tuple[int, bytes, bytes]]:
    """(seq, leaf hash, body) of these sorted seqs: one range scan, or one read each when sparse."""
    lo, hi = seqs[0], seqs[-1] + 1
    count = 0
    if hi - lo <= 8 * len(seqs):
        wanted = set(seqs)
        for row in ledger.iter_bodies(lo, hi):
            if row[0] in wanted:
                count += 1
                yield row
    else:
        for seq in seqs:
            found = ledger.get(seq)
            if found is None:
                break
            count += 1
            yield seq, found.leaf_hash, found.body
    if count != len(seqs):
        raise StoreError(
            f"the projection store names events the ledger does not hold ({count} of "
            f"{len(seqs)} found)",
            hint="delete the store (or run `caseledger rebuild`) and report again",
        )


def load_state(
    ledger: Ledger,
    *,
    at_size: int | None = None,
    runs: Iterable[str] | None = None,
    use_store: bool = True,
) -> State:
    """The fold state at tree size ``at_size`` (default: the ledger's size).

    At the current size the projection store beside the ledger is caught up and
    read; at an older size, or when the store cannot be written (a read-only
    folder), the events are replayed in memory. Both give the same state.
    """
    size = ledger.size()
    stop = size if at_size is None else at_size
    if stop < 0 or stop > size:
        raise UsageError(
            f"--at-size {stop} is out of range: the ledger has {size} events",
            hint=f"use a tree size from 0 to {size}",
        )
    if use_store and stop == size:
        try:
            with ProjectionStore(store_path(ledger.path)) as store:
                store.catch_up(ledger)
                return store.load(runs, ledger)
        except (StoreError, sqlite3.OperationalError):
            pass  # e.g. a read-only folder: the in-memory replay gives the same state
    return replay_ledger(ledger, stop)


def checkpoint_root(ledger: Ledger, size: int) -> bytes:
    """The RFC 9162 root of leaves 0..size-1 (what the report says it was built from)."""
    return root_hash(ledger.leaf_hashes(size))
