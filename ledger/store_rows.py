"""What one stored row of the log is, for the store and its parts: the genesis chain,
how a stream names its previous event, the envelope of a body, a row as stored, a draft
whose envelope the store fills in, and the checks a body gets before it is stored or
believed (``ledger.store``, ``ledger.store_plan``, ``ledger.store_watch``)."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from ledger import codec
from ledger.errors import ChainBrokenError, UsageError, VerificationError
from ledger.events import (
    Event,
    EventBase,
    SignerRegistered,
    SignerRetired,
    SignerTrusted,
    SignerUntrusted,
    tag_of,
)

__all__ = [
    "ENVELOPE_FIELDS",
    "GENESIS_CHAIN",
    "SIGNER_TAGS",
    "Draft",
    "StoredEvent",
    "check_leaf",
    "envelope_of",
    "link_of",
    "validate_body",
]

GENESIS_CHAIN = bytes(32)
#: The envelope fields the store fills in for a Draft (a Draft may not set them).
ENVELOPE_FIELDS = ("stream", "stream_seq", "stream_prev", "at")
#: The types of the events that change the keyring.
SIGNER_TAGS = tuple(
    tag_of(c) for c in (SignerRegistered, SignerRetired, SignerTrusted, SignerUntrusted)
)


def link_of(leaf_hash: bytes) -> str:
    """How ``stream_prev`` names the previous event of a stream: ``sha256:<hex leaf hash>``."""
    return "sha256:" + leaf_hash.hex()


class Draft(NamedTuple):
    """An event whose stream envelope (stream_seq, stream_prev, at) the store fills in."""

    cls: type[EventBase]
    stream: str
    fields: dict[str, Any]


class _Envelope(msgspec.Struct):
    """The envelope of a body (type and stream fields); the rest is skipped when decoding."""

    type: str
    stream: str
    stream_seq: int
    stream_prev: str | None = None


_ENVELOPE: msgspec.json.Decoder[_Envelope] = msgspec.json.Decoder(_Envelope)


def envelope_of(seq: int, body: bytes) -> _Envelope:
    """The type and stream envelope of a checked body; VerificationError when it has none."""
    try:
        return _ENVELOPE.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise VerificationError(f"seq {seq}: body is not a known event: {exc}", seq=seq) from None


class StoredEvent(NamedTuple):
    """One row of the log, as stored."""

    seq: int
    body: bytes
    leaf_hash: bytes
    chain: bytes
    key_id: str
    sig: bytes

    def event(self) -> Event:
        """The decoded (upcast) body."""
        return codec.decode(self.body)


def check_leaf(seq: int, body: object, leaf: object) -> None:
    """The stored body must be a blob hashing to its stored leaf hash (RFC 9162 leaf)."""
    if type(body) is not bytes or type(leaf) is not bytes:
        raise ChainBrokenError(f"seq {seq}: body or leaf hash is not a blob", seq=seq)
    found = codec.leaf_hash(body)
    if found != leaf:
        raise ChainBrokenError(
            f"seq {seq}: body hashes to {link_of(found)}, stored leaf hash is {link_of(leaf)}",
            seq=seq,
        )


def validate_body(body: bytes) -> None:
    """Refuse a body that would not decode as its event (UsageError)."""
    # Struct construction does not check field types; decoding does. An event that
    # could not be decoded later must never be stored.
    try:
        codec.decode(body)
    except msgspec.ValidationError as exc:
        raise UsageError(f"event does not match its declared shape: {exc}") from None
