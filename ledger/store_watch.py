"""What other writers added, checked before appending on top of it (part of
:class:`ledger.store.Ledger`; docs/stores.md, "Who enforces what").

A writer keeps what it has checked: the log up to (size, chain), the stored
checkpoints it has seen, and the keyring up to a seq. Before each batch (once before
the write lock, again under it) it checks every row and checkpoint added since, so
no honest writer signs on top of a row or note ``verify`` would refuse.
"""

from __future__ import annotations

import msgspec

from ledger import codec
from ledger.checkpoint import NoteError, NoteVerifier, open_note, parse_checkpoint
from ledger.errors import ChainBrokenError, ProofError, SignatureError, VerificationError
from ledger.keys import Keyring, verify_event_signature
from ledger.store_rows import GENESIS_CHAIN, SIGNER_TAGS
from ledger.stores import EVENT_COLUMNS, Backend, is_url

__all__ = ["WriterWatch"]


class WriterWatch:
    """The checking half of an append; :class:`ledger.store.Ledger` provides the state."""

    location: str
    _db: Backend
    _keyring: Keyring
    _keyring_size: int
    _seen: tuple[int, bytes] | None
    _seen_v2: bool
    _seen_notes: set[int]
    _notes_mark: int | None

    def origin(self) -> str:
        """The log's origin line (``Ledger.origin``)."""
        raise NotImplementedError

    def _check_unseen(self, size: int, chain: bytes, *, locked: bool = True) -> None:
        """Check the rows and checkpoints other writers added since this one last looked.

        Called before appending on top of a log of ``size`` rows ending at ``chain``
        (once before the write lock, again under it). Rows: from where this writer last
        looked, or for a writer that has not looked yet the head row alone, each must
        hash to its leaf, continue the chain, be signed by a key the keyring allows at
        its seq, and carry an Ed25519 signature that verifies (event/v2; event/v1 only
        before any event/v2 this writer checked). Checkpoints: every one stored since
        (on PostgreSQL the server records when, ``added``) must be a note signed by an
        operator key of this ledger, for this log, over at most ``size`` events (the
        PostgreSQL server has already checked its root). Honest writers all doing this
        means none ever appends on top of a row or note ``verify`` would refuse: the
        bad row stays the head, where this check finds it (docs/stores.md, "Who
        enforces what").

        Raises:
            SignatureError / ChainBrokenError / ProofError (exit 1): naming the seq or
                the checkpoint's size and the database role that wrote it; nothing of
                the batch is written.
        """
        seen = self._seen
        if seen is not None and seen[0] > size:
            raise ChainBrokenError(
                f"seq {size}: the log ends at size {size}, but this writer already read "
                f"{seen[0]} events (its tail was cut off); nothing was appended",
                seq=size,
                hint="run `caseledger verify` against a published checkpoint",
            )
        if size and (seen is None or seen[0] < size):
            start, prev = (size - 1, None) if seen is None else seen
            if prev is None:
                prev = GENESIS_CHAIN if start == 0 else self._db.chain_at(start - 1)
                if prev is None:
                    raise ChainBrokenError(f"seq {start - 1}: missing", seq=start - 1)
            self._check_rows(start, size, prev)
        elif seen is not None and seen[1] != chain:
            raise self._refused(
                ChainBrokenError,
                size - 1,
                "its chain changed since this writer read it (the row was replaced)",
            )
        self._seen = (size, chain)
        self._check_notes(size, locked)

    def _check_rows(self, start: int, stop: int, prev: bytes) -> None:
        """Rows ``start <= seq < stop``, checked as :meth:`_check_unseen` says."""
        if self._keyring_size > start:
            # the keyring already holds signer events of these rows (keyring() read
            # them): rebuild it to ``start`` so each row is checked as it came
            self._keyring, self._keyring_size = Keyring(), 0
        self._refresh_keyring(start)
        keyring = self._keyring
        expected = start
        for seq, body, leaf, chain, key_id, sig in self._db.select(
            EVENT_COLUMNS, start, stop, 1024
        ):
            if seq != expected:
                break
            if type(body) is not bytes or type(leaf) is not bytes or codec.leaf_hash(body) != leaf:
                raise self._refused(ChainBrokenError, seq, "its body does not hash to its leaf")
            if type(chain) is not bytes or codec.chain_hash(prev, leaf) != chain:
                raise self._refused(ChainBrokenError, seq, "its chain does not continue the log")
            try:
                event = codec.decode(body)
            except (msgspec.ValidationError, msgspec.DecodeError):
                raise self._refused(
                    ChainBrokenError, seq, "its body is not a known event"
                ) from None
            problem = keyring.signer_problem(seq, key_id, event) or keyring.event_problem(event)
            if problem:
                raise self._refused(SignatureError, seq, problem)
            if seq == 0:
                keyring.apply(0, event)
            entry = keyring.get(key_id)
            if entry is None or type(sig) is not bytes:
                raise self._refused(SignatureError, seq, f"key id {key_id} is not registered")
            if not self._signature_holds(entry.public_key, prev, leaf, sig):
                raise self._refused(
                    SignatureError,
                    seq,
                    f"its signature does not verify under key {entry.name} ({key_id})",
                )
            if seq:
                keyring.apply(seq, event)
            prev = chain
            expected += 1
        if expected != stop:
            raise ChainBrokenError(f"seq {expected}: missing", seq=expected)
        self._keyring_size = stop

    def _signature_holds(self, public_key: bytes, prev: bytes, leaf: bytes, sig: bytes) -> bool:
        if verify_event_signature(public_key, leaf, sig, prev):
            self._seen_v2 = True
            return True
        # An event/v1 signature (leaf only) is accepted only as verify accepts it: in a
        # ledger written before event/v2, so not after a v2 one this writer checked.
        return not self._seen_v2 and verify_event_signature(public_key, leaf, sig)

    def _check_notes(self, size: int, locked: bool) -> None:
        """Stored checkpoints this writer has not seen, checked as :meth:`_check_unseen` says.

        Before the write lock (``locked`` false) the log may have grown since its head
        was read: a checkpoint over more than ``size`` events is then another writer's
        batch committed in between, left for the check under the lock (issue 34: it
        was refused as a forgery, exit 1, when a run's end committed between the two
        reads).
        """
        mark = self._notes_mark if self._notes_mark is not None else max(size - 1, 0)
        rows = self._db.checkpoints_since(mark)
        if any(row[0] not in self._seen_notes for row in rows):
            self._refresh_keyring(size)
            verifiers = [
                NoteVerifier(e.name, e.public_key)
                for e in self._keyring.entries()
                if e.role == "operator"
            ]
            origin = self.origin()
            for cp_size, note, writer in rows:
                if cp_size in self._seen_notes:
                    continue
                if not locked and type(cp_size) is int and cp_size > size:
                    continue  # committed after the head was read: checked under the lock
                problem = _note_problem(cp_size, note, size, verifiers, origin)
                if problem:
                    by = f" (added by database role {writer})" if writer else ""
                    raise ProofError(
                        f"append refused: the checkpoint stored at size {cp_size}{by} "
                        f"{problem}; nothing was appended",
                        seq=None,
                        hint=self._repair_hint(),
                    )
                self._seen_notes.add(cp_size)
        self._notes_mark = size

    def _refused(self, cls: type[VerificationError], seq: int, problem: str) -> VerificationError:
        """The error that stops an append on top of a bad row, naming who wrote it."""
        writer = self._db.written_by(seq)
        by = f" (written by database role {writer})" if writer else ""
        return cls(
            f"append refused: seq {seq}{by}: {problem}; nothing was appended on top of it",
            seq=seq,
            hint=self._repair_hint(),
        )

    def _repair_hint(self) -> str:
        if is_url(self.location):
            return (
                "the ledger's owner must remove that row before anyone appends (docs/stores.md, "
                "Repairing a poisoned ledger); `caseledger verify` fails until then"
            )
        return (
            "the ledger file was changed behind caseledger's back: run `caseledger verify`, "
            "and restore the file from a good copy before anyone appends"
        )

    def _refresh_keyring(self, size: int) -> None:
        if size <= self._keyring_size:
            return
        for seq, body in self._db.bodies_of_types(SIGNER_TAGS, self._keyring_size, size):
            self._keyring.apply(seq, codec.decode(body))
        self._keyring_size = size


def _note_problem(
    size: object, note: object, log_size: int, verifiers: list[NoteVerifier], origin: str
) -> str | None:
    """Why a stored checkpoint row is not one this log's operator signed (None when it is)."""
    if type(size) is not int or type(note) is not str:
        return "is not (tree size, note text)"
    if size > log_size:
        return f"covers {size} events, but the log holds {log_size}"
    try:
        body = parse_checkpoint(open_note(note, verifiers).text, origin)
    except NoteError as exc:
        return f"is not a checkpoint signed by an operator key of this ledger: {exc.message}"
    if body.size != size:
        return f"holds a note over {body.size} events"
    return None
