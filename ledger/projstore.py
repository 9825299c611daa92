"""The projection store: the CaseRuns fold state kept in a file beside the ledger.

``<ledger dir>/<ledger stem>.projections.db`` is a plain SQLite file owned by
the application layer (the folds in ``projections/`` never see it):

* ``meta``: format, the ledger's origin, ``size`` (the last applied seq + 1)
  and the leaf hash of the last applied event;
* ``head``: the msgpack of the fold state without its CaseRuns (banks, runs,
  and the calibration events of calibration runs);
* ``caseruns``: one msgpack row per CaseRun (its steps, VariantChecked included).

Catching up replays only the events after ``size``; CaseRuns are paged in
from the file when an event touches one and written back in batches, so a
rebuild's memory does not grow with the ledger. One transaction per catch-up:
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
from ledger.merkle import root_hash
from ledger.store import Ledger
from projections import caseruns
from projections.caseruns import ATTEMPT_EVENTS, CaseRun, Item, State, caserun_key
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
_CASERUN = msgspec.msgpack.Decoder(CaseRun)
_HEAD = msgspec.msgpack.Decoder(State)


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
        if meta.get("format") != FORMAT or size < 0 or size > ledger.size():
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
        start = self.size()
        stop = ledger.size()
        if start == stop and self._meta():
            return stop
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            with paused_gc():
                state = self._load_head()
                apply = caseruns.apply
                last_leaf = b""
                # Runs with CaseRuns in the file: only their events can need a page-in
                # (a rebuild starts with none; a catch-up's new run has none).
                stored = self._stored_runs()
                for item in items(ledger, start, stop):
                    event = item[2]
                    if isinstance(event, ATTEMPT_EVENTS) and event.stream in stored:
                        key = caserun_key(event.stream, event.case_id, event.attempt)
                        if key not in state.caseruns:
                            self._page_in(state, key)
                    state = apply(state, item)
                    last_leaf = item[1]
                    if len(state.caseruns) >= _FLUSH_EVERY:
                        stored.update(self._flush(state))
                self._flush(state)
            state.size = stop
            conn.execute("INSERT OR REPLACE INTO head VALUES (0, ?)", (_ENC.encode(state),))
            meta = {"format": FORMAT, "size": str(stop)}
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

    def rebuild(self, ledger: Ledger) -> int:
        """Drop the store and replay the whole ledger; returns the size."""
        self.drop()
        return self.catch_up(ledger)

    def _load_head(self) -> State:
        row = self._conn.execute("SELECT body FROM head WHERE id = 0").fetchone()
        state = caseruns.initial() if row is None else _HEAD.decode(row[0])
        state.caseruns = {}
        return state

    def _page_in(self, state: State, key: str) -> None:
        row = self._conn.execute("SELECT body FROM caseruns WHERE key = ?", (key,)).fetchone()
        if row is not None:
            state.caseruns[key] = _CASERUN.decode(row[0])

    def _stored_runs(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT DISTINCT run_id FROM caseruns")}

    def _flush(self, state: State) -> set[str]:
        """Write the CaseRuns in memory back; returns their run ids."""
        # In key order: the primary-key index then grows at a few places, not at random.
        held = state.caseruns
        rows = [(k, held[k].run_id, _ENC.encode(held[k])) for k in sorted(held)]
        self._conn.executemany("INSERT OR REPLACE INTO caseruns VALUES (?, ?, ?)", rows)
        state.caseruns = {}
        return {row[1] for row in rows}

    # ------------------------------------------------------------ read

    def load(self, runs: Iterable[str] | None = None) -> State:
        """The stored state with the CaseRuns of ``runs`` (all runs when None)."""
        state = self._load_head()
        wanted = sorted(state.runs) if runs is None else sorted(set(runs))
        for run_id in wanted:
            rows = self._conn.execute(
                "SELECT key, body FROM caseruns WHERE run_id = ? ORDER BY key", (run_id,)
            )
            for key, body in rows:
                state.caseruns[key] = _CASERUN.decode(body)
        return state


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
                return store.load(runs)
        except (StoreError, sqlite3.OperationalError):
            pass  # e.g. a read-only folder: the in-memory replay gives the same state
    return replay_ledger(ledger, stop)


def checkpoint_root(ledger: Ledger, size: int) -> bytes:
    """The RFC 9162 root of leaves 0..size-1 (what the report says it was built from)."""
    return root_hash(ledger.leaf_hashes(size))
