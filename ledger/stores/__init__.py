"""Where a ledger's rows live: the few storage primitives a store backend provides.

``ledger.store.Ledger`` holds everything a ledger *means*: the leaf hash, the chain,
signatures, stream envelopes, the keyring rules, the checked scan, automatic
checkpoints. A backend only stores and returns rows; it never hashes, signs or
decides whether a row is valid. Two backends exist:

* ``ledger.stores.sqlite`` -- one SQLite file (the default, ``.caseledger/ledger.db``);
* ``ledger.stores.postgres`` -- a PostgreSQL database named by a
  ``postgresql://`` URL, shared by many writers on many hosts (docs/stores.md);
  ``ledger.stores.postgres_schema`` holds its schema as SQL text.

A location is therefore a ``Path`` (SQLite) or a URL string (PostgreSQL);
:func:`parse_location` turns what a user typed into one of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "EVENT_COLUMNS",
    "FORMAT",
    "QUERY_COLUMNS",
    "Backend",
    "DuplicateLeafError",
    "Location",
    "is_url",
    "parse_location",
    "redact",
]

#: What the ``meta`` table's ``format`` row says in every caseledger ledger.
FORMAT = "caseledger-ledger/1"

#: A ledger's location: a SQLite file, or a ``postgresql://`` URL.
Location = Path | str

#: The columns of one stored event, in the order of ``StoredEvent``.
EVENT_COLUMNS = "seq, body, leaf_hash, chain, key_id, sig"
#: Those plus the query copies (checked against the body by ``Ledger.scan_rows``).
QUERY_COLUMNS = EVENT_COLUMNS + ", stream, stream_seq, type"

_URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: object) -> bool:
    """True when ``location`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(location, str) and location.lower().startswith(_URL_SCHEMES)


def parse_location(text: str | Path) -> Location:
    """A PostgreSQL URL stays a string; anything else is a file path."""
    if is_url(text):
        return str(text)
    return Path(text)


def redact(url: str) -> str:
    """The URL with its password replaced by ``***`` (what messages print)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("://", 1)[0] + "://***"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class DuplicateLeafError(Exception):
    """An inserted row clashed with a stored one on a unique key of ``events``.

    The key is (stream, stream_seq) in SQLite files made since issue 21, the leaf
    hash in older files and on PostgreSQL; either way the same event twice cannot be
    stored (docs/stores.md, "The same event twice").
    """


class Backend(Protocol):
    """The storage primitives of one open ledger.

    Rows are tuples in the column order named by the caller (``EVENT_COLUMNS``,
    ``QUERY_COLUMNS`` or a shorter list of the same names). Blobs come back as
    ``bytes``. A writer calls :meth:`begin` (which takes the store's one write lock),
    then reads, inserts and :meth:`commit` or :meth:`rollback`; a batch is all or
    nothing. Savepoints let the caller retry a batch after a duplicate.
    """

    #: How messages name the ledger: a file path or a URL without its password.
    name: str
    #: Whether an insert is CPU work in this process (SQLite) rather than a wait on a
    #: server (PostgreSQL): Ledger._write runs it beside the signing threads only when
    #: a core is left for it.
    inserts_in_process: bool

    def close(self) -> None:
        """Close the connection (an open write transaction is rolled back)."""

    # -------------------------------------------------------------- reads

    def head(self) -> tuple[int, bytes] | None:
        """(seq, chain) of the last row, or None when the log is empty."""

    def select(
        self, columns: str, start: int, stop: int | None, fetch: int
    ) -> Iterator[tuple[Any, ...]]:
        """Rows with ``start <= seq < stop`` (no upper bound for None) in seq order, streamed."""

    def chain_at(self, seq: int) -> bytes | None:
        """The stored chain of row ``seq``."""

    def rows_at(
        self, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
        """(stream, stream_seq) -> [(seq, leaf hash), ...] of the stored rows at those keys.

        Read through the ordered stream index: this is how an append finds a stored
        copy of an event (same body, hence same stream and stream_seq) without an
        index on the random leaf hash. One row per key unless the columns were edited.
        """

    def stream_head(self, stream: str) -> tuple[int, bytes, int] | None:
        """(stream_seq, leaf hash, seq) of the row the stream index names as ``stream``'s last."""

    def body_of(self, leaf: bytes) -> tuple[int, bytes] | None:
        """(seq, body) of the row stored under ``leaf`` (a full scan where no leaf index exists)."""

    def stream_rows(self, stream: str, stop: int) -> Iterator[tuple[int, bytes, bytes, Any, Any]]:
        """(seq, body, leaf hash, stream_seq column, type column) of rows whose ``stream``
        column is ``stream`` and ``seq < stop``, by stream_seq (the stream index;
        unchecked: the caller compares the columns with the body)."""

    def bodies_of_types(
        self, types: Sequence[str], start: int, stop: int
    ) -> Iterator[tuple[int, bytes]]:
        """(seq, body) of rows whose ``type`` column is one of ``types``, by seq."""

    def checkpoints(self) -> list[tuple[Any, Any]]:
        """(size, note) of the stored checkpoints by size, as stored (unchecked)."""

    def checkpoints_since(self, mark: int) -> list[tuple[Any, Any, str | None]]:
        """(size, note, writer) of the checkpoints added since the log held ``mark``
        events, by size, as stored (unchecked; ``writer`` is the role the server
        recorded, None where nothing is recorded)."""

    def written_by(self, seq: int) -> str | None:
        """The database role the server recorded as the writer of row ``seq`` (None when
        the store records none: a SQLite file, rows of an older PostgreSQL schema)."""

    # -------------------------------------------------------------- writes

    def begin(self) -> None:
        """Start the batch transaction holding the write lock (StoreBusyError on timeout)."""

    def commit(self) -> None:
        """Commit the batch (durable when this returns)."""

    def rollback(self) -> None:
        """Abandon the batch."""

    def savepoint(self) -> None:
        """Mark the start of the batch's rows."""

    def rollback_to_savepoint(self) -> None:
        """Undo the rows inserted since :meth:`savepoint` (after a DuplicateLeafError)."""

    def release_savepoint(self) -> None:
        """Forget the savepoint (its rows stay in the batch)."""

    def insert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert full rows (``QUERY_COLUMNS`` order); DuplicateLeafError on a stored leaf."""

    def insert_checkpoint(self, size: int, note: str) -> None:
        """Store a signed checkpoint note over the first ``size`` rows (kept if present)."""
