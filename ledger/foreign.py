"""Runs signed on another ledger: the checks ``verify`` and ``import run`` share (issue 18).

An imported event is kept as it was signed on its home ledger (docs/exchange.md):
an ``event.imported.v1`` wrapper, appended to this log and signed by this ledger's
operator, carries the original body, the original key id and signature and the
home ledger's chain value before the event (rule event/v2 signs it). The key that
signed it there is accepted here by a ``signer.foreign.v1`` event. These checks
say, for one wrapper, whether the inner event is what that key signed, and whether
the inner events of each run continue their own stream chain; they never look at
the local chain (``verify`` does that for the wrapper like for every row).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import msgspec

from ledger import codec
from ledger.errors import ChainBrokenError, SignatureError
from ledger.events import (
    LEDGER_STREAM,
    BankPublished,
    CheckpointIssued,
    Event,
    EventImported,
    ForeignSignerRegistered,
    SignerRegistered,
    SignerRetired,
    SignerTrusted,
    SignerUntrusted,
)
from ledger.keys import KeyEntry, public_key_problem, verify_event_signature

__all__ = [
    "NOT_IMPORTABLE",
    "ForeignChecker",
    "Inner",
    "foreign_key_problem",
    "inner_of",
    "link",
    "signature_problem",
]

#: Event types that are never part of an imported run (they belong to a ledger, not a run).
NOT_IMPORTABLE = (
    SignerRegistered,
    SignerRetired,
    SignerTrusted,
    SignerUntrusted,
    BankPublished,
    CheckpointIssued,
    ForeignSignerRegistered,
    EventImported,
)


def link(leaf: bytes) -> str:
    """How events name a leaf hash: ``sha256:<hex>``."""
    return "sha256:" + leaf.hex()


def foreign_key_problem(event: ForeignSignerRegistered) -> str | None:
    """Why a ``signer.foreign.v1`` event is malformed (None when it is well formed)."""
    label = f"foreign signer {event.name}"
    return public_key_problem(event.name, event.key_id, event.public_key, label)


def signature_problem(
    public_key: bytes, leaf: bytes, sig: bytes, prev_chain: bytes | None
) -> str | None:
    """Why ``sig`` is not the key's signature of the event (rule v2 with ``prev_chain``)."""
    if verify_event_signature(public_key, leaf, sig, prev_chain):
        return None
    rule = "event/v1 (leaf only)" if prev_chain is None else "event/v2 (previous chain and leaf)"
    return f"the original signature does not verify under rule {rule}"


@dataclass(frozen=True)
class Inner:
    """The event inside a wrapper: its original bytes, leaf hash and decoded shape."""

    body: bytes
    leaf: bytes
    event: Event
    prev_chain: bytes | None
    sig: bytes


def inner_of(wrapper: EventImported) -> tuple[Inner | None, str | None]:
    """Decode the wrapper's fields: (the inner event, None) or (None, why it cannot be read)."""
    try:
        body = base64.b64decode(wrapper.body, validate=True)
        sig = base64.b64decode(wrapper.sig, validate=True)
        prev = None if wrapper.prev_chain is None else bytes.fromhex(wrapper.prev_chain)
    except (binascii.Error, ValueError):
        return None, "the imported body, signature or prev_chain is not well encoded"
    if prev is not None and len(prev) != 32:
        return None, f"the imported prev_chain has {len(prev)} bytes, not 32"
    try:
        event = codec.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        return None, f"the imported body is not a known event: {exc}"
    if isinstance(event, NOT_IMPORTABLE):
        return None, f"the imported body is a {type(event).__name__}, which no run holds"
    return Inner(body, codec.leaf_hash(body), event, prev, sig), None


class ForeignChecker:
    """The foreign signers of a log and the inner stream chains of its imported runs.

    ``verify`` feeds it every ``signer.foreign.v1`` and ``event.imported.v1`` in
    order; each method raises a VerificationError naming the row's seq.
    """

    def __init__(self) -> None:
        self.keys: dict[str, ForeignSignerRegistered] = {}
        self._heads: dict[str, tuple[int, bytes]] = {}
        #: key id -> its trust windows [seq of signer.trusted.v1, seq of the revocation
        #: after it or None] (issue 29), in log order.
        self._windows: dict[str, list[list[int | None]]] = {}
        #: key id -> the first wrapper it signed before any trust (ledgers written before
        #: issue 29): the key must be trusted somewhere in the log (checked by finish).
        self._untrusted: dict[str, int] = {}
        #: origin -> imported events checked (for verify's summary).
        self.by_origin: dict[str, int] = {}

    def trust(self, seq: int, event: SignerTrusted | SignerUntrusted) -> None:
        """Open (signer.trusted.v1) or close (signer.untrusted.v1) a key's trust window."""
        windows = self._windows.setdefault(event.key_id, [])
        if isinstance(event, SignerTrusted):
            windows.append([seq, None])
        elif windows and windows[-1][1] is None:
            windows[-1][1] = seq

    def _check_trust(self, seq: int, key: ForeignSignerRegistered) -> None:
        windows = self._windows.get(key.key_id, [])
        opened = [w for w in windows if w[0] is not None and w[0] < seq]
        if not opened:
            self._untrusted.setdefault(key.key_id, seq)
            return
        if any(end is None or seq < end for _, end in opened):
            return
        raise SignatureError(
            f"seq {seq}: imported event signed by foreign key {key.name} ({key.key_id}) "
            f"after its trust was revoked at seq {opened[-1][1]}",
            seq=seq,
        )

    def finish(self) -> None:
        """After the walk: every key that signed an imported run is trusted in the log."""
        for key_id, seq in sorted(self._untrusted.items(), key=lambda kv: kv[1]):
            if key_id not in self._windows:
                key = self.keys[key_id]
                raise SignatureError(
                    f"seq {seq}: imported event signed by foreign key {key.name} ({key_id}), "
                    "which no signer.trusted.v1 in this log trusts",
                    seq=seq,
                    hint="if you trust that key, record it: caseledger signers trust KEY.pub "
                    f"--name {key.name}",
                )

    def register(self, seq: int, event: ForeignSignerRegistered, by: KeyEntry) -> None:
        """Accept a foreign signer (it must be well formed and accepted by an operator)."""
        if by.role != "operator":
            raise SignatureError(
                f"seq {seq}: foreign signer {event.name} accepted by {by.name} ({by.key_id}), "
                f"a {by.role} key: only an operator may accept one",
                seq=seq,
            )
        problem = foreign_key_problem(event)
        if problem is None and event.stream != LEDGER_STREAM:
            problem = f"signer.foreign.v1 must be in stream {LEDGER_STREAM}, not {event.stream}"
        if problem is None and event.accepted_by != by.key_id:
            problem = f"accepted_by {event.accepted_by} is not its signer {by.key_id}"
        known = self.keys.get(event.key_id)
        if problem is None and known is not None:
            problem = f"foreign signer {event.name} ({event.key_id}) is already registered"
        if problem:
            raise SignatureError(f"seq {seq}: {problem}", seq=seq)
        self.keys[event.key_id] = event

    def check(self, seq: int, wrapper: EventImported) -> Inner:
        """The inner event of a wrapper, once its original signature and stream link hold."""
        inner, problem = inner_of(wrapper)
        if inner is None:
            raise SignatureError(f"seq {seq}: {problem}", seq=seq)
        key = self.keys.get(wrapper.key_id)
        if key is None:
            raise SignatureError(
                f"seq {seq}: imported event signed by key id {wrapper.key_id}, which no "
                "signer.foreign.v1 before it accepts",
                seq=seq,
            )
        if key.origin != wrapper.origin:
            raise SignatureError(
                f"seq {seq}: imported from {wrapper.origin}, but foreign signer {key.name} "
                f"({key.key_id}) was accepted for {key.origin}",
                seq=seq,
            )
        self._check_trust(seq, key)
        problem = signature_problem(
            base64.b64decode(key.public_key), inner.leaf, inner.sig, inner.prev_chain
        )
        if problem:
            raise SignatureError(
                f"seq {seq}: imported event {link(inner.leaf)} (seq {wrapper.origin_seq} on "
                f"{wrapper.origin}): {problem} with foreign key {key.name} ({key.key_id})",
                seq=seq,
            )
        event = inner.event
        if event.stream != wrapper.stream:
            raise ChainBrokenError(
                f"seq {seq}: imported event of stream {event.stream} in stream {wrapper.stream}",
                seq=seq,
            )
        last = self._heads.get(wrapper.stream)
        want_seq, want_prev = (0, None) if last is None else (last[0] + 1, link(last[1]))
        if event.stream_seq != want_seq or event.stream_prev != want_prev:
            raise ChainBrokenError(
                f"seq {seq}: imported run {event.stream}: stream_seq {event.stream_seq} after "
                f"{event.stream_prev}, expected stream_seq {want_seq} after {want_prev}",
                seq=seq,
            )
        self._heads[wrapper.stream] = (event.stream_seq, inner.leaf)
        self.by_origin[wrapper.origin] = self.by_origin.get(wrapper.origin, 0) + 1
        return inner
