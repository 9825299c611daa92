"""Canonical bytes of an event and their hashes.

Canonical bytes are msgspec JSON with sorted keys, UTF-8, no insignificant
whitespace; Decimals are strings; there are no floats (a float anywhere, NaN
and Infinity included, is refused: msgspec would silently write NaN as null).
The bytes that are hashed and signed are the bytes stored; verification
hashes the stored bytes and never re-encodes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import threading
from decimal import Decimal
from typing import Any

import msgspec

from ledger.errors import EncodingError
from ledger.events import UPCASTERS, Event, EventBase

__all__ = [
    "canonical_json",
    "chain_hash",
    "decode",
    "digest",
    "encode",
    "format_time",
    "leaf_hash",
    "sha256_hex",
]

_ENCODER = msgspec.json.Encoder(order="sorted", decimal_format="string")
_DECODER: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
_RAW_DECODER = msgspec.json.Decoder()
_CURRENT_TAGS = frozenset(str(t.__struct_config__.tag) for t in Event.__args__)


def _refuse_floats(value: Any) -> None:
    # Iterative walk of the builtins form (dicts, lists, str, int, bool, None, float,
    # Decimal); the path is only worked out once something is refused.
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float or (kind is Decimal and not item.is_finite()):
            path, bad = _find_refused(value, "$")
            what = "float" if isinstance(bad, float) else "non-finite decimal"
            raise EncodingError(
                f"{what} {bad!r} at {path}: floats are not allowed in hashed bytes, nor are "
                "non-finite decimals",
                hint="use integer microseconds, a finite Decimal, or a decimal string",
            )


def _find_refused(value: Any, path: str) -> tuple[str, Any]:
    if isinstance(value, float) or (isinstance(value, Decimal) and not value.is_finite()):
        return path, value
    if isinstance(value, dict):
        children = [(f"{path}.{k}", v) for k, v in value.items()]
    elif isinstance(value, list):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        return "", None
    for child_path, child in children:
        found = _find_refused(child, child_path)
        if found[0]:
            return found
    return "", None


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes of any msgspec-encodable value (sorted keys, no floats).

    >>> canonical_json({"b": 1, "a": [True, None, "x"]})
    b'{"a":[true,null,"x"],"b":1}'
    """
    builtins = msgspec.to_builtins(value, order="sorted", builtin_types=(Decimal,))
    _refuse_floats(builtins)
    return _ENCODER.encode(builtins)


# The bodies of events encoded with ``keep=True`` and not yet encoded again: a run's
# stream encodes each event it makes (its link goes into the next event), and the store
# encodes it once more to append it; the second encode takes the kept bytes instead of
# encoding the same frozen event again (issue 34: a 1,000-attempt run encoded 6,000 events
# twice). The entry is keyed by the event's identity and holds the event itself, so the id
# cannot be reused while it is kept; it is taken out on first use. At most
# _KEPT_MAX_BYTES are kept, oldest dropped first: an event made and never appended (a
# batch rolled back) only costs a later re-encode, never a wrong body.
_KEPT: dict[int, tuple[EventBase, bytes]] = {}
_KEPT_MAX_BYTES = 32 << 20
_kept_bytes = 0
_KEPT_LOCK = threading.Lock()


def encode(event: EventBase, *, keep: bool = False) -> bytes:
    """Canonical bytes of an event body. Raises EncodingError on any float.

    ``keep``: remember the bytes for the next ``encode`` of this same event object (the
    store's), which then returns them without encoding again.

    >>> from ledger.events import RunFinished
    >>> ev = RunFinished(stream="r", stream_seq=0, stream_prev=None, at="t", status="completed")
    >>> encode(ev, keep=True) is encode(ev)
    True
    >>> encode(ev) is encode(ev)
    False
    """
    global _kept_bytes
    if not isinstance(event, EventBase):
        raise EncodingError(f"not an event: {type(event).__name__}")
    if _KEPT:
        with _KEPT_LOCK:
            kept = _KEPT.pop(id(event), None)
            if kept is not None:
                _kept_bytes -= len(kept[1])
        if kept is not None and kept[0] is event:
            return kept[1]
    body = canonical_json(event)
    if keep and len(body) <= _KEPT_MAX_BYTES:
        with _KEPT_LOCK:
            while _KEPT and _kept_bytes + len(body) > _KEPT_MAX_BYTES:
                _kept_bytes -= len(_KEPT.pop(next(iter(_KEPT)))[1])
            _KEPT[id(event)] = (event, body)
            _kept_bytes += len(body)
    return body


def decode(body: bytes) -> Event:
    """Decode stored bytes to the current event shape, upcasting old versions."""
    try:
        return _DECODER.decode(body)
    except msgspec.ValidationError:
        raw = _RAW_DECODER.decode(body)
        if not isinstance(raw, dict) or raw.get("type") not in UPCASTERS:
            raise
        while raw.get("type") not in _CURRENT_TAGS:
            upcast = UPCASTERS.get(raw.get("type", ""))
            if upcast is None:
                raise
            raw = upcast(raw)
        event: Event = msgspec.convert(raw, Event)
        return event


def leaf_hash(body: bytes) -> bytes:
    """RFC 9162 leaf hash: SHA-256(0x00 || body)."""
    return hashlib.sha256(b"\x00" + body).digest()


def chain_hash(prev_chain: bytes, leaf: bytes) -> bytes:
    """The log's hash chain: SHA-256(previous chain || leaf hash); 32 zero bytes before seq 0."""
    return hashlib.sha256(prev_chain + leaf).digest()


def sha256_hex(data: bytes) -> str:
    """``sha256:<hex>`` of some bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of a value.

    >>> digest([1, "a"])[:15]
    'sha256:20109453'
    """
    return sha256_hex(canonical_json(value))


def format_time(moment: _dt.datetime) -> str:
    """RFC 3339 UTC with microseconds, e.g. ``2026-12-02T10:00:00.000000Z``.

    >>> format_time(_dt.datetime(2026, 12, 2, 10, tzinfo=_dt.UTC))
    '2026-12-02T10:00:00.000000Z'
    """
    if moment.tzinfo is None:
        raise EncodingError("naive datetime: times in events must be timezone-aware")
    moment = moment.astimezone(_dt.UTC)
    if moment.year >= 1000:  # isoformat's year is strftime's %Y here, and it is faster
        return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
