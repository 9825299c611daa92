"""Tree heads, signed checkpoints and Merkle proofs over a stored ledger.

The hashing and note formats live in ``merkle.py`` and ``checkpoint.py``; this
module applies them to a ledger file: it issues a checkpoint over the committed
log (then records it as CheckpointIssued) and builds and checks inclusion and
consistency proofs against checkpoint notes.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.checkpoint import (
    Checkpoint,
    NoteError,
    NoteVerifier,
    format_checkpoint,
    open_note,
    parse_checkpoint,
    parse_verifier_key,
)
from ledger.errors import ProofError, StoreBusyError, StoreConflictError, UsageError
from ledger.events import LEDGER_STREAM, CheckpointIssued
from ledger.keys import Signer
from ledger.merkle import (
    TreeAccumulator,
    consistency_proof,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from ledger.store import Draft, Ledger

__all__ = [
    "ConsistencyProof",
    "InclusionProof",
    "issue_checkpoint",
    "prove_consistency",
    "prove_inclusion",
    "read_checkpoint",
    "tree_head",
]

_RETRIES = 5


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class InclusionProof:
    """Leaf ``index`` with ``leaf_hash`` is in the tree of ``size`` leaves with ``root``."""

    origin: str
    index: int
    size: int
    leaf_hash: bytes
    root: bytes
    hashes: tuple[bytes, ...]

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (hashes in standard base64, as in checkpoints)."""
        return {
            "kind": "inclusion",
            "origin": self.origin,
            "leaf_index": self.index,
            "tree_size": self.size,
            "leaf_hash": _b64(self.leaf_hash),
            "root_hash": _b64(self.root),
            "proof": [_b64(h) for h in self.hashes],
        }


@dataclass(frozen=True)
class ConsistencyProof:
    """The tree (``new_size``, ``new_root``) extends (``old_size``, ``old_root``)."""

    origin: str
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    hashes: tuple[bytes, ...]

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (hashes in standard base64, as in checkpoints)."""
        return {
            "kind": "consistency",
            "origin": self.origin,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root_hash": _b64(self.old_root),
            "new_root_hash": _b64(self.new_root),
            "proof": [_b64(h) for h in self.hashes],
        }


def tree_head(ledger: Ledger, size: int | None = None) -> tuple[int, bytes]:
    """(size, RFC 9162 root) over the first ``size`` events (all committed ones by default)."""
    tree = TreeAccumulator()
    stop = ledger.size() if size is None else size
    for row in ledger.iter_events(0, stop):
        tree.append(row.leaf_hash)
    if tree.size != stop:
        raise ProofError(f"seq {tree.size}: the ledger has {tree.size} events, not {stop}")
    return tree.size, tree.root()


def issue_checkpoint(ledger: Ledger, signer: Signer) -> str:
    """Sign a checkpoint over the committed log, record it, and return a note covering both.

    The CheckpointIssued event holds a note over the ``size`` events committed before
    it and is appended at seq == ``size`` (an optimistic append, retried when another
    writer got there first). Appending it also stores, in the same transaction, the
    operator's checkpoint over ``size + 1`` events (``Ledger.append``'s automatic
    checkpoints), and that note is the one returned: it covers the CheckpointIssued
    event itself, so cutting that event off the log is caught by ``verify
    --checkpoint`` with the returned note (docs/verification.md).
    """
    if signer.role != "operator":
        raise UsageError(
            f"checkpoints are signed by an operator key; {signer.name} is {signer.role}"
        )
    for _ in range(_RETRIES):
        size, root = tree_head(ledger)
        note = signer.sign_note(format_checkpoint(ledger.origin(), size, root))
        fields = {"tree_size": size, "root_hash": "sha256:" + root.hex(), "note": note}
        try:
            ledger.append(
                [Draft(CheckpointIssued, LEDGER_STREAM, fields)], signer, expect_size=size
            )
        except StoreConflictError:
            continue
        covering = dict(ledger.stored_checkpoints()).get(size + 1)
        if covering is None:
            raise ProofError(
                f"seq {size}: no checkpoint over {size + 1} events was stored with the "
                "CheckpointIssued event",
                seq=size,
            )
        return covering
    raise StoreBusyError(
        f"ledger is busy: it kept moving while a checkpoint was signed ({_RETRIES} tries)",
        hint="retry when the other writers are done",
    )


def read_checkpoint(
    note: str, ledger: Ledger, *, trusted_keys: Sequence[str] = (), label: str = "checkpoint"
) -> Checkpoint:
    """Check a checkpoint note's signature and origin against this ledger.

    With ``trusted_keys`` only those keys may sign it; otherwise any operator key
    registered in the ledger may (run ``verify`` first to trust that keyring).
    """
    if trusted_keys:
        verifiers = [parse_verifier_key(k.strip()) for k in trusted_keys]
    else:
        verifiers = [
            NoteVerifier(e.name, e.public_key)
            for e in ledger.keyring().entries()
            if e.role == "operator"
        ]
    split = note.rfind("\n\n")
    try:
        parse_checkpoint(note[: split + 1] if split >= 0 else note)
    except NoteError as exc:
        raise UsageError(f"{label}: not a signed checkpoint note: {exc.message}") from None
    try:
        opened = open_note(note, verifiers)
        return parse_checkpoint(opened.text, ledger.origin())
    except NoteError as exc:
        raise ProofError(f"{label}: {exc.message}", hint=exc.hint) from None


def _leaves_for(ledger: Ledger, size: int, label: str) -> list[bytes]:
    leaves = ledger.leaf_hashes(size)
    if len(leaves) < size:
        raise ProofError(
            f"seq {len(leaves)}: the ledger ends at size {len(leaves)}, but {label} covers "
            f"{size} events (tail cut off)",
            seq=len(leaves),
        )
    return leaves


def prove_inclusion(
    ledger: Ledger,
    seq: int,
    note: str,
    *,
    trusted_keys: Sequence[str] = (),
    label: str = "checkpoint",
) -> InclusionProof:
    """Build the inclusion proof of event ``seq`` in a checkpoint's tree and check it."""
    cp = read_checkpoint(note, ledger, trusted_keys=trusted_keys, label=label)
    if not 0 <= seq < cp.size:
        raise UsageError(f"seq {seq} is not in {label}, which covers seq 0..{cp.size - 1}")
    leaves = _leaves_for(ledger, cp.size, label)
    hashes = inclusion_proof(leaves, seq, cp.size)
    try:
        verify_inclusion(leaves[seq], seq, cp.size, hashes, cp.root_hash)
    except ProofError as exc:
        raise ProofError(f"seq {seq}: not included in {label}: {exc.message}", seq=seq) from None
    return InclusionProof(cp.origin, seq, cp.size, leaves[seq], cp.root_hash, tuple(hashes))


def prove_consistency(
    ledger: Ledger,
    old_note: str,
    new_note: str,
    *,
    trusted_keys: Sequence[str] = (),
    labels: tuple[str, str] = ("old checkpoint", "new checkpoint"),
) -> ConsistencyProof:
    """Build the consistency proof from an older checkpoint to a newer one and check it."""
    old = read_checkpoint(old_note, ledger, trusted_keys=trusted_keys, label=labels[0])
    new = read_checkpoint(new_note, ledger, trusted_keys=trusted_keys, label=labels[1])
    if old.size > new.size:
        raise UsageError(
            f"{labels[0]} covers {old.size} events, more than {labels[1]} ({new.size}): "
            "swap --old and --new"
        )
    leaves = _leaves_for(ledger, new.size, labels[1])
    hashes = consistency_proof(leaves, old.size, new.size)
    try:
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, hashes)
    except ProofError as exc:
        raise ProofError(
            f"seq {max(old.size - 1, 0)}: {labels[1]} does not extend {labels[0]}: {exc.message}",
            seq=max(old.size - 1, 0),
        ) from None
    return ConsistencyProof(
        old.origin, old.size, new.size, old.root_hash, new.root_hash, tuple(hashes)
    )
