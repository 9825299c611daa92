"""Verify a ledger from its stored bytes alone and name the first bad sequence number.

The steps, numbered as in docs/verification.md:
  (1) body -> leaf hash, and the body decodes to a known event shape;
  (2) chain = SHA-256(previous chain || leaf hash), with no gap in ``seq``;
  (3) signature by a key registered in the log, inside its window (checked in
      parallel across cores: the keyring walk stays in order, only the Ed25519
      arithmetic is farmed out). Rule event/v2 signs the previous chain and the
      leaf, so removing, inserting or reordering any event breaks a signature;
      rule event/v1 (ledgers written before it) signs the leaf alone and is
      accepted only before the first event/v2 signature;
  (4) per-stream chains: ``stream_seq`` contiguous, ``stream_prev`` the previous leaf;
      and the query columns (``stream``, ``stream_seq``, ``type``) equal the body's;
  (5) Merkle tree heads: every CheckpointIssued in the log, every checkpoint stored
      in the ledger's ``checkpoints`` table and every note given by the caller (the
      last two also catch a cut-off tail);
  (6) runs imported from other ledgers (docs/exchange.md): each event.imported.v1
      carries an event as signed on its home ledger; its original signature must
      verify with the key a signer.foreign.v1 before it accepted, and the inner
      events of each run must continue their own stream chain (ledger/foreign.py);
  (7) stored prompts (issue 22): every PromptStored's text hashes to its
      ``prompt_sha256``, and every PromptSent written without its text names a
      PromptStored before it in its own stream (imported runs' inner events too).
Verification fails closed.
"""

from __future__ import annotations

import base64
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger import codec
from ledger.checkpoint import (
    Checkpoint,
    NoteError,
    NoteVerifier,
    open_note,
    parse_checkpoint,
    parse_verifier_key,
)
from ledger.errors import (
    ChainBrokenError,
    ProofError,
    SignatureError,
    UsageError,
    VerificationError,
)
from ledger.events import (
    CheckpointIssued,
    EventImported,
    ForeignSignerRegistered,
    PromptSent,
    PromptStored,
    SignerRegistered,
    SignerTrusted,
    SignerUntrusted,
)
from ledger.foreign import ForeignChecker
from ledger.keys import EVENT_SIGNING_PREFIX, EVENT_SIGNING_PREFIX_V2, Keyring
from ledger.merkle import TreeAccumulator
from ledger.store import GENESIS_CHAIN, Ledger, StoredEvent, link_of
from ledger.stores import Location

__all__ = ["Recompute", "VerifyResult", "verify_chain", "verify_ledger"]

#: The ``--recompute`` hook: given the verified events in order, raise a
#: VerificationError naming the first seq whose recorded score differs.
Recompute = Callable[[Iterator[StoredEvent]], None]

_CHUNK = 1024  # signatures per job sent to a worker process
_PARALLEL_MIN = 4096  # below this many events, starting workers costs more than it saves


@dataclass(frozen=True)
class VerifyResult:
    """What a successful verification established."""

    size: int
    root_hash: bytes
    head_chain: bytes
    origin: str
    streams: int
    signers: int
    checkpoints_in_log: int
    checkpoint_sizes: tuple[int, ...] = ()
    signatures_checked: bool = True
    recomputed: bool = False
    trusted: tuple[str, ...] = field(default=())
    #: How many events follow signature rule event/v1 (they come first) and event/v2.
    signed_v1: int = 0
    signed_v2: int = 0
    #: Tree sizes of the checkpoints stored in the ledger file, all checked.
    stored_checkpoint_sizes: tuple[int, ...] = ()
    #: event.imported.v1 rows whose original signature was checked (step 6).
    imported: int = 0

    def rules(self) -> str:
        """Which signature rule each event follows, by seq range."""
        parts = []
        if self.signed_v1:
            parts.append(f"seq 0-{self.signed_v1 - 1} event/v1 (content only)")
        if self.signed_v2:
            first = self.signed_v1
            parts.append(f"seq {first}-{first + self.signed_v2 - 1} event/v2 (content and place)")
        return ", ".join(parts)

    def summary(self) -> str:
        """One line for people."""
        what = "verified" if self.signatures_checked else "chain verified (signatures NOT checked)"
        parts = [
            f"{what}: {self.size} events, {self.streams} streams, {self.signers} signers",
            f"root sha256:{self.root_hash.hex()}",
        ]
        if self.signatures_checked and (self.signed_v1 or self.signed_v2):
            parts.append("signatures " + self.rules())
        if self.stored_checkpoint_sizes:
            parts.append(
                f"{len(self.stored_checkpoint_sizes)} stored checkpoints, newest at size "
                f"{self.stored_checkpoint_sizes[-1]}"
            )
        if self.checkpoint_sizes:
            parts.append("checkpoints at size " + ", ".join(map(str, self.checkpoint_sizes)))
        if self.imported:
            parts.append(f"{self.imported} imported events, original signatures checked")
        if self.recomputed:
            parts.append("scores recomputed")
        return "; ".join(parts)


def _fail(cls: type[VerificationError], seq: int, message: str) -> VerificationError:
    return cls(f"seq {seq}: {message}", seq=seq)


# ----------------------------------------------------------------- signatures

_WORKER_KEYS: dict[bytes, Ed25519PublicKey] = {}


#: (first bad seq, first v1 seq, first v2 seq, first v1 seq after a v2 one, v1 count)
_ChunkResult = tuple[int | None, int | None, int | None, int | None, int]


def _check_chunk(jobs: list[tuple[int, bytes, bytes, bytes, bytes]]) -> _ChunkResult:
    """Verify a chunk's signatures, v2 first, v1 as the fallback (runs in a worker).

    Returns the first seq that verifies under neither rule, and where the rules
    change, so the caller can refuse an event/v1 signature after an event/v2 one.
    """
    keys = _WORKER_KEYS
    bad = first_v1 = first_v2 = late_v1 = None
    v1 = 0
    for seq, public_key, prev_chain, leaf, sig in jobs:
        key = keys.get(public_key)
        if key is None:
            key = keys[public_key] = Ed25519PublicKey.from_public_bytes(public_key)
        try:
            key.verify(sig, EVENT_SIGNING_PREFIX_V2 + prev_chain + leaf)
            if first_v2 is None:
                first_v2 = seq
            continue
        except (InvalidSignature, ValueError, TypeError):
            pass
        try:
            key.verify(sig, EVENT_SIGNING_PREFIX + leaf)
        except (InvalidSignature, ValueError, TypeError):
            return seq, first_v1, first_v2, late_v1, v1
        v1 += 1
        if first_v1 is None:
            first_v1 = seq
        if first_v2 is not None and late_v1 is None:
            late_v1 = seq
    return bad, first_v1, first_v2, late_v1, v1


class _SignatureChecker:
    """Checks signatures in order of submission, in a process pool or in process."""

    def __init__(self, workers: int) -> None:
        self._pool: ProcessPoolExecutor | None = None
        if workers > 1:
            # fork: workers need only this module's function and no re-import of the
            # caller's __main__ (spawn/forkserver would run an unguarded script again).
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
        self._limit = 2 * max(workers, 1)
        self._inflight: deque[Future[_ChunkResult]] = deque()
        self._chunk: list[tuple[int, bytes, bytes, bytes, bytes]] = []
        self.first_bad: int | None = None
        self.downgraded: int | None = None  # first event/v1 signature after an event/v2 one
        self.first_v2: int | None = None
        self.v1 = 0

    def add(self, seq: int, public_key: bytes, prev_chain: bytes, leaf: bytes, sig: bytes) -> None:
        self._chunk.append((seq, public_key, prev_chain, leaf, sig))
        if len(self._chunk) >= _CHUNK:
            self._flush()

    def _flush(self) -> None:
        chunk, self._chunk = self._chunk, []
        if not chunk:
            return
        if self._pool is None:
            self._record(_check_chunk(chunk))
            return
        self._inflight.append(self._pool.submit(_check_chunk, chunk))
        # Bounded queue: memory stays flat however long the ledger is.
        while len(self._inflight) > self._limit:
            self._record(self._inflight.popleft().result())

    def _record(self, result: _ChunkResult) -> None:
        # Chunks are recorded in submission (seq) order.
        bad, first_v1, first_v2, late_v1, v1 = result
        if bad is not None and (self.first_bad is None or bad < self.first_bad):
            self.first_bad = bad
        if self.downgraded is None:
            self.downgraded = first_v1 if self.first_v2 is not None else late_v1
        if self.first_v2 is None:
            self.first_v2 = first_v2
        self.v1 += v1

    def finish(self) -> int | None:
        """Wait for every chunk; the first seq with a bad signature, if any."""
        self._flush()
        while self._inflight:
            self._record(self._inflight.popleft().result())
        if self.downgraded is not None and (
            self.first_bad is None or self.downgraded < self.first_bad
        ):
            return self.downgraded
        return self.first_bad

    def problem(self, seq: int) -> str:
        """Why ``seq`` (returned by :meth:`finish`) failed."""
        if seq == self.downgraded and seq != self.first_bad:
            return (
                f"signed under rule event/v1 (leaf only) after seq {self.first_v2} was signed "
                "under event/v2 (leaf and place): an event signed by the older rule cannot "
                "follow one signed by the newer"
            )
        return "signature does not verify"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------- checkpoints


@dataclass
class _GivenCheckpoint:
    label: str
    note: str
    body: Checkpoint
    stored: bool = False  # stored in the ledger file (automatic), not given by the caller


def _parse_given(notes: Sequence[str], labels: Sequence[str]) -> list[_GivenCheckpoint]:
    given = []
    for i, note in enumerate(notes):
        label = labels[i] if i < len(labels) else f"checkpoint {i + 1}"
        split = note.rfind("\n\n")
        try:
            body = parse_checkpoint(note[: split + 1] if split >= 0 else note)
        except NoteError as exc:
            raise UsageError(f"{label}: not a signed checkpoint note: {exc.message}") from None
        given.append(_GivenCheckpoint(label, note, body))
    return given


def _stored(ledger: Ledger) -> list[_GivenCheckpoint]:
    """The checkpoints stored in the ledger file, to be checked like given ones."""
    out = []
    for size, note in ledger.stored_checkpoints():
        label = f"the checkpoint stored at size {size}"
        split = note.rfind("\n\n")
        try:
            body = parse_checkpoint(note[: split + 1] if split >= 0 else note)
        except NoteError as exc:
            raise ProofError(f"{label}: not a signed checkpoint note: {exc.message}") from None
        if body.size != size:
            raise ProofError(f"{label}: its note covers {body.size} events")
        out.append(_GivenCheckpoint(label, note, body, stored=True))
    return out


def _operator_verifiers(keyring: Keyring, extra: Sequence[NoteVerifier]) -> list[NoteVerifier]:
    found = [NoteVerifier(e.name, e.public_key) for e in keyring.entries() if e.role == "operator"]
    return found + list(extra)


def _check_given(
    cp: _GivenCheckpoint, size: int, origin: str, verifiers: list[NoteVerifier], root: bytes
) -> None:
    if cp.body.origin != origin:
        raise ProofError(
            f"{cp.label}: checkpoint is for log {cp.body.origin!r}, this ledger is {origin!r}"
        )
    try:
        open_note(cp.note, verifiers)
    except NoteError as exc:
        raise ProofError(f"{cp.label}: {exc.message}", hint=exc.hint) from None
    if cp.body.size > size:
        raise ProofError(
            f"seq {size}: the ledger ends at size {size}, but {cp.label} covers "
            f"{cp.body.size} events: seq {size}..{cp.body.size - 1} are missing (tail cut off)",
            seq=size,
        )
    if root != cp.body.root_hash:
        last = cp.body.size - 1
        raise ProofError(
            f"seq {last}: the tree head over seq 0..{last} is "
            f"{base64.b64encode(root).decode()}, but {cp.label} signed "
            f"{base64.b64encode(cp.body.root_hash).decode()} (the log was rewritten)",
            seq=last,
        )


def _check_in_log(
    seq: int, event: CheckpointIssued, root: bytes, origin: str, keyring: Keyring
) -> None:
    if event.tree_size != seq:
        raise _fail(ProofError, seq, f"CheckpointIssued covers {event.tree_size} events, not {seq}")
    if event.root_hash != "sha256:" + root.hex():
        raise _fail(
            ProofError, seq, f"CheckpointIssued root {event.root_hash} != sha256:{root.hex()}"
        )
    try:
        opened = open_note(event.note, _operator_verifiers(keyring, ()))
        body = parse_checkpoint(opened.text, origin)
    except NoteError as exc:
        raise _fail(ProofError, seq, f"CheckpointIssued note: {exc.message}") from None
    if body.size != seq or body.root_hash != root:
        raise _fail(ProofError, seq, "CheckpointIssued note does not match its tree size and root")


# ----------------------------------------------------------------- the walk


def _open(source: Location | Ledger) -> tuple[Ledger, bool]:
    if isinstance(source, Ledger):
        return source, False
    return Ledger.open(source, readonly=True), True


def _trusted(keys: Sequence[str]) -> list[NoteVerifier]:
    return [parse_verifier_key(k.strip()) for k in keys]


def verify_ledger(
    source: Location | Ledger,
    *,
    checkpoints: Sequence[str] = (),
    checkpoint_labels: Sequence[str] = (),
    trusted_keys: Sequence[str] = (),
    workers: int | None = None,
    recompute: Recompute | None = None,
) -> VerifyResult:
    """Verify every event of a ledger, then the given checkpoint notes; None or raise.

    Args:
        source: a ledger path or PostgreSQL URL (opened read-only) or an open Ledger.
        checkpoints: signed checkpoint notes (file contents) the log must match.
        checkpoint_labels: names for them in messages (e.g. their file names).
        trusted_keys: verifier-key strings of the operator; when given, the genesis
            signer must be one of them, and they may also sign checkpoint notes.
        workers: processes for signatures (default: every core; 1 = in process).
        recompute: the ``--recompute`` hook, run over the verified events.

    Raises:
        VerificationError: its message starts with ``seq N:`` naming the first bad row.
        UsageError / StoreError: the ledger or an argument could not be read (exit 2).
    """
    trusted = _trusted(trusted_keys)
    given = _parse_given(checkpoints, checkpoint_labels)
    ledger, owned = _open(source)
    try:
        given += _stored(ledger)
        wanted = {cp.body.size: b"" for cp in given}  # size -> tree head, filled by the walk
        size = ledger.size()
        if workers is None:
            workers = 1 if size < _PARALLEL_MIN else (os.cpu_count() or 1)
        checker = _SignatureChecker(workers)
        try:
            result = _walk(ledger, checker, trusted, given, wanted)
        finally:
            checker.close()
        if recompute is not None:
            bind = getattr(recompute, "bind", None)  # a hook that looks rows up by leaf hash
            if bind is not None:
                bind(ledger)
            recompute(ledger.iter_events(0, result.size))
            result = _replace_recomputed(result)
        return result
    finally:
        if owned:
            ledger.close()


def _replace_recomputed(result: VerifyResult) -> VerifyResult:
    from dataclasses import replace

    return replace(result, recomputed=True)


def _walk(
    ledger: Ledger,
    checker: _SignatureChecker,
    trusted: list[NoteVerifier],
    given: list[_GivenCheckpoint],
    wanted: dict[int, bytes],
) -> VerifyResult:
    keyring = Keyring()
    tree = TreeAccumulator()
    streams: dict[str, tuple[int, bytes]] = {}
    prev_chain = GENESIS_CHAIN
    origin = ""
    in_log = 0
    expected = 0
    foreign = ForeignChecker()  # (6) runs imported from other ledgers
    imported = 0
    prompts = _StoredPrompts()  # (7) stored prompts
    try:
        # (1) body -> leaf hash, (2) the chain and the query columns against the body's
        # envelope are checked by the scan itself.
        for row in ledger.scan_rows():
            seq, body, leaf, chain, key_id, sig = row[:6]
            if expected in wanted:
                wanted[expected] = tree.root()
            try:
                event = codec.decode(body)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise _fail(VerificationError, seq, f"body is not a known event: {exc}") from None
            # (3) signer window, in order; the Ed25519 check itself goes to the checker
            problem = keyring.signer_problem(seq, key_id, event) or keyring.event_problem(event)
            if problem:
                raise _fail(SignatureError, seq, problem)
            if seq == 0:
                origin = "caseledger/" + leaf.hex()[:16]
                _check_genesis(event, trusted)
                keyring.apply(0, event)
                entry = keyring.get(key_id)
            else:
                entry = keyring.get(key_id)
                keyring.apply(seq, event)
            if entry is None:  # signer_problem said it is registered
                raise _fail(SignatureError, seq, f"key id {key_id} is not registered")
            if type(sig) is not bytes:
                raise _fail(SignatureError, seq, "signature is not a blob")
            checker.add(seq, entry.public_key, prev_chain, leaf, sig)
            prev_chain = chain
            if isinstance(event, SignerTrusted | SignerUntrusted):
                foreign.trust(seq, event)
            if isinstance(event, ForeignSignerRegistered):
                foreign.register(seq, event, entry)
            elif isinstance(event, EventImported):
                prompts.check(seq, foreign.check(seq, event).event)
                imported += 1
            else:
                prompts.check(seq, event)
            # (4) stream chain, and the query columns against the body
            last = streams.get(event.stream)
            want_seq, want_prev = (0, None) if last is None else (last[0] + 1, link_of(last[1]))
            if event.stream_seq != want_seq or event.stream_prev != want_prev:
                raise _fail(
                    ChainBrokenError,
                    seq,
                    f"stream {event.stream}: stream_seq {event.stream_seq} after "
                    f"{event.stream_prev}, expected stream_seq {want_seq} after {want_prev}",
                )
            streams[event.stream] = (event.stream_seq, leaf)
            # (5) in-log tree heads
            if isinstance(event, CheckpointIssued):
                _check_in_log(seq, event, tree.root(), origin, keyring)
                in_log += 1
            tree.append(leaf)
            expected += 1
    except VerificationError as exc:
        # A row-level failure at seq S: an earlier bad signature still comes first.
        bad = checker.finish()
        if bad is not None and (exc.seq is None or bad < exc.seq):
            raise _fail(SignatureError, bad, checker.problem(bad)) from None
        raise
    bad = checker.finish()
    if bad is not None:
        raise _fail(SignatureError, bad, checker.problem(bad))
    foreign.finish()
    size = expected
    if size == 0:
        raise VerificationError("the ledger holds no events (not even its genesis)", seq=0)
    if size in wanted:
        wanted[size] = tree.root()
    verifiers = _operator_verifiers(keyring, trusted)
    for cp in sorted(given, key=lambda c: c.body.size):
        _check_given(cp, size, origin, verifiers, wanted.get(cp.body.size, b""))
    return VerifyResult(
        size=size,
        root_hash=tree.root(),
        head_chain=prev_chain,
        origin=origin,
        streams=len(streams),
        signers=len(keyring),
        checkpoints_in_log=in_log,
        checkpoint_sizes=tuple(sorted(cp.body.size for cp in given if not cp.stored)),
        stored_checkpoint_sizes=tuple(sorted(cp.body.size for cp in given if cp.stored)),
        trusted=tuple(v.key_string for v in trusted),
        signed_v1=checker.v1,
        signed_v2=size - checker.v1,
        imported=imported,
    )


class _StoredPrompts:
    """Step (7): the prompt texts each stream stored, by hash, and the references to them.

    Memory grows with the distinct prompts of each run (a few dozen hashes per run),
    not with its attempts.
    """

    def __init__(self) -> None:
        self.held: dict[str, set[str]] = {}

    def check(self, seq: int, event: object) -> None:
        if isinstance(event, PromptStored):
            found = codec.sha256_hex(event.prompt.encode())
            if found != event.prompt_sha256:
                raise _fail(
                    VerificationError,
                    seq,
                    f"prompt.stored.v1 of stream {event.stream}: the prompt hashes to "
                    f"{found}, not to its prompt_sha256 {event.prompt_sha256}",
                )
            self.held.setdefault(event.stream, set()).add(event.prompt_sha256)
        elif (
            isinstance(event, PromptSent)
            and event.prompt is msgspec.UNSET
            and event.prompt_sha256 not in self.held.get(event.stream, ())
        ):
            raise _fail(
                VerificationError,
                seq,
                f"prompt.sent.v1 of case {event.case_id} attempt {event.attempt} names "
                f"prompt {event.prompt_sha256}, which no prompt.stored.v1 before it in "
                f"stream {event.stream} holds",
            )


def _check_genesis(event: object, trusted: list[NoteVerifier]) -> None:
    if not trusted:
        return
    if not isinstance(event, SignerRegistered):  # signer_problem refuses this at seq 0 already
        raise _fail(SignatureError, 0, "seq 0 is not the operator's SignerRegistered")
    public_key = base64.b64decode(event.public_key)
    if not any(v.name == event.name and v.public_key == public_key for v in trusted):
        raise _fail(
            SignatureError,
            0,
            f"the ledger's operator key {event.name} ({event.key_id}) is not a trusted key "
            f"({', '.join(v.key_string for v in trusted)})",
        )


def verify_chain(source: Location | Ledger) -> VerifyResult:
    """Steps (1) and (2) only: leaf hashes and the chain. Signatures are NOT checked.

    For benchmarks and quick integrity checks; never a substitute for verify_ledger.
    """
    ledger, owned = _open(source)
    prev = GENESIS_CHAIN
    expected = 0
    try:
        for seq, body, leaf, chain in ledger.iter_chain_rows():
            if seq != expected:
                raise _fail(ChainBrokenError, expected, f"missing (next stored row is seq {seq})")
            if codec.leaf_hash(body) != leaf:
                raise _fail(ChainBrokenError, seq, "body does not hash to the stored leaf hash")
            prev = codec.chain_hash(prev, leaf)
            if prev != chain:
                raise _fail(ChainBrokenError, seq, "chain hash does not match")
            expected += 1
    finally:
        if owned:
            ledger.close()
    return VerifyResult(
        size=expected,
        root_hash=b"",
        head_chain=prev,
        origin="",
        streams=0,
        signers=0,
        checkpoints_in_log=0,
        signatures_checked=False,
    )
