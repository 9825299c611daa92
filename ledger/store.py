"""The log: append-only rows with a hash chain, a signature per event and per-stream chains.

One row per event (DESIGN.md "The log"): ``seq`` (0, 1, ... = Merkle leaf index),
``body`` (canonical bytes), ``leaf_hash`` = SHA-256(0x00 || body) (the
content-derived event id, unique: see "The same event twice" below), ``chain`` =
SHA-256(prev chain || leaf hash) with 32 zero bytes before seq 0, the signer's
``key_id`` and ``sig`` = Ed25519(b"caseledger/event/v2\\n" || previous chain ||
leaf hash), so a signature fixes both an event's content and its place (ledgers
written before this rule keep their ``event/v1`` signatures over the leaf hash
alone; see ``keys.event_message``).
``stream``, ``stream_seq`` and ``type`` are copies kept for queries: every read that
decides something (:meth:`Ledger.scan` and the methods built on it) derives them from
bodies it has checked against their leaf hashes and the chain, never from a column.

The same event twice: equal bodies have equal (stream, stream_seq), so a store
whose (stream, stream_seq) is UNIQUE (SQLite files since issue 21) or whose leaf hash
is UNIQUE (older files, PostgreSQL) refuses a second copy either way; an append finds
a stored copy by its (stream, stream_seq) through the ordered stream index
(``Backend.rows_at``), never through an index on the random leaf hash, and returns
the stored seq instead of writing it again.

Checkpoints: after every batch that holds a RunFinished or a BankPublished (or a run
imported from another machine, whose RunFinished is inside an EventImported, or a
CheckpointIssued), an operator's append also signs a checkpoint note over the whole
log and stores it in the ``checkpoints`` table (inside the same transaction), so a
cut-off tail is caught by ``verify`` as long as that table is left in place (and
against an exported copy of the note when it is not).

Before appending on top of the log, a writer checks what other writers added since it
last looked (``Ledger._check_unseen``, in ``ledger.store_watch``): rows and stored
checkpoints that ``verify`` would refuse stop it (exit 1, naming the seq or size and,
on PostgreSQL, the database role the server recorded), so no honest writer signs on
top of them.

Where rows live is a backend's business (``ledger.stores``): a SQLite file
(``ledger.stores.sqlite``: WAL, ``synchronous=FULL``, BEGIN IMMEDIATE) or a
PostgreSQL database (``ledger.stores.postgres``: a row lock per batch that only
writer roles may take, append-only and checkpoint roots enforced by the server).
Either way one transaction holds one batch, so a batch is all or nothing and writers
queue for the one write lock. Everything above is computed here, once, for both
(with its parts: ``store_rows``, what one row is; ``store_plan``, how an append's
items become rows; ``store_watch``, the check of what other writers added).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from pathlib import Path
from typing import Any

from ledger import codec
from ledger.checkpoint import (
    format_checkpoint,
)
from ledger.closing import Closing
from ledger.errors import (
    ChainBrokenError,
    StoreConflictError,
    StoreError,
    UsageError,
    VerificationError,
)
from ledger.events import (
    LEDGER_STREAM,
    BankPublished,
    CheckpointIssued,
    EventBase,
    EventImported,
    RunFinished,
    SignerRegistered,
    SignerRetired,
    tag_of,
)
from ledger.keys import Keyring, Signer, encode_public_key, event_message
from ledger.merkle import TreeAccumulator
from ledger.store_plan import AppendPlan
from ledger.store_rows import (
    GENESIS_CHAIN,
    Draft,
    StoredEvent,
    check_leaf,
    envelope_of,
    link_of,
)
from ledger.store_watch import WriterWatch
from ledger.stores import (
    EVENT_COLUMNS,
    FORMAT,
    QUERY_COLUMNS,
    Backend,
    DuplicateLeafError,
    Location,
    is_url,
)
from ledger.stores.sqlite import SqliteBackend

__all__ = [
    "FORMAT",
    "GENESIS_CHAIN",
    "Draft",
    "Ledger",
    "StoredEvent",
    "link_of",
    "set_lock_wait",
]


#: Batches holding one of these get an automatic checkpoint (see the module doc). A
#: CheckpointIssued is one: the note ``caseledger checkpoint`` prints then covers the
#: event that records it (ledger.proofs.issue_checkpoint).
_CHECKPOINT_AFTER = (RunFinished, BankPublished, EventImported, CheckpointIssued)
_CHUNK_ROWS = 128  # rows per chunk where chunks are inserted as the next is signed (_write)
#: A chunk at least this long is signed on the signing threads (see Ledger._sign).
_PARALLEL_SIGN_ROWS = 32


#: How long a writer waits for the write lock when its opener names no limit (seconds).
#: The CLI sets it from ``CASELEDGER_LOCK_WAIT`` (docs/stores.md, "Waiting for the write
#: lock"); the library itself reads no environment.
_lock_wait_s = 10.0


def set_lock_wait(seconds: float) -> None:
    """Make ``seconds`` the write-lock wait of every Ledger opened later without one."""
    global _lock_wait_s  # one process-wide default, set once by the CLI
    _lock_wait_s = seconds


def _now() -> str:
    return codec.format_time(_dt.datetime.now(_dt.UTC))


class Ledger(Closing, AppendPlan, WriterWatch):
    """An open ledger (a SQLite file or a PostgreSQL database). Use ``create`` or ``open``.

    Everything a ledger means (hashes, chain, signatures, stream envelopes, keyring
    rules, checked scans, automatic checkpoints) is here, once; the backend
    (``ledger.stores``) only stores and returns rows.
    """

    def __init__(self, backend: Backend, clock: Callable[[], str], *, path: Path) -> None:
        self.path = path  # messages print it; a PostgreSQL ledger's is its redacted URL
        self.location = backend.name  # how messages name the ledger (never a password)
        self._db = backend
        self._clock = clock
        self._keyring = Keyring()
        self._keyring_size = 0  # signer events below this seq are in _keyring
        self.readonly = False
        self._inserter: ThreadPoolExecutor | None = None  # see _write
        self._signing: ThreadPoolExecutor | None = None  # see _sign
        self._tree: TreeAccumulator | None = None  # tree head of the committed log (writers)
        self._pending_tree: TreeAccumulator | None = None  # that of the open batch
        self._secret_checks: list[Callable[[bytes], str | None]] = []  # register_secrets
        # What this writer has checked before appending on top (_check_unseen): the log
        # up to (size, chain), the checkpoints stored at these sizes, and from which log
        # size on a stored checkpoint is one it has not seen.
        self._seen: tuple[int, bytes] | None = None
        self._pending_seen: tuple[int, bytes] | None = None  # the open batch's end
        self._seen_v2 = False  # an event/v2 signature was checked: no event/v1 after it
        self._seen_notes: set[int] = set()
        self._pending_notes: set[int] = set()
        self._notes_mark: int | None = None

    # ------------------------------------------------------------ open / create

    @classmethod
    def create(
        cls, location: Location, signer: Signer, *, clock: Callable[[], str] | None = None
    ) -> Ledger:
        """Create a new ledger whose first event registers ``signer`` (an operator).

        ``location`` is a file path (SQLite) or a ``postgresql://`` URL (an empty
        database on the server: docs/stores.md).
        """
        if signer.role != "operator":
            raise UsageError(
                f"the first signer must be an operator, {signer.name} is {signer.role}"
            )
        backend = _new_backend(location)
        ledger = cls(backend, clock or _now, path=_display_path(location, backend))
        at = ledger._clock()
        ledger.append([_registration(signer, at)], signer)
        return ledger

    @classmethod
    def create_copy(cls, location: Location, source: Ledger) -> Ledger:
        """A new ledger at ``location`` holding ``source``'s rows, byte for byte.

        Every row is read with :meth:`scan_rows` (body, leaf hash, chain and columns
        checked) and stored as it is, signatures included, then the source's stored
        checkpoints; all in one transaction, so the copy is the source as of one
        tree size or stays empty. Nothing is re-signed: run ``verify`` on the copy.
        """
        size = source.size()
        checkpoints = [(n, note) for n, note in source.stored_checkpoints() if n <= size]
        backend = _new_backend(location)
        copy = cls(backend, source._clock, path=_display_path(location, backend))
        backend.begin()
        try:
            rows: list[tuple[Any, ...]] = []
            for row in source.scan_rows(size):
                rows.append(row[:9])
                if len(rows) == 4096:
                    backend.insert(rows)
                    rows = []
            if rows:
                backend.insert(rows)
            for n, note in checkpoints:
                backend.insert_checkpoint(n, note)
            backend.commit()
        except BaseException:
            backend.rollback()
            copy.close()
            raise
        return copy

    @classmethod
    def open(
        cls,
        location: Location,
        *,
        readonly: bool = False,
        busy_timeout_s: float | None = None,
        clock: Callable[[], str] | None = None,
    ) -> Ledger:
        """Open an existing ledger. Raises StoreError when it is missing or not a ledger.

        ``busy_timeout_s``: how long an append waits for the write lock before
        StoreBusyError (default: :func:`set_lock_wait`'s, 10 s unless set).
        """
        backend: Backend
        if busy_timeout_s is None:
            busy_timeout_s = _lock_wait_s
        if is_url(location):
            from ledger.stores.postgres import PostgresBackend

            backend = PostgresBackend.open(
                str(location), readonly=readonly, busy_timeout_s=busy_timeout_s
            )
        else:
            backend = SqliteBackend.open(
                Path(location), readonly=readonly, busy_timeout_s=busy_timeout_s
            )
        ledger = cls(backend, clock or _now, path=_display_path(location, backend))
        ledger.readonly = readonly
        return ledger

    @staticmethod
    def exists(location: Location) -> bool:
        """Is there a ledger at ``location``? (A file exists; a database holds the schema.)

        StoreError when a server cannot be reached: "could not check" is not "no".
        """
        if is_url(location):
            from ledger.stores.postgres import has_ledger

            return has_ledger(str(location))
        return Path(location).exists()

    def close(self) -> None:
        """Close the connection."""
        if self._inserter is not None:
            self._inserter.shutdown()
        if self._signing is not None:
            self._signing.shutdown()
        self._db.close()

    # ------------------------------------------------------------ reading

    def size(self) -> int:
        """Number of events (the tree size)."""
        return self.head()[0]

    def head(self) -> tuple[int, bytes]:
        """(size, chain hash of the last event) in one read."""
        found = self._db.head()
        return (0, GENESIS_CHAIN) if found is None else (found[0] + 1, found[1])

    def get(self, seq: int) -> StoredEvent | None:
        """The row at ``seq``, if any; ChainBrokenError when its body does not hash to its leaf."""
        row = next(iter(self._db.select(EVENT_COLUMNS, seq, seq + 1, 1)), None)
        if row is None:
            return None
        stored = StoredEvent._make(row)
        check_leaf(seq, stored.body, stored.leaf_hash)
        return stored

    def iter_events(self, start: int = 0, stop: int | None = None) -> Iterator[StoredEvent]:
        """Rows in sequence order as stored, streamed (nothing checked: see :meth:`scan`)."""
        for row in self._db.select(EVENT_COLUMNS, start, stop, 1024):
            yield StoredEvent._make(row)

    def scan_rows(self, stop: int | None = None) -> Iterator[tuple[Any, ...]]:
        """Every row from seq 0 (up to ``stop``) with its query columns, checked first.

        Yields (seq, body, leaf hash, chain, key id, sig, stream, stream_seq, type,
        envelope) once these hold: seq runs 0, 1, 2, ... with no gap; body, leaf hash
        and chain are blobs; the body hashes to its leaf hash; the chain equals SHA-256
        of the previous chain and this leaf; the body has an event envelope, and the
        query columns (stream, stream_seq, type) equal it. Signatures are not checked
        (``verify`` does). This is the one checked read, whatever the backend.

        Raises:
            ChainBrokenError / VerificationError: naming the first bad seq (exit 1), also
                when rows end before ``stop``.
        """
        chain_hash = codec.chain_hash
        prev = GENESIS_CHAIN
        expected = 0
        for row in self._db.select(QUERY_COLUMNS, 0, stop, 1024):
            seq, body, leaf, chain = row[0], row[1], row[2], row[3]
            if seq != expected:
                raise ChainBrokenError(
                    f"seq {expected}: missing (the next stored row is seq {seq})",
                    seq=expected,
                )
            if type(chain) is not bytes:
                raise ChainBrokenError(f"seq {seq}: chain is not a blob", seq=seq)
            check_leaf(seq, body, leaf)
            prev = chain_hash(prev, leaf)
            if prev != chain:
                raise ChainBrokenError(
                    f"seq {seq}: chain is {link_of(chain)}, expected {link_of(prev)} "
                    "(SHA-256 of the previous chain and this leaf)",
                    seq=seq,
                )
            head = envelope_of(seq, body)
            if (row[6], row[7], row[8]) != (head.stream, head.stream_seq, head.type):
                raise ChainBrokenError(
                    f"seq {seq}: the row's columns say stream {row[6]!r}, stream_seq "
                    f"{row[7]!r}, type {row[8]!r}; its body says {head.stream!r}, "
                    f"{head.stream_seq}, {head.type!r} (the columns were edited)",
                    seq=seq,
                )
            expected += 1
            yield (*row, head)
        if stop is not None and expected != stop:
            raise ChainBrokenError(
                f"seq {expected}: the ledger ends at size {expected}, not {stop}", seq=expected
            )

    def scan(self, stop: int | None = None) -> Iterator[StoredEvent]:
        """Rows from seq 0 in order, each checked as :meth:`scan_rows` says."""
        for row in self.scan_rows(stop):
            yield StoredEvent._make(row[:6])

    def iter_bodies(
        self, start: int = 0, stop: int | None = None
    ) -> Iterator[tuple[int, bytes, bytes]]:
        """(seq, leaf hash, body) in sequence order as stored, streamed (nothing checked)."""
        return self._db.select("seq, leaf_hash, body", start, stop, 4096)

    def iter_chain_rows(self) -> Iterator[tuple[int, bytes, bytes, bytes]]:
        """(seq, body, leaf hash, chain) in sequence order, streamed: the cheapest full read."""
        return self._db.select("seq, body, leaf_hash, chain", 0, None, 4096)

    def leaf_hashes(self, stop: int | None = None) -> list[bytes]:
        """Leaf hashes of seq 0 .. stop-1 (all when stop is None), for proofs."""
        return [bytes(r[0]) for r in self._db.select("leaf_hash", 0, stop, 4096)]

    def stream_events(self, stream: str) -> list[StoredEvent]:
        """Every row of one stream (a run id, or ``ledger``) in order, read by :meth:`scan`.

        The stream is found from the checked bodies, never from the ``stream`` column,
        and its own chain (stream_seq 0, 1, ... each naming the previous leaf) must hold.
        """
        found: list[StoredEvent] = []
        prev: str | None = None
        for row in self.scan_rows():
            head = row[9]
            if head.stream != stream:
                continue
            if head.stream_seq != len(found) or head.stream_prev != prev:
                raise ChainBrokenError(
                    f"seq {row[0]}: stream {stream}: stream_seq {head.stream_seq} after "
                    f"{head.stream_prev}, expected stream_seq {len(found)} after {prev}",
                    seq=row[0],
                )
            found.append(StoredEvent._make(row[:6]))
            prev = link_of(row[2])
        return found

    def indexed_stream(self, stream: str, stop: int) -> Iterator[tuple[int, bytes, bytes]]:
        """(seq, body, leaf hash) of the rows the stream index files under ``stream``
        below seq ``stop``, by stream_seq, as stored: the caller checks each body and the
        stream's chain (``ledger.tree_index`` does, against a verified tree)."""
        for row in self._db.stream_rows(stream, stop):
            yield row[:3]

    def stream_head(self, stream: str) -> tuple[int, bytes, int] | None:
        """(stream_seq, leaf hash, seq) of the row the stream index names as the stream's
        last, as stored (unchecked: ``ledger.app.snapshot`` compares it with the head of
        the verified tree index)."""
        return self._db.stream_head(stream)

    def indexed_stream_columns(
        self, stream: str, stop: int
    ) -> Generator[tuple[int, bytes, bytes, Any, Any], None, None]:
        """As :meth:`indexed_stream`, with the row's stream_seq and type columns as
        stored, for a reader that must refuse a row whose columns were edited. A
        generator: a reader that stops early closes it (and so the store's cursor)
        while the connection is still open."""
        yield from self._db.stream_rows(stream, stop)

    def events_of_type(self, *classes: type[EventBase]) -> Iterator[StoredEvent]:
        """Rows whose body is one of these event classes, in order, read by :meth:`scan`."""
        tags = frozenset(tag_of(c) for c in classes)
        for row in self.scan_rows():
            if row[9].type in tags:
                yield StoredEvent._make(row[:6])

    def streams(self) -> list[str]:
        """Every stream name, in order of first appearance, read by :meth:`scan`."""
        seen: dict[str, None] = {}
        for row in self.scan_rows():
            seen.setdefault(row[9].stream, None)
        return list(seen)

    def stored_checkpoints(self) -> list[tuple[int, str]]:
        """The automatically stored checkpoints: (tree size, signed note), by size.

        As stored: ``verify`` checks each against the log. A ledger made before
        automatic checkpoints has none.
        """
        out: list[tuple[int, str]] = []
        for size, note in self._db.checkpoints():
            if type(size) is not int or type(note) is not str:
                raise VerificationError(
                    f"stored checkpoint {size!r} is not (tree size, note text)", seq=None
                )
            out.append((size, note))
        return out

    def origin(self) -> str:
        """The checkpoint origin line: ``caseledger/<first 16 hex of the genesis leaf hash>``."""
        first = self.get(0)
        if first is None:
            raise StoreError(f"{self.path} holds no events")
        return "caseledger/" + first.leaf_hash.hex()[:16]

    def keyring(self) -> Keyring:
        """The signers registered so far, read from the stored signer events."""
        self._refresh_keyring(self.size())
        return self._keyring

    # ------------------------------------------------------------ writing

    def register_secrets(self, found: Callable[[bytes], str | None]) -> None:
        """Refuse, from now on, any event whose encoded body holds a secret.

        ``found(body)`` returns a description of the secret's form it found (never
        the secret), or None; ledger.secrets.SecretSet.find is one. An append with
        such an event raises SecretLeakError and stores nothing of its batch.
        """
        self._secret_checks.append(found)

    def append(
        self,
        items: Sequence[EventBase | Draft],
        signer: Signer,
        *,
        expect_size: int | None = None,
    ) -> list[int]:
        """Append a batch in one transaction; returns the seq of each item.

        A Draft gets its stream envelope from the stream head and the clock; a complete
        event is stored as is and must continue its stream. The same body twice
        returns the existing seq and writes nothing. ``expect_size`` makes the
        append optimistic: StoreConflictError, nothing written, when the log moved.
        """
        if self.readonly:
            raise StoreError(f"{self.location} was opened read-only: cannot append")
        # Most of what other writers added is checked before the lock is taken, so the
        # check under the lock reads only what arrived meanwhile.
        self._check_unseen(*self.head(), locked=False)
        self._db.begin()  # the store's one write lock: StoreBusyError after the timeout
        self._pending_tree = None
        self._pending_seen = None
        self._pending_notes = set()
        try:
            seqs = self._append_locked(items, signer, expect_size)
            self._db.commit()
        except BaseException:
            self._db.rollback()
            # The keyring may hold signer events of the abandoned batch: rebuild lazily.
            self._keyring, self._keyring_size = Keyring(), 0
            self._pending_tree = None
            raise
        if self._pending_tree is not None:
            self._tree, self._pending_tree = self._pending_tree, None
        if self._pending_seen is not None:
            self._seen = self._pending_seen
        self._seen_notes |= self._pending_notes
        return seqs

    def _append_locked(
        self, items: Sequence[EventBase | Draft], signer: Signer, expect_size: int | None
    ) -> list[int]:
        size, chain = self.head()
        self._check_unseen(size, chain)  # never append on top of what verify would refuse
        if expect_size is not None and expect_size != size:
            raise StoreConflictError(
                f"the ledger moved: expected tree size {expect_size}, found {size}",
                hint="re-read the ledger and retry the import against the new size",
            )
        # Fast path: no lookups; the store's unique key (stream position or leaf hash)
        # catches a stored duplicate.
        planned, seqs = self._plan(items, size, {})
        self._db.savepoint()
        try:
            self._write(planned, size, chain, signer)
        except DuplicateLeafError:
            # A stored duplicate (rare: re-imports). It shifts the stream envelopes of
            # later drafts, so plan again with every stored leaf known, until stable.
            self._db.rollback_to_savepoint()
            self._keyring, self._keyring_size = Keyring(), 0
            known: dict[bytes, int] = {}
            while found := self._stored_copies([p[1] for p in planned], [p[2] for p in planned]):
                known.update(found)
                planned, seqs = self._plan(items, size, known)
            try:
                self._write(planned, size, chain, signer)
            except DuplicateLeafError:
                raise ChainBrokenError(
                    f"{self.location}: a new event clashes with a stored row whose stream "
                    "columns do not match its event id",
                    seq=None,
                    hint="the ledger was edited; run `caseledger verify` on it",
                ) from None
        if signer.role == "operator" and any(isinstance(p[1], _CHECKPOINT_AFTER) for p in planned):
            self._store_checkpoint(size + len(planned), signer)
        self._db.release_savepoint()
        self._keyring_size = size + len(planned)
        return seqs

    def _store_checkpoint(self, size: int, signer: Signer) -> None:
        """Sign a checkpoint over the first ``size`` rows and store it (inside the batch)."""
        tree = self._tree_through(size)
        note = signer.sign_note(format_checkpoint(self.origin(), size, tree.root()))
        self._db.insert_checkpoint(size, note)
        self._pending_tree = tree
        self._pending_notes.add(size)

    def adopt_tree(self, tree: TreeAccumulator) -> None:
        """Start this writer's tree head from ``tree``: the tree of the log's first
        ``tree.size`` leaves, which the caller has verified (``ledger.app.snapshot``
        takes it from the tree index, whose root equals that of a signed stored
        checkpoint). The next automatic checkpoint then reads, under the write lock,
        only the rows after it, their chain checked from the stored chain at
        ``tree.size - 1``, as for the tree this writer keeps after its own checkpoint
        (issue 34). A tree no larger than the one held is ignored."""
        if self._tree is None or self._tree.size < tree.size:
            self._tree = tree.copy()

    def _tree_through(self, size: int) -> TreeAccumulator:
        """The tree of the first ``size`` rows, extending this writer's last one.

        The rows it has not seen are read with their chain checked, so an operator
        never signs a tree head over a log whose chain does not hold.
        """
        base = self._tree if self._tree is not None and self._tree.size <= size else None
        tree = TreeAccumulator() if base is None else base.copy()
        prev = GENESIS_CHAIN
        if tree.size:
            stored = self._db.chain_at(tree.size - 1)
            if stored is None:
                raise ChainBrokenError(f"seq {tree.size - 1}: missing", seq=tree.size - 1)
            prev = stored
        for seq, leaf, chain in self._db.select("seq, leaf_hash, chain", tree.size, size, 4096):
            prev = codec.chain_hash(prev, leaf)
            if seq != tree.size or prev != chain:
                raise ChainBrokenError(
                    f"seq {tree.size}: the chain does not hold; refusing to sign a checkpoint",
                    seq=tree.size,
                    hint="run `caseledger verify` on this ledger",
                )
            tree.append(leaf)
        if tree.size != size:
            raise ChainBrokenError(f"seq {tree.size}: missing", seq=tree.size)
        return tree

    def _write(
        self,
        planned: list[tuple[int, EventBase, bytes, bytes]],
        size: int,
        chain: bytes,
        signer: Signer,
    ) -> None:
        """Sign the planned rows and insert them (inside the caller's transaction).

        SQLite releases the GIL while it inserts. In a large batch each chunk of signed
        rows is therefore inserted by a helper thread while the next chunk is signed,
        when that thread has a core of its own (more cores than signing threads) or the
        insert is a wait on a server (PostgreSQL). Otherwise, as for a SQLite file on
        2 cores, the whole batch is signed on the signing threads first and then
        inserted: an insert running beside the signing threads there slowed the batch
        (docs/stores.md, "Signing on threads"). Only one thread uses the connection at a
        time: a chunk is handed over after the previous one is done, and nothing returns
        (or raises) while an insert is still running.
        """
        overlap = len(planned) > _CHUNK_ROWS and (
            not self._db.inserts_in_process or (os.cpu_count() or 1) > _signing_threads()
        )
        chunk_rows = _CHUNK_ROWS if overlap else max(1, len(planned))
        chunks = self._sign(planned, size, chain, signer, chunk_rows)
        if not overlap:
            for rows in chunks:
                self._insert(rows)
            return
        if self._inserter is None:
            self._inserter = ThreadPoolExecutor(1, thread_name_prefix="caseledger-insert")
        running: Future[None] | None = None
        try:
            for rows in chunks:
                if running is not None:
                    running.result()
                running = self._inserter.submit(self._insert, rows)
            if running is not None:
                running.result()
        finally:
            if running is not None:
                wait_for([running])

    def _sign(
        self,
        planned: list[tuple[int, EventBase, bytes, bytes]],
        size: int,
        chain: bytes,
        signer: Signer,
        chunk_rows: int,
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Check the signer and keyring rules, then chain and sign each planned row.

        Yields the rows in chunks of ``chunk_rows``. Within a chunk the rules are checked
        and the chain computed row by row, in order; then the chunk's signatures are made,
        on the signing threads when the chunk is long (:meth:`_sign_all`).
        """
        self._refresh_keyring(size)
        keyring = self._keyring
        key_id = signer.key_id
        for start in range(0, len(planned), chunk_rows):
            chunk = planned[start : start + chunk_rows]
            messages: list[bytes] = []
            chains: list[bytes] = []
            for seq, event, leaf, _ in chunk:
                problem = keyring.signer_problem(seq, key_id, event) or keyring.event_problem(event)
                if problem:
                    raise UsageError(f"append refused: seq {seq}: {problem}")
                keyring.apply(seq, event)
                messages.append(event_message(chain, leaf))  # event/v2: previous chain, leaf
                chain = codec.chain_hash(chain, leaf)
                chains.append(chain)
            sigs = self._sign_all(signer, messages)
            self._pending_seen = (chunk[-1][0] + 1, chain)
            yield [
                (seq, body, leaf, chained, key_id, sig, event.stream, event.stream_seq,
                 tag_of(type(event)))
                for (seq, event, leaf, body), chained, sig in zip(chunk, chains, sigs, strict=True)
            ]  # fmt: skip

    def _sign_all(self, signer: Signer, messages: list[bytes]) -> list[bytes]:
        """The Ed25519 signature of each message, in order.

        A long list is split over one thread per core (at most four): the cryptography
        library releases the GIL while it signs (measured here: 23,500 signatures/s on
        one thread, 39,700/s on two), and each signature depends on its message only.
        """
        threads = _signing_threads()
        if threads < 2 or len(messages) < _PARALLEL_SIGN_ROWS:
            return [signer.sign(m) for m in messages]
        if self._signing is None:
            self._signing = ThreadPoolExecutor(threads, thread_name_prefix="caseledger-sign")
        step = -(-len(messages) // threads)
        parts = [messages[i : i + step] for i in range(0, len(messages), step)]
        signed = self._signing.map(lambda part: [signer.sign(m) for m in part], parts)
        return [sig for part in signed for sig in part]

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        # DuplicateLeafError (a stored duplicate) goes to the caller: the slow path.
        self._db.insert(rows)

    # ------------------------------------------------------------ keyring changes

    def register(self, new: Signer, *, by: Signer) -> int:
        """Register ``new`` (SignerRegistered signed by the operator ``by``); returns its seq."""
        return self.append([_registration(new, self._clock())], by)[0]

    def retire(self, name: str, *, by: Signer, reason: str = "") -> int:
        """Retire the signer called ``name`` (SignerRetired signed by ``by``); returns its seq."""
        entry = self.keyring().by_name(name)
        if entry is None:
            raise UsageError(f"no signer called {name} in {self.path}")
        others = [e for e in self.keyring().active_operators() if e.key_id != entry.key_id]
        if entry.role == "operator" and not others:
            raise UsageError(
                f"retiring {name} would leave no active operator key",
                hint="register another operator first (caseledger keys add NAME --role operator)",
            )
        fields = {
            "key_id": entry.key_id,
            "name": name,
            "retired_at": self._clock(),
            "reason": reason,
        }
        return self.append([Draft(SignerRetired, LEDGER_STREAM, fields)], by)[0]


def _signing_threads() -> int:
    """How many threads sign a long chunk (Ledger._sign_all): one per core, at most four."""
    return min(4, os.cpu_count() or 1)


def _registration(signer: Signer, at: str) -> Draft:
    fields = {
        "key_id": signer.key_id,
        "public_key": encode_public_key(signer.public_key),
        "name": signer.name,
        "role": signer.role,
        "valid_from": at,
    }
    return Draft(SignerRegistered, LEDGER_STREAM, fields)


def _new_backend(location: Location) -> Backend:
    """An empty ledger store (schema, no rows) at ``location``."""
    if is_url(location):
        from ledger.stores.postgres import PostgresBackend

        return PostgresBackend.create(str(location))
    return SqliteBackend.create(Path(location))


def _display_path(location: Location, backend: Backend) -> Path:
    """``Ledger.path``: the file, or for a server the redacted URL as a name in messages."""
    return Path(location) if not is_url(location) else Path(backend.name)
