"""Reading an event stored under an old tag (issue 14 item 6): the upcasters of
ledger.events.UPCASTERS are applied on read until the tag is a current one. Every shape
is v1 today, so the register is empty; these tests register made-up old versions of
signer.retired for one test each, the way a real v2 would register its v1."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest

from ledger import codec
from ledger.errors import EncodingError
from ledger.events import UPCASTERS, SignerRetired

ENVELOPE = '"at":"2026-12-02T10:00:00.000000Z","stream":"ledger","stream_prev":null,"stream_seq":3'


def v0_to_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """signer.retired.v0 called the key's name ``signer`` and had no reason."""
    out = {k: v for k, v in raw.items() if k != "signer"}
    return {**out, "name": raw["signer"], "type": "signer.retired.v1"}


def older_to_v0(raw: dict[str, Any]) -> dict[str, Any]:
    """signer.retired.vold called the time ``when``."""
    out = {k: v for k, v in raw.items() if k != "when"}
    return {**out, "retired_at": raw["when"], "type": "signer.retired.v0"}


V0 = (
    "{" + ENVELOPE + ',"key_id":"0a1b2c3d","retired_at":"2026-12-02T11:00:00.000000Z",'
    '"signer":"bot","type":"signer.retired.v0"}'
).encode()
EXPECTED = SignerRetired(
    stream="ledger",
    stream_seq=3,
    stream_prev=None,
    at="2026-12-02T10:00:00.000000Z",
    key_id="0a1b2c3d",
    name="bot",
    retired_at="2026-12-02T11:00:00.000000Z",
)


def test_an_old_tag_is_upcast_to_the_current_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(UPCASTERS, "signer.retired.v0", v0_to_v1)
    assert codec.decode(V0) == EXPECTED


def test_upcasters_chain_until_a_current_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(UPCASTERS, "signer.retired.v0", v0_to_v1)
    monkeypatch.setitem(UPCASTERS, "signer.retired.vold", older_to_v0)
    older = V0.replace(b'"retired_at"', b'"when"').replace(b".v0", b".vold")
    assert codec.decode(older) == EXPECTED


def test_a_chain_that_ends_on_an_unknown_tag_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # vold upcasts to v0, but nothing upcasts v0: the body is no known event.
    monkeypatch.setitem(UPCASTERS, "signer.retired.vold", older_to_v0)
    older = V0.replace(b'"retired_at"', b'"when"').replace(b".v0", b".vold")
    with pytest.raises(msgspec.ValidationError):
        codec.decode(older)


def test_an_unknown_tag_without_an_upcaster_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        codec.decode(V0)
    with pytest.raises(msgspec.ValidationError):
        codec.decode(b"[1, 2]")  # not even a mapping


def test_only_events_are_encoded_and_only_aware_times_formatted() -> None:
    with pytest.raises(EncodingError) as info:
        codec.encode({"type": "signer.retired.v1"})  # type: ignore[arg-type]
    assert info.value.message == "not an event: dict"
    with pytest.raises(EncodingError) as info:
        codec.format_time(dt.datetime(2026, 12, 2, 10, 0))
    assert info.value.message == "naive datetime: times in events must be timezone-aware"
    # an aware time in another zone is written in UTC: 18:00 at +08:00 is 10:00 Z
    shanghai = dt.timezone(dt.timedelta(hours=8))
    assert codec.format_time(dt.datetime(2026, 12, 2, 18, 0, tzinfo=shanghai)) == (
        "2026-12-02T10:00:00.000000Z"
    )
