"""A verified tree index beside a ledger file, so one run is read without reading every row.

``<ledger>.index.db`` (SQLite; a cache: delete it at will, it is rebuilt) holds, at
the tree size N of a stored signed checkpoint:

* every leaf hash of seq 0..N-1, in blocks of 256 (one row per block, the 8 KB of its
  leaf hashes and, for a full block, the block's Merkle root);
* each stream's head at N: (stream_seq, seq, leaf hash) of its last event.

Nothing in it is trusted as written. :func:`open_index` recomputes the RFC 9162 root
of size N from the block roots (N/256 hashes) and the leaves of the last, partial
block, and uses the index only when that root equals the root of the stored
checkpoint at N whose signature verifies under an operator key of the ledger. A block
is used only after the Merkle root of its 256 leaves equals its (thereby verified)
block root. So every leaf hash the index gives is the leaf the signed tree has there.

The index follows the ledger: when a newer checkpoint is stored, the rows between
are read with every body hashed to its leaf, the chain and each stream's chain
checked, and the index is extended and checked against that checkpoint's root in
the same way before it is written. Rows after the newest checkpoint are never
indexed; a reader reads them in full (``ledger.app.snapshot``).

An index that does not verify (edited, stale, foreign, junk) is rebuilt from the
log with a note on stderr; a ledger whose own rows do not give its signed
checkpoint's root gets no index (the caller reads every row, as without one, and
fails where the rows do not hold). A PostgreSQL ledger has no file beside it and
is read without an index.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import msgspec

from ledger import codec
from ledger.errors import ChainBrokenError, LedgerError, ProofError, VerificationError
from ledger.merkle import HASH_SIZE, TreeAccumulator, perfect_root
from ledger.proofs import read_checkpoint
from ledger.store import GENESIS_CHAIN, Ledger, link_of
from ledger.store_rows import envelope_of

__all__ = [
    "BLOCK",
    "VERIFY_HINT",
    "TreeIndex",
    "check_log",
    "check_stream",
    "in_memory",
    "index_path",
    "open_index",
    "reopen",
]

#: Leaves per block: a block is a perfect subtree of height 8.
BLOCK_HEIGHT = 8
BLOCK = 1 << BLOCK_HEIGHT
_FORMAT = "caseledger-tree-index/1"
#: Verified blocks of leaves kept in memory (a run's events lie in few, nearby blocks):
#: 64 blocks of 256 leaves, about 1 MB, whatever the ledger's size.
_CACHED_BLOCKS = 64
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blocks (block INTEGER PRIMARY KEY, node BLOB, leaves BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS streams (
    stream TEXT PRIMARY KEY, stream_seq INTEGER NOT NULL, seq INTEGER NOT NULL,
    leaf BLOB NOT NULL
);
"""


#: What reading a checkpoint's signers from rows nobody checked yet may raise; the
#: full read then names the bad seq.
_UNREADABLE = (LedgerError, msgspec.MsgspecError, ValueError)


class _Linked(Protocol):
    """A body's stream envelope (the store's, or a reader's wider one)."""

    @property
    def stream(self) -> str: ...
    @property
    def stream_seq(self) -> int: ...
    @property
    def stream_prev(self) -> str | None: ...


class IndexMismatch(Exception):
    """The index and the ledger's stream index disagree (one of them was edited)."""


def index_path(ledger: Ledger) -> Path | None:
    """``<stem>.index.db`` beside a ledger file; None for a ledger on a server."""
    path = Path(ledger.location)
    if not path.is_file():
        return None
    return path.with_name(path.stem + ".index.db")


@dataclass
class TreeIndex:
    """The verified index at tree size ``size`` (see the module doc)."""

    size: int
    root: bytes
    #: Merkle roots of the full blocks, in order.
    nodes: list[bytes]
    #: Leaf hashes of the last, partial block (verified through ``root``).
    last: list[bytes]
    #: stream -> (stream_seq, seq, leaf hash) of its last event below ``size``.
    heads: dict[str, tuple[int, int, bytes]]
    path: Path | None = None
    #: Every head's leaf was found equal to the verified leaf at its seq (a check of
    #: the index alone, made once: ``ledger.app.snapshot``).
    heads_in_tree: bool = False
    _blocks: dict[int, list[bytes]] = field(default_factory=dict)

    def leaf(self, seq: int) -> bytes:
        """The verified leaf hash at ``seq`` (< size)."""
        block, offset = divmod(seq, BLOCK)
        if block == len(self.nodes):
            return self.last[offset]
        return self._block(block)[offset]

    def _block(self, block: int) -> list[bytes]:
        found = self._blocks.get(block)
        if found is not None:
            return found
        leaves = _split(self._read_block(block))
        if len(leaves) != BLOCK or perfect_root(leaves) != self.nodes[block]:
            raise IndexMismatch(f"block {block} does not hash to its verified root")
        self._blocks[block] = leaves
        if len(self._blocks) > _CACHED_BLOCKS:  # the oldest out: memory stays flat (issue 21)
            del self._blocks[next(iter(self._blocks))]
        return leaves

    def _read_block(self, block: int) -> bytes:
        if self.path is None:
            raise IndexMismatch("no index file")
        with contextlib.closing(_connect(self.path)) as conn:
            row = conn.execute("SELECT leaves FROM blocks WHERE block = ?", (block,)).fetchone()
        if row is None or type(row[0]) is not bytes:
            raise IndexMismatch(f"block {block} is missing")
        return bytes(row[0])

    def accumulator(self, size: int) -> TreeAccumulator:
        """The tree of the first ``size`` (<= self.size) leaves."""
        tree = TreeAccumulator()
        full = size // BLOCK
        for node in self.nodes[:full]:
            tree.append_subtree(node, BLOCK_HEIGHT)
        for seq in range(full * BLOCK, size):
            tree.append(self.leaf(seq))
        return tree


def open_index(ledger: Ledger) -> TreeIndex | None:
    """The ledger's index at its newest verified stored checkpoint, or None.

    None when the ledger has no file (a server), no stored checkpoint, or rows that
    do not give its signed root; the caller then reads every row.
    """
    path = index_path(ledger)
    if path is None:
        return None
    target = _newest_checkpoint(ledger)
    if target is None:
        return None
    size, root = target
    found = _load(path)
    if found is not None:
        at = root if found.size == size else _checkpoint_root(ledger, found.size)
        if found.size > size or at is None or _root_of(found) != at:
            found = None
        elif found.size == size:
            found.root = root
            return found
    if found is None and path.exists():
        sys.stderr.write(
            f"note: {path.name} did not match the ledger's signed checkpoints; "
            "rebuilding it from the log\n"
        )
    try:
        index = _extend(ledger, found, size)
    except LedgerError:
        return None  # the rows do not hold: the full read names the seq
    if _root_of(index) != root:
        return None
    index.root = root
    index.path = path
    _write(path, index, 0 if found is None else found.size)
    return index


def reopen(ledger: Ledger, held: TreeIndex | None) -> TreeIndex | None:
    """``held`` (an index :func:`open_index` gave for this ledger) while the newest
    stored checkpoint whose signature verifies is still the one it was verified
    against; else :func:`open_index` (which extends it by the rows since)."""
    if (
        held is not None
        and held.path is not None
        and _newest_checkpoint(ledger) == (held.size, held.root)
    ):
        return held
    return open_index(ledger)


def in_memory(ledger: Ledger, size: int) -> TreeIndex | None:
    """An index of the first ``size`` leaves built from the log and kept in memory, for a
    ledger with no file beside it (PostgreSQL; issue 21): every row below ``size`` read
    once, its body hashed to its leaf, the chain and each stream's chain checked (the
    whole-log check of a full read), keeping 32 bytes per event and each stream's head
    instead of every event, so a report can then fold one run at a time through the
    store's stream index. Its root is the tree head of exactly those rows (a full read
    gives the same). None when a row does not hold: the full read names the seq."""
    try:
        index = _extend(ledger, None, size)
    except LedgerError:
        return None
    index.root = _root_of(index)
    return index


def rebuild(ledger: Ledger) -> TreeIndex | None:
    """Delete the index file and build it again from the log (after a mismatch)."""
    path = index_path(ledger)
    if path is None:
        return None
    sys.stderr.write(
        f"note: {path.name} disagrees with the ledger's stream index; rebuilding it from the log\n"
    )
    _remove(path)
    return open_index(ledger)


#: What a reader that found a damaged row tells the user to do next.
VERIFY_HINT = "run `caseledger verify` on this ledger"


def check_log(ledger: Ledger, index: TreeIndex | None) -> None:
    """Every row of the log read once, streamed, and checked (issue 33: fail closed).

    Each row passes :meth:`Ledger.scan_rows`, the one checked read of every reader
    (seq with no gap, the body hashing to its stored leaf hash, the chain, and the
    ``stream``, ``stream_seq`` and ``type`` columns equal to the body's envelope), and
    continues its stream's own chain (:func:`check_stream`, as a report checks it).
    Below the size of ``index``, when it was verified against a signed checkpoint (it
    has a file), the leaves read must also be the signed tree's: each full block of
    256 must have the block's verified Merkle root, those of the last partial block
    must be its verified leaves. No signature is checked (``verify`` does) and nothing
    is kept but one block of leaf hashes, whatever the ledger's size. What ``runs``
    and ``bank list`` check before listing, so that no row they do not fold can hide
    damage.

    Raises:
        ChainBrokenError / VerificationError: the first row that does not hold (as
            every reader names it), or ProofError: a leaf the signed tree does not
            have; each names the seq and says to run ``caseledger verify`` (exit 1).
    """
    tree = index if index is not None and index.path is not None else None
    signed = 0 if tree is None else tree.size
    block: list[bytes] = []  # the leaves read of block ``number``, below ``signed``
    number = 0
    heads: dict[str, tuple[int, bytes]] = {}
    try:
        for row in ledger.scan_rows(ledger.size()):
            head = row[9]
            check_stream(row[0], head, heads)
            heads[head.stream] = (head.stream_seq, row[2])
            if row[0] < signed:
                block.append(row[2])
                if len(block) == BLOCK:
                    _same_leaves(tree, number, block)
                    block, number = [], number + 1
    except VerificationError as exc:
        exc.hint = exc.hint or VERIFY_HINT
        # A leaf the signed tree lacks, read before the row that stopped the read (a
        # rewritten body breaks the next event's stream chain), is the first bad seq.
        _same_leaves(tree, number, block)
        raise
    _same_leaves(tree, number, block)


def check_stream(seq: int, head: _Linked, heads: dict[str, tuple[int, bytes]]) -> None:
    """Raise ChainBrokenError unless the event at ``seq`` continues its stream's chain:
    ``heads`` maps each stream to (stream_seq, leaf hash) of its last event so far."""
    last = heads.get(head.stream)
    want_seq, want_prev = (0, None) if last is None else (last[0] + 1, link_of(last[1]))
    if head.stream_seq != want_seq or head.stream_prev != want_prev:
        raise ChainBrokenError(
            f"seq {seq}: stream {head.stream}: stream_seq {head.stream_seq} after "
            f"{head.stream_prev}, expected stream_seq {want_seq} after {want_prev}",
            seq=seq,
        )


def _same_leaves(index: TreeIndex | None, number: int, leaves: list[bytes]) -> None:
    """Raise ProofError naming the first seq whose leaf is not the verified one there:
    ``leaves`` are those read from the start of block ``number`` (a full block is
    compared by its Merkle root, the fast path)."""
    if index is None or not leaves:
        return
    if len(leaves) == BLOCK and perfect_root(leaves) == index.nodes[number]:
        return
    try:
        signed = index._block(number) if number < len(index.nodes) else index.last
    except IndexMismatch:  # the index file's leaves were edited: the block's first seq
        signed = []
    first = number * BLOCK
    for seq, leaf in enumerate(leaves, first):
        if signed[seq - first : seq - first + 1] != [leaf]:
            raise ProofError(
                f"seq {seq}: leaf hash {link_of(leaf)} is not the one the signed "
                f"checkpoint at size {index.size} holds there (the log was rewritten)",
                seq=seq,
                hint=VERIFY_HINT,
            )


# ----------------------------------------------------------------- internals


def _newest_checkpoint(ledger: Ledger) -> tuple[int, bytes] | None:
    """(size, root) of the newest stored checkpoint whose signature verifies."""
    size = ledger.size()
    for n, note in reversed(ledger.stored_checkpoints()):
        if 0 < n <= size:
            try:
                cp = read_checkpoint(note, ledger)
            except _UNREADABLE:
                return None
            return (cp.size, cp.root_hash) if cp.size == n else None
    return None


def _checkpoint_root(ledger: Ledger, size: int) -> bytes | None:
    for n, note in ledger.stored_checkpoints():
        if n == size:
            try:
                cp = read_checkpoint(note, ledger)
            except _UNREADABLE:
                return None
            return cp.root_hash if cp.size == n else None
    return None


def _root_of(index: TreeIndex) -> bytes:
    tree = TreeAccumulator()
    for node in index.nodes:
        tree.append_subtree(node, BLOCK_HEIGHT)
    tree.extend(index.last)
    if tree.size != index.size:
        return b""
    return tree.root()


def _split(blob: bytes) -> list[bytes]:
    return [blob[i : i + HASH_SIZE] for i in range(0, len(blob), HASH_SIZE)]


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=10.0, isolation_level=None)


def _remove(path: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            Path(str(path) + suffix).unlink()


def _load(path: Path) -> TreeIndex | None:
    """The index as stored (unverified), or None when absent or unreadable."""
    if not path.is_file():
        return None
    try:
        with contextlib.closing(_connect(path)) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format") != _FORMAT:
                return None
            size = int(meta["size"])
            rows = conn.execute(
                "SELECT block, node, length(leaves) FROM blocks ORDER BY block"
            ).fetchall()
            rest_blob = conn.execute(
                "SELECT leaves FROM blocks WHERE block = ?", (size // BLOCK,)
            ).fetchone()
            heads = {
                str(s): (int(n), int(q), bytes(leaf))
                for s, n, q, leaf in conn.execute(
                    "SELECT stream, stream_seq, seq, leaf FROM streams"
                )
            }
    except (sqlite3.DatabaseError, KeyError, ValueError, TypeError):
        return None
    full, rest = divmod(size, BLOCK)
    if len(rows) != full + (1 if rest else 0):
        return None
    nodes: list[bytes] = []
    last: list[bytes] = []
    for i, (block, node, length) in enumerate(rows):
        if block != i or length != (BLOCK if i < full else rest) * HASH_SIZE:
            return None
        if i < full:
            if type(node) is not bytes or len(node) != HASH_SIZE:
                return None
            nodes.append(node)
        elif rest_blob is None or type(rest_blob[0]) is not bytes:
            return None
        else:
            last = _split(rest_blob[0])
    return TreeIndex(size, b"", nodes, last, heads, path)


def _extend(ledger: Ledger, found: TreeIndex | None, size: int) -> TreeIndex:
    """The index of ``size`` leaves: ``found`` (verified) plus the rows after it, checked."""
    start = 0 if found is None else found.size
    nodes = [] if found is None else list(found.nodes)
    block = [] if found is None else list(found.last)
    heads = {} if found is None else dict(found.heads)
    built: dict[int, list[bytes]] = {}  # blocks completed here, verified by construction
    prev = GENESIS_CHAIN
    if start:
        row = ledger.get(start - 1)
        if row is None:
            raise ChainBrokenError(f"seq {start - 1}: missing", seq=start - 1)
        prev = row.chain
    expected = start
    for row in ledger.iter_events(start, size):
        seq, body, leaf, chain = row.seq, row.body, row.leaf_hash, row.chain
        if seq != expected:
            raise ChainBrokenError(f"seq {expected}: missing", seq=expected)
        if type(body) is not bytes or type(leaf) is not bytes:
            raise ChainBrokenError(f"seq {seq}: body or leaf hash is not a blob", seq=seq)
        if codec.leaf_hash(body) != leaf:
            raise ChainBrokenError(f"seq {seq}: body does not hash to its leaf hash", seq=seq)
        prev = codec.chain_hash(prev, leaf)
        if prev != chain:
            raise ChainBrokenError(f"seq {seq}: chain does not hold", seq=seq)
        head = envelope_of(seq, body)
        last = heads.get(head.stream)
        want = (0, None) if last is None else (last[0] + 1, link_of(last[2]))
        if (head.stream_seq, head.stream_prev) != want:
            raise ChainBrokenError(f"seq {seq}: stream {head.stream}: chain broken", seq=seq)
        heads[head.stream] = (head.stream_seq, seq, leaf)
        block.append(leaf)
        if len(block) == BLOCK:
            built[len(nodes)] = block
            nodes.append(perfect_root(block))
            block = []
        expected += 1
    if expected != size:
        raise ChainBrokenError(f"seq {expected}: missing", seq=expected)
    return TreeIndex(size, b"", nodes, block, heads, _blocks=built)


def _write(path: Path, index: TreeIndex, since: int) -> None:
    """Store the index (blocks from the one holding ``since`` on); best effort."""
    if since == 0:
        _remove(path)
    try:
        with contextlib.closing(_connect(path)) as conn:
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN IMMEDIATE")
            try:
                first = since // BLOCK
                conn.execute("DELETE FROM blocks WHERE block >= ?", (first,))
                conn.executemany("INSERT INTO blocks VALUES (?, ?, ?)", _block_rows(index, first))
                conn.execute("DELETE FROM streams")
                conn.executemany(
                    "INSERT INTO streams VALUES (?, ?, ?, ?)",
                    [(s, n, q, leaf) for s, (n, q, leaf) in index.heads.items()],
                )
                conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('format', ?), ('size', ?)",
                    (_FORMAT, str(index.size)),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    except (sqlite3.DatabaseError, OSError):
        return  # a cache: a reader that cannot write it reads through it anyway


def _block_rows(index: TreeIndex, first: int) -> Iterator[tuple[int, bytes | None, bytes]]:
    for block in range(first, len(index.nodes)):
        yield block, index.nodes[block], b"".join(index._block(block))
    if index.last:
        yield len(index.nodes), None, b"".join(index.last)
