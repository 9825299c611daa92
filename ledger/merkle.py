"""RFC 9162 Merkle tree: tree heads, inclusion proofs and consistency proofs over leaf hashes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from ledger.errors import ProofError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "TreeAccumulator",
    "consistency_proof",
    "consistency_proof_size",
    "inclusion_proof",
    "inclusion_proof_size",
    "node_hash",
    "perfect_root",
    "root_hash",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
#: The root of the empty tree: SHA-256 of the empty string (RFC 9162 section 2.1.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()
_NODE_PREFIX = b"\x01"


def node_hash(left: bytes, right: bytes) -> bytes:
    """Interior node hash: SHA-256(0x01 || left || right).

    Example:
        >>> node_hash(b"N123", b"N456").hex()[:16]
        'aa217fe888e47007'
    """
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2): RFC 9162's k."""
    return 1 << ((n - 1).bit_length() - 1)


def _check_leaf(leaf: bytes, where: str) -> None:
    if len(leaf) != HASH_SIZE:
        raise ProofError(f"{where}: a leaf hash has {HASH_SIZE} bytes, got {len(leaf)}")


class TreeAccumulator:
    """A compact range: the roots of the perfect subtrees that make up a tree of ``size`` leaves.

    It keeps one hash per set bit of ``size``, so memory is O(log n) and a ledger of
    any length can be hashed while it streams past. Appending costs one hash on average.

    Example:
        >>> acc = TreeAccumulator()
        >>> acc.root() == EMPTY_ROOT
        True
        >>> acc.extend([bytes(32), bytes(32)])
        >>> acc.root() == node_hash(bytes(32), bytes(32)), acc.size
        (True, 2)
    """

    __slots__ = ("_size", "_stack")

    def __init__(self) -> None:
        # Largest (leftmost) subtree first; their sizes are the set bits of _size.
        self._stack: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    def append(self, leaf_hash: bytes) -> None:
        """Add the next leaf hash (32 bytes) at index ``size``."""
        _check_leaf(leaf_hash, f"leaf {self._size}")
        merged = leaf_hash
        carry = self._size
        # Each trailing 1 bit of the old size is a perfect subtree of equal height to merge with.
        while carry & 1:
            merged = node_hash(self._stack.pop(), merged)
            carry >>= 1
        self._stack.append(merged)
        self._size += 1

    def append_subtree(self, node: bytes, height: int) -> None:
        """Add a perfect subtree of ``2**height`` leaves whose root is ``node``.

        The tree so far must end on a multiple of ``2**height`` leaves (the subtree is
        aligned, as every block of a stored index is), so the result equals appending
        its leaves one by one.

        Raises:
            ProofError: the subtree would not be aligned, or ``node`` is not 32 bytes.
        """
        _check_leaf(node, f"subtree at leaf {self._size}")
        width = 1 << height
        if height < 0 or self._size % width:
            raise ProofError(
                f"a subtree of {width} leaves cannot start at leaf {self._size} (not aligned)"
            )
        merged = node
        carry = self._size >> height
        while carry & 1:
            merged = node_hash(self._stack.pop(), merged)
            carry >>= 1
        self._stack.append(merged)
        self._size += width

    def copy(self) -> TreeAccumulator:
        """An independent accumulator of the same leaves (appending to one leaves the other)."""
        twin = TreeAccumulator()
        twin._stack = list(self._stack)
        twin._size = self._size
        return twin

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append every leaf hash in order."""
        for leaf in leaf_hashes:
            self.append(leaf)

    def root(self) -> bytes:
        """The RFC 9162 tree head over all leaves appended so far (SHA-256("") when empty)."""
        if not self._stack:
            return EMPTY_ROOT
        acc = self._stack[-1]
        # The right edge of an RFC 9162 tree joins the smaller subtrees first.
        for left in reversed(self._stack[:-1]):
            acc = node_hash(left, acc)
        return acc


def perfect_root(leaves: Sequence[bytes]) -> bytes:
    """MTH of a power-of-two number of leaf hashes, level by level (the fast path of a block).

    Example:
        >>> perfect_root([bytes(32), bytes(32)]) == node_hash(bytes(32), bytes(32))
        True
    """
    count = len(leaves)
    if count == 0 or count & (count - 1):
        raise ProofError(f"a perfect subtree has a power-of-two number of leaves, not {count}")
    level = list(leaves)
    sha = hashlib.sha256
    while len(level) > 1:
        level = [
            sha(_NODE_PREFIX + left + right).digest()
            for left, right in zip(level[::2], level[1::2], strict=True)
        ]
    return level[0]


def _subtree_root(leaves: Sequence[bytes], lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi]), hashing each leaf of the range once."""
    acc = TreeAccumulator()
    for i in range(lo, hi):
        acc.append(leaves[i])
    return acc.root()


def _check_tree(leaves: Sequence[bytes], size: int) -> None:
    if size < 0 or size > len(leaves):
        raise ProofError(f"tree size {size} is out of range: the log has {len(leaves)} leaves")


def root_hash(leaves: Sequence[bytes]) -> bytes:
    """MTH over all ``leaves`` (leaf hashes, 32 bytes each).

    Example:
        >>> root_hash([]).hex()[:16]
        'e3b0c44298fc1c14'
    """
    return _subtree_root(leaves, 0, len(leaves))


def inclusion_proof_size(index: int, size: int) -> int:
    """Length of the inclusion proof of leaf ``index`` in a tree of ``size`` leaves."""
    last = size - 1
    # Levels where the path to ``index`` and the path to the last leaf differ each need a
    # sibling; above them, each left turn of the shared path needs one more.
    inner = (index ^ last).bit_length()
    return inner + bin(index >> inner).count("1")


def inclusion_proof(leaves: Sequence[bytes], index: int, size: int) -> list[bytes]:
    """RFC 9162 PATH(index, D[0:size]): sibling hashes from the leaf upwards.

    Every sibling covers a range disjoint from the others, so the whole proof hashes
    each of the ``size`` leaves at most once.
    """
    _check_tree(leaves, size)
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not in a tree of size {size}")
    proof: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            proof.append(_subtree_root(leaves, lo + k, hi))
            hi = lo + k
        else:
            proof.append(_subtree_root(leaves, lo, lo + k))
            lo += k
    proof.reverse()
    return proof


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    Follows RFC 9162 section 2.1.3.2. Returns None or raises.

    Raises:
        ProofError: the index is outside the tree, a hash is not 32 bytes, the proof has
            the wrong length, or the recomputed root differs.
    """
    if size <= 0 or not 0 <= index < size:
        raise ProofError(f"inclusion proof: leaf index {index} is not in a tree of size {size}")
    if len(leaf_hash) != HASH_SIZE or len(root) != HASH_SIZE:
        raise ProofError(
            f"inclusion proof: leaf hash and root must have {HASH_SIZE} bytes, "
            f"got {len(leaf_hash)} and {len(root)}"
        )
    want = inclusion_proof_size(index, size)
    if len(proof) != want:
        raise ProofError(f"inclusion proof has wrong length: expected {want}, got {len(proof)}")
    for pos, sibling in enumerate(proof):
        if len(sibling) != HASH_SIZE:
            raise ProofError(
                f"inclusion proof element {pos} has {len(sibling)} bytes, expected {HASH_SIZE}"
            )
    fn, sn = index, size - 1
    acc = leaf_hash
    for sibling in proof:
        if fn & 1 or fn == sn:
            acc = node_hash(sibling, acc)
            # Skip the levels where this node has no right sibling (the right edge).
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            acc = node_hash(acc, sibling)
        fn >>= 1
        sn >>= 1
    if acc != root:
        raise ProofError(
            f"inclusion proof for leaf {index} in tree size {size} does not lead to the root: "
            f"computed {acc.hex()}, expected {root.hex()}"
        )


def consistency_proof_size(old_size: int, new_size: int) -> int:
    """Length of the consistency proof from ``old_size`` to ``new_size`` (0 < old < new)."""
    shift = (old_size & -old_size).bit_length() - 1
    old_last, new_last = (old_size - 1) >> shift, (new_size - 1) >> shift
    inner = (old_last ^ new_last).bit_length()
    border = bin(old_last >> inner).count("1")
    # When the old tree is itself a perfect subtree, its root is the verifier's seed
    # and is not sent.
    seed = 0 if old_size == 1 << shift else 1
    return seed + inner + border


def consistency_proof(leaves: Sequence[bytes], old_size: int, new_size: int) -> list[bytes]:
    """RFC 9162 PROOF(old_size, D[0:new_size]); empty when old_size is 0 or equals new_size."""
    _check_tree(leaves, new_size)
    if not 0 <= old_size <= new_size:
        raise ProofError(f"consistency proof: old size {old_size} is not within 0..{new_size}")
    if old_size in (0, new_size):
        return []
    proof: list[bytes] = []
    lo, hi = 0, new_size
    whole_old_tree = True  # RFC 9162's flag b: is [lo, hi) still the left edge of the tree?
    while True:
        if old_size == hi:
            if not whole_old_tree:
                proof.append(_subtree_root(leaves, lo, hi))
            break
        k = _split(hi - lo)
        if old_size - lo <= k:
            proof.append(_subtree_root(leaves, lo + k, hi))
            hi = lo + k
        else:
            proof.append(_subtree_root(leaves, lo, lo + k))
            lo += k
            whole_old_tree = False
    proof.reverse()
    return proof


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree (``new_size``, ``new_root``) extends (``old_size``, ``old_root``).

    Follows RFC 9162 section 2.1.4.2. Old size 0 follows C2SP tlog-witness: it is
    consistent with any later tree when the proof is empty, provided ``old_root`` is the
    empty-tree root SHA-256("") (the only root a tree of size 0 can have). Returns None
    or raises.

    Raises:
        ProofError: sizes out of order, a proof of the wrong length, or roots that the
            proof does not reproduce.
    """
    if not 0 <= old_size <= new_size:
        raise ProofError(
            f"consistency proof: old size {old_size} is larger than new size {new_size}"
            if old_size > new_size
            else f"consistency proof: negative old size {old_size}"
        )
    if old_size == 0 and old_root != EMPTY_ROOT:
        raise ProofError(
            "consistency proof: a tree of size 0 has root "
            f"{EMPTY_ROOT.hex()}, the old root is {old_root.hex()}"
        )
    if old_size == new_size:
        if proof:
            raise ProofError(
                f"consistency proof has wrong length: expected 0, got {len(proof)} "
                "(the sizes are equal)"
            )
        if old_root != new_root:
            raise ProofError(
                f"consistency proof: both trees have size {old_size} but their roots differ"
            )
        return
    if old_size == 0:
        if proof:
            raise ProofError(
                f"consistency proof has wrong length: expected 0, got {len(proof)} "
                "(the old tree is empty)"
            )
        return
    want = consistency_proof_size(old_size, new_size)
    if len(proof) != want:
        raise ProofError(f"consistency proof has wrong length: expected {want}, got {len(proof)}")
    for pos, element in enumerate(proof):
        if len(element) != HASH_SIZE:
            raise ProofError(
                f"consistency proof element {pos} has {len(element)} bytes, expected {HASH_SIZE}"
            )
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    old_acc = new_acc = path[0]
    # The length check above guarantees sn stays > 0 inside this loop (RFC step 6a).
    for element in path[1:]:
        if fn & 1 or fn == sn:
            old_acc = node_hash(element, old_acc)
            new_acc = node_hash(element, new_acc)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            new_acc = node_hash(new_acc, element)
        fn >>= 1
        sn >>= 1
    if old_acc != old_root:
        raise ProofError(
            f"consistency proof {old_size} -> {new_size} does not reproduce the old root: "
            f"computed {old_acc.hex()}, expected {old_root.hex()}"
        )
    if new_acc != new_root:
        raise ProofError(
            f"consistency proof {old_size} -> {new_size} does not reproduce the new root: "
            f"computed {new_acc.hex()}, expected {new_root.hex()}"
        )
