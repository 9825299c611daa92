"""The SQLite backend: one ledger file, WAL, one writer at a time (BEGIN IMMEDIATE).

Two layouts of the ``events`` table are read and written by the same statements:
files made before issue 21 have ``leaf_hash ... UNIQUE`` and a plain index on
(stream, stream_seq); files made since have no index on ``leaf_hash`` and a UNIQUE
index on (stream, stream_seq). Both refuse the same event twice: equal bodies have
equal stream and stream_seq (both are in the body, and an append copies the columns
from it), so a unique (stream, stream_seq) leaves no room for a second copy. The new
layout is what makes durable appends fast: a UNIQUE index on the random leaf hash
dirties about one index page per inserted row, written to the WAL at every commit
and again by every checkpoint (5.5 times the bytes of the rows themselves at 300,000
events), while (stream, stream_seq) grows at the right edge of each stream. A
lookup by leaf hash alone (``body_of``) is a table scan in the new layout; appends
never need one (``rows_at``). ``caseledger ledger copy`` moves an old file into the
new layout, row for row. Triggers
refuse UPDATE and DELETE on ``events`` and ``checkpoints``; they stop mistakes, not
someone who holds the file (the hashes and signatures catch that).

Durability: WAL, ``synchronous=FULL``, one transaction per batch taken with BEGIN
IMMEDIATE, so a batch is all or nothing and a second writer waits up to the busy
timeout, then fails with "ledger is busy".
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ledger.errors import DiskFullError, StoreBusyError, StoreError, disk_full
from ledger.stores import FORMAT, DuplicateLeafError, redact

__all__ = ["SqliteBackend"]

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY,
    body       BLOB NOT NULL,
    leaf_hash  BLOB NOT NULL,
    chain      BLOB NOT NULL,
    key_id     TEXT NOT NULL,
    sig        BLOB NOT NULL,
    stream     TEXT NOT NULL,
    stream_seq INTEGER NOT NULL,
    type       TEXT NOT NULL
);
CREATE UNIQUE INDEX events_by_stream ON events (stream, stream_seq);
CREATE INDEX events_by_type ON events (type, seq);
CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'caseledger events are append-only: UPDATE refused'); END;
CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'caseledger events are append-only: DELETE refused'); END;
"""
# Signed checkpoint notes issued automatically (see ledger/store.py). Not events: they
# cover the log, so they cannot be in it. Ledgers made before get the table at the
# first write; a ledger without it simply has no stored checkpoints.
_CHECKPOINTS = """
CREATE TABLE IF NOT EXISTS checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS checkpoints_refuse_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'caseledger checkpoints are append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_refuse_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'caseledger checkpoints are append-only: DELETE refused'); END;
"""


class SqliteBackend:
    """One open ledger file. Use :meth:`create` or :meth:`open`."""

    inserts_in_process = True  # SQLite's B-trees and WAL are written by this process

    def __init__(self, path: Path, conn: sqlite3.Connection, busy_timeout_s: float) -> None:
        self.path = path
        self.name = str(path)
        self.conn = conn
        self.busy_timeout_s = busy_timeout_s

    @classmethod
    def create(cls, path: Path) -> SqliteBackend:
        """A new ledger file with the schema and no rows (StoreError when one exists)."""
        if path.exists():
            raise StoreError(
                f"a ledger already exists at {path}", hint="use it, or pick another path"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(path, readonly=False, busy_timeout_s=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
        # One script, one transaction: a half-made ledger file never has a schema.
        conn.executescript(
            f"BEGIN IMMEDIATE;{_SCHEMA}{_CHECKPOINTS}"  # noqa: S608 (constants of this module only)
            f"INSERT INTO meta VALUES ('format', '{FORMAT}');COMMIT;"
        )
        return cls(path, conn, 10.0)

    @classmethod
    def open(cls, path: Path, *, readonly: bool, busy_timeout_s: float) -> SqliteBackend:
        """An existing ledger file; StoreError when it is missing or not a ledger."""
        if not path.is_file():
            raise StoreError(
                f"no ledger at {path}", hint="run `caseledger init`, or pass --ledger PATH"
            )
        conn = _connect(path, readonly=readonly, busy_timeout_s=busy_timeout_s)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path} is not a caseledger ledger ({exc})") from None
        if row is None or row[0] != FORMAT:
            conn.close()
            found = row[0] if row else "nothing"
            raise StoreError(f"{path} is not a {FORMAT} ledger (format says {found})")
        if not readonly:
            try:
                conn.executescript(_CHECKPOINTS)
            except sqlite3.DatabaseError as exc:
                conn.close()
                raise StoreError(f"cannot open ledger {path} for writing: {exc}") from None
        return cls(path, conn, busy_timeout_s)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    # -------------------------------------------------------------- reads

    def head(self) -> tuple[int, bytes] | None:
        """(seq, chain) of the last row."""
        row = self.conn.execute(
            "SELECT seq, chain FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def select(
        self, columns: str, start: int, stop: int | None, fetch: int
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of ``start <= seq < stop`` in seq order, streamed ``fetch`` at a time."""
        if start == 0 and stop is None:
            cursor = self.conn.execute(f"SELECT {columns} FROM events ORDER BY seq")  # noqa: S608 (column lists are constants of ledger.stores; values are bound)
        elif stop is None:
            cursor = self.conn.execute(
                f"SELECT {columns} FROM events WHERE seq >= ? ORDER BY seq",  # noqa: S608 (as above)
                (start,),
            )
        else:
            cursor = self.conn.execute(
                f"SELECT {columns} FROM events WHERE seq >= ? AND seq < ? ORDER BY seq",  # noqa: S608 (as above)
                (start, stop),
            )
        try:
            while rows := cursor.fetchmany(fetch):
                yield from rows
        finally:
            cursor.close()

    def chain_at(self, seq: int) -> bytes | None:
        """The stored chain of row ``seq``."""
        row = self.conn.execute("SELECT chain FROM events WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else bytes(row[0])

    def rows_at(
        self, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
        """(stream, stream_seq) -> [(seq, leaf hash)] of stored rows, by the stream index."""
        found: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        for key in dict.fromkeys(keys):
            rows = self.conn.execute(
                "SELECT seq, leaf_hash FROM events WHERE stream = ? AND stream_seq = ? "
                "ORDER BY seq",
                key,
            ).fetchall()
            if rows:
                found[key] = [(int(seq), bytes(leaf)) for seq, leaf in rows]
        return found

    def stream_head(self, stream: str) -> tuple[int, bytes, int] | None:
        """(stream_seq, leaf hash, seq) of the stream's last row by the stream index."""
        row = self.conn.execute(
            "SELECT stream_seq, leaf_hash, seq FROM events WHERE stream = ? "
            "ORDER BY stream_seq DESC LIMIT 1",
            (stream,),
        ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]), int(row[2]))

    def body_of(self, leaf: bytes) -> tuple[int, bytes] | None:
        """(seq, body) stored under ``leaf`` (a table scan in the layout without a leaf index)."""
        row = self.conn.execute(
            "SELECT seq, body FROM events WHERE leaf_hash = ?", (leaf,)
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def stream_rows(self, stream: str, stop: int) -> Iterator[tuple[int, bytes, bytes, Any, Any]]:
        """(seq, body, leaf hash, stream_seq, type) of the stream's rows below ``stop``
        by the stream index."""
        cursor = self.conn.execute(
            "SELECT seq, body, leaf_hash, stream_seq, type FROM events "
            "WHERE stream = ? AND seq < ? "
            "ORDER BY stream_seq",
            (stream, stop),
        )
        try:
            while rows := cursor.fetchmany(1024):
                yield from rows
        finally:
            cursor.close()

    def bodies_of_types(
        self, types: Sequence[str], start: int, stop: int
    ) -> Iterator[tuple[int, bytes]]:
        """(seq, body) of rows of these types in ``start <= seq < stop``."""
        marks = ", ".join("?" * len(types))
        sql = (
            f"SELECT seq, body FROM events WHERE type IN ({marks}) AND seq >= ? AND seq < ? "  # noqa: S608 (only '?' placeholders are formatted in)
            "ORDER BY seq"
        )
        for seq, body in self.conn.execute(sql, (*types, start, stop)):
            yield int(seq), body

    def checkpoints(self) -> list[tuple[Any, Any]]:
        """(size, note) rows by size; none when the table does not exist (older ledgers)."""
        try:
            return self.conn.execute("SELECT size, note FROM checkpoints ORDER BY size").fetchall()
        except sqlite3.OperationalError:
            return []

    def checkpoints_since(self, mark: int) -> list[tuple[Any, Any, str | None]]:
        """(size, note, None) of the checkpoints over at least ``mark`` events, by size.

        A file records neither who added a row nor when: an honest writer stores a
        checkpoint at the tree size its batch ends at, so the rows added since a writer
        last looked at size ``mark`` are those of size ``mark`` or more.
        """
        try:
            rows = self.conn.execute(
                "SELECT size, note FROM checkpoints WHERE size >= ? ORDER BY size", (mark,)
            ).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(size, note, None) for size, note in rows]

    def written_by(self, seq: int) -> str | None:
        """None: a file does not record who wrote a row."""
        return None

    # -------------------------------------------------------------- writes

    def begin(self) -> None:
        """BEGIN IMMEDIATE: the file's one write lock, waited for up to the busy timeout
        (SQLite's busy handler retries with growing sleeps, 1 ms up to 100 ms); then
        StoreBusyError naming the process that holds it where the system tells."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreBusyError(
                    f"ledger is busy: {_lock_holder(self.path)} has held the write lock on "
                    f"{self.path} for more than {self.busy_timeout_s:g} s",
                    hint="wait for that process to finish, then retry "
                    "(CASELEDGER_LOCK_WAIT=SECONDS waits longer: docs/stores.md)",
                ) from None
            raise self._write_error(exc) from None

    def commit(self) -> None:
        """COMMIT (fsync of the WAL: synchronous=FULL)."""
        try:
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise self._write_error(exc) from None

    def rollback(self) -> None:
        """ROLLBACK, unless SQLite already rolled back: after SQLITE_FULL (and some I/O
        errors) it ends the transaction itself, and a ROLLBACK then would raise "cannot
        rollback - no transaction is active" over the error that says what happened."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def _write_error(self, exc: sqlite3.DatabaseError) -> StoreError | DiskFullError:
        """The error of a failed write to the ledger file: a full disk says so."""
        if disk_full(exc):
            return DiskFullError(
                self.path.parent,
                f"writing the ledger {self.path} ({exc}); the batch was "
                "not appended and every event before it is kept",
            )
        return StoreError(f"cannot write to {self.path}: {exc}")

    def savepoint(self) -> None:
        """SAVEPOINT batch."""
        self.conn.execute("SAVEPOINT batch")

    def rollback_to_savepoint(self) -> None:
        """ROLLBACK TO batch."""
        self.conn.execute("ROLLBACK TO batch")

    def release_savepoint(self) -> None:
        """RELEASE batch."""
        self.conn.execute("RELEASE batch")

    def insert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """INSERT the rows; a UNIQUE clash (stream position or leaf) is a DuplicateLeafError."""
        try:
            self.conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError:
            raise DuplicateLeafError from None  # a stored duplicate: the caller takes the slow path
        except sqlite3.DatabaseError as exc:
            raise self._write_error(exc) from None

    def insert_checkpoint(self, size: int, note: str) -> None:
        """INSERT OR IGNORE the note."""
        try:
            self.conn.execute("INSERT OR IGNORE INTO checkpoints VALUES (?, ?)", (size, note))
        except sqlite3.DatabaseError as exc:
            raise self._write_error(exc) from None


# In WAL mode the write lock is a POSIX lock on byte 120 of the -shm file (SQLite's
# WAL_WRITE_LOCK, WALINDEX_LOCK_OFFSET + 0); Linux lists such locks, with the holder's
# pid, in /proc/locks as "N: POSIX ADVISORY WRITE PID MAJ:MIN:INODE 120 120".
_WAL_WRITE_LOCK_BYTE = "120"


def _lock_holder(path: Path) -> str:
    """Who holds the write lock on ``path``: "process PID (its command line)" where
    /proc/locks tells (Linux, same pid namespace), else "another process"."""
    try:
        st = os.stat(f"{path}-shm")
        locks = Path("/proc/locks").read_text()
    except OSError:
        return "another process"
    file_id = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in locks.splitlines():
        fields = line.split()
        if "->" in fields or len(fields) < 8:  # "->": a process waiting for the lock
            continue
        kind, pid, where, start, end = fields[-5:]
        if kind == "WRITE" and where == file_id and start == end == _WAL_WRITE_LOCK_BYTE:
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                return f"process {pid}"
            # A URL's password never reaches the message (redact), nor does a long tail.
            args = (a.decode(errors="replace") for a in raw.split(b"\0") if a)
            command = " ".join(redact(a) if "://" in a else a for a in args)
            if len(command) > 120:
                command = command[:117] + "..."
            return f"process {pid} ({command})" if command else f"process {pid}"
    return "another process"


def _connect(path: Path, *, readonly: bool, busy_timeout_s: float) -> sqlite3.Connection:
    uri = path.resolve().as_uri() + ("?mode=ro" if readonly else "?mode=rwc")
    try:
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=busy_timeout_s, check_same_thread=False
        )
        conn.execute("PRAGMA synchronous=FULL")
        if not readonly:
            # Files made before issue 21 have a UNIQUE index on the random leaf hash:
            # a larger page cache keeps it warm for writers. Readers stream once and
            # keep the small default.
            conn.execute("PRAGMA cache_size=-65536")
            # Checkpoint every ~40 MB of WAL instead of ~4 MB: a batch dirties index
            # pages all over the file, and a later batch often dirties the same ones,
            # which a less frequent checkpoint copies once. Durability is the WAL's
            # fsync at each commit and does not depend on it.
            conn.execute("PRAGMA wal_autocheckpoint=10000")
    except sqlite3.DatabaseError as exc:
        if disk_full(exc) or _no_room(exc, path):
            raise DiskFullError(
                path.parent, f"opening the ledger {path} ({exc}); nothing was written"
            ) from None
        raise StoreError(f"cannot open ledger {path}: {exc}") from None
    return conn


#: Below this many free bytes an SQLite I/O error opening a ledger is taken for a full
#: disk: WAL mode must create or grow ``-shm`` (32 KiB) and ``-wal`` beside the file.
_ROOM = 1024 * 1024


def _no_room(exc: sqlite3.DatabaseError, path: Path) -> bool:
    """Whether an I/O error (SQLITE_IOERR_*, e.g. SHMSIZE: the ``-shm`` file could not
    grow) met a disk with almost no free space left."""
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_IOERR:
        return False
    try:
        return shutil.disk_usage(path.parent).free < _ROOM
    except OSError:
        return False
