"""Every event type round-trips through canonical bytes pinned by a golden file; no floats."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from event_samples import INVOCATION, SAMPLES
from hypothesis import given
from hypothesis import strategies as st

from ledger.codec import canonical_json, decode, encode, format_time, leaf_hash
from ledger.errors import EncodingError
from ledger.events import EVENT_TYPES, Invocation, ScoreComputed, tag_of

GOLDEN = Path(__file__).parent / "golden" / "events.jsonl"
IDS = [tag_of(type(e)) for e in SAMPLES]


def test_there_is_one_sample_of_every_event_type() -> None:
    assert sorted(IDS) == sorted(tag_of(t) for t in EVENT_TYPES)


@pytest.mark.parametrize("event", SAMPLES, ids=IDS)
def test_round_trip(event: msgspec.Struct) -> None:
    body = encode(event)  # type: ignore[arg-type]
    assert decode(body) == event
    assert encode(decode(body)) == body


def test_golden_bytes() -> None:
    lines = GOLDEN.read_bytes().splitlines()
    assert len(lines) == len(SAMPLES)
    for line, event in zip(lines, SAMPLES, strict=True):
        assert encode(event) == line, f"{tag_of(type(event))}: run tools/regen_golden.py and review"
        assert decode(line) == event


def test_golden_rules_hold_on_the_pinned_bytes() -> None:
    for line in GOLDEN.read_bytes().splitlines():
        parsed = json.loads(line)
        # Sorted keys, no whitespace between tokens, raw UTF-8 (no \\u escapes), no floats.
        assert (
            line
            == json.dumps(
                parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode()
        )
        assert b"\\u" not in line
    prompt = json.loads(GOLDEN.read_bytes().splitlines()[5])["prompt"]
    assert prompt == "Schéma:\r\n  orders(id, region)\n问题: 每个地区的订单数?\t"  # verbatim


def test_leaf_hash_of_a_pinned_body() -> None:
    # RFC 9162 leaf hash, written out: SHA-256 of 0x00 followed by the body.
    import hashlib

    body = GOLDEN.read_bytes().splitlines()[-1]
    assert leaf_hash(body) == hashlib.sha256(bytes([0]) + body).digest()


def test_encoding_is_byte_identical_in_another_process() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from event_samples import SAMPLES\nfrom ledger.codec import encode\n"
        "print('\\n'.join(encode(e).hex() for e in SAMPLES))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        capture_output=True, text=True, check=True, env=env,
    ).stdout.split()  # fmt: skip
    assert out == [encode(e).hex() for e in SAMPLES]


def test_dict_insertion_order_does_not_matter() -> None:
    forward = {"a": "1", "b": "2", "zz": "3", "é": "4"}
    backward = dict(reversed(list(forward.items())))
    one = msgspec.structs.replace(INVOCATION, parameters=forward)
    two = msgspec.structs.replace(INVOCATION, parameters=backward)
    assert list(one.parameters) != list(two.parameters)
    assert canonical_json(one) == canonical_json(two)


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=12), st.randoms())
def test_any_parameter_dict_in_any_order_encodes_the_same(params: dict[str, str], rnd) -> None:  # type: ignore[no-untyped-def]
    items = list(params.items())
    rnd.shuffle(items)
    one = msgspec.structs.replace(INVOCATION, parameters=params)
    two = msgspec.structs.replace(INVOCATION, parameters=dict(items))
    assert canonical_json(one) == canonical_json(two)
    assert msgspec.json.decode(canonical_json(one), type=Invocation) == one


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), 0.5, 1.0])
def test_floats_are_refused(bad: float) -> None:
    with pytest.raises(EncodingError, match="floats are not allowed"):
        canonical_json({"x": [1, {"y": bad}]})
    score = next(e for e in SAMPLES if isinstance(e, ScoreComputed))
    with pytest.raises(EncodingError, match=r"float .* at \$\.precision"):
        encode(msgspec.structs.replace(score, precision=bad))  # type: ignore[arg-type]


def test_decimals_are_strings() -> None:
    assert canonical_json({"d": Decimal("12.40")}) == b'{"d":"12.40"}'


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "sNaN"])
def test_non_finite_decimals_are_refused(bad: str) -> None:
    with pytest.raises(EncodingError, match=r"non-finite decimal .* at \$\.x\[1\]\.y"):
        canonical_json({"x": [1, {"y": Decimal(bad)}]})
    score = next(e for e in SAMPLES if isinstance(e, ScoreComputed))
    with pytest.raises(EncodingError, match=r"at \$\.total"):
        encode(msgspec.structs.replace(score, total=Decimal(bad)))


def test_event_times_are_rfc3339_utc_with_microseconds() -> None:
    # Worked by hand: 10:00 at UTC+5 is 05:00 UTC; 5 microseconds are written as six digits.
    plus5 = dt.timezone(dt.timedelta(hours=5))
    assert format_time(dt.datetime(2026, 12, 2, 10, 0, 0, 5, tzinfo=plus5)) == (
        "2026-12-02T05:00:00.000005Z"
    )
    assert format_time(dt.datetime(999, 1, 2, tzinfo=dt.UTC)) == "999-01-02T00:00:00.000000Z"
    with pytest.raises(EncodingError, match="naive datetime"):
        format_time(dt.datetime(2026, 12, 2))


@given(
    st.datetimes(
        min_value=dt.datetime(2, 1, 1),
        max_value=dt.datetime(9998, 12, 31),  # a -7 h moment stays inside datetime's range
        timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-7))]),
    ),
)
def test_event_times_agree_with_strftime_for_any_moment(moment: dt.datetime) -> None:
    # format_time's fast path (isoformat) writes what strftime's pattern writes (issue 34).
    expected = moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert format_time(moment) == expected


# --- encode(keep=True): a stream's event is encoded once, the store takes the kept bytes


def _fresh(event: Any) -> Any:
    """``event`` with nothing kept for it (another test may have left bytes kept)."""
    encode(event)
    return event


def test_a_kept_body_is_given_once_to_the_next_encode_of_the_same_event() -> None:
    event = _fresh(SAMPLES[0])
    kept = encode(event, keep=True)
    assert encode(event) is kept  # the very bytes kept, not a second encoding
    assert encode(event) is not kept  # taken out on first use
    assert encode(event) == kept == GOLDEN.read_bytes().splitlines()[0]


def test_an_equal_event_that_is_another_object_is_encoded_afresh() -> None:
    event = _fresh(SAMPLES[1])
    kept = encode(event, keep=True)
    twin = msgspec.structs.replace(event)  # equal, not the same object
    assert twin == event
    assert twin is not event
    assert encode(twin) is not kept
    assert encode(twin) == kept
    assert encode(event) is kept  # still kept for the event itself


def test_the_kept_bytes_are_bounded_oldest_dropped_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger import codec

    three = [_fresh(e) for e in SAMPLES[:3]]
    sizes = [len(encode(e)) for e in three]
    # Room for the two newest of the three, not for all three.
    monkeypatch.setattr(codec, "_KEPT_MAX_BYTES", sizes[1] + sizes[2])
    kept = [encode(e, keep=True) for e in three]
    assert encode(three[0]) is not kept[0]  # dropped when the third came
    assert encode(three[1]) is kept[1]
    assert encode(three[2]) is kept[2]
    assert not any(id(e) in codec._KEPT for e in three)


@given(st.lists(st.tuples(st.integers(0, len(SAMPLES) - 1), st.booleans()), max_size=40))
def test_any_order_of_kept_and_plain_encodes_gives_the_golden_bytes(
    steps: list[tuple[int, bool]],
) -> None:
    golden = GOLDEN.read_bytes().splitlines()
    for index, keep in steps:
        assert encode(SAMPLES[index], keep=keep) == golden[index]
