"""Price snapshots: loading, digest and hand-worked estimates."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chatserver import ChatServer, json_answer

from ledger.adapters import Failure, Reply, Request, build_adapter
from ledger.adapters.pricing import bill, cost_of, load_snapshot
from ledger.errors import AdapterError, UsageError
from ledger.events import Usage

SNAPSHOT = {
    "format": "caseledger-prices/1",
    "currency": "USD",
    "as_of": "2026-01-15",
    "source": "https://example.com/pricing",
    "models": {
        "big": {"input": "3.00", "cached_input": "0.30", "cache_write": "3.75", "output": "15.00"},
        "small": {"input": "0.15", "output": "0.60"},
    },
}


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_digest_is_of_the_file_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, SNAPSHOT)
    snap = load_snapshot(path)
    assert snap.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert snap.currency == "USD"


@pytest.mark.parametrize(
    ("model", "usage", "expected"),
    [
        # 12000 x 3 + 8000 x 0.30 + 2000 x 3.75 + 1500 x 15 = 36000 + 2400 + 7500 + 22500
        ("big", Usage(input=12000, cache_read=8000, cache_write=2000, output=1500), "0.0684"),
        # reasoning is part of output: not added again. 1000 x 3 + 500 x 15 = 10500
        ("big", Usage(input=1000, output=500, reasoning_output=400), "0.0105"),
        # 1 x 0.15 + 1 x 0.60 = 0.75 per million
        ("small", Usage(input=1, cache_read=0, output=1), "7.5E-7"),
        # a cache count without its price: no estimate
        ("small", Usage(input=10, cache_read=5, output=1), None),
        ("small", Usage(input=None, output=1), None),
        ("small", Usage(input=1, output=None), None),
        ("unknown", Usage(input=1, output=1), None),
        (None, Usage(input=1, output=1), None),
    ],
    ids=[
        "all-four",
        "reasoning",
        "tiny",
        "no-cached-price",
        "no-input",
        "no-output",
        "unknown",
        "no-model",
    ],
)
def test_estimate(tmp_path: Path, model: str | None, usage: Usage, expected: str | None) -> None:
    snap = load_snapshot(write(tmp_path, SNAPSHOT))
    got = snap.estimate(usage, model)
    assert got == (Decimal(expected) if expected is not None else None)


def test_no_usage_no_estimate(tmp_path: Path) -> None:
    assert load_snapshot(write(tmp_path, SNAPSHOT)).estimate(None, "big") is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "v0"}, "format must be 'caseledger-prices/1', got 'v0'"),
        ({"currency": ""}, "currency must be a non-empty string"),
        ({"models": {}}, "models must be a non-empty object"),
        ({"extra": 1}, "unknown field 'extra'"),
        (
            {"models": {"m": {"input": 0.15, "output": "1"}}},
            "models.m.input must be a decimal string, got 0.15",
        ),
        (
            {"models": {"m": {"input": "x", "output": "1"}}},
            "models.m.input is not a decimal number: 'x'",
        ),
        (
            {"models": {"m": {"input": "-1", "output": "1"}}},
            "models.m.input must be a finite, non-negative number: '-1'",
        ),
        ({"models": {"m": {"input": "1"}}}, "models.m needs 'output'"),
        (
            {"models": {"m": {"input": "1", "output": "1", "batch": "1"}}},
            "models.m: unknown field 'batch'",
        ),
    ],
    ids=[
        "format",
        "currency",
        "no-models",
        "extra",
        "float",
        "not-decimal",
        "negative",
        "no-output",
        "unknown-price",
    ],
)
def test_bad_snapshot(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = write(tmp_path, {**SNAPSHOT, **change})
    with pytest.raises(AdapterError) as exc:
        load_snapshot(path)
    assert exc.value.message == f"price snapshot {path}: {message}"


def test_unreadable_and_not_json(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        load_snapshot(tmp_path / "none.json")
    assert (
        exc.value.message
        == f"cannot read price snapshot {tmp_path / 'none.json'}: No such file or directory"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(AdapterError) as err:
        load_snapshot(bad)
    assert err.value.message.startswith(f"price snapshot {bad} is not valid JSON: ")


def test_requested_model_must_be_priced(tmp_path: Path) -> None:
    from ledger.adapters import build_adapter

    path = write(tmp_path, SNAPSHOT)
    with pytest.raises(UsageError) as exc:
        build_adapter(
            "openai",
            {
                "base_url": "http://127.0.0.1:9/v1",
                "model": "bgi",
                "auth": "none",
                "price_snapshot": str(path),
            },
        )
    assert exc.value.message == f"price snapshot {path} has no prices for model 'bgi'"
    assert exc.value.hint == "it has: big, small"


# ------------------------------------------------------------- the one cost rule
#
# How the three adapters disagreed before cost_of (each case below pins the fix):
# D1 a bill written as a decimal string ("0.0031"): the command adapter billed it, the
#    openai adapter ignored it and labelled a snapshot estimate instead;
# D2 a bill that is there but unusable (negative, not a number): the command adapter made
#    the attempt malformed_response, the openai adapter silently replaced it by an estimate;
# D3 a bill as a JSON integer: the openai adapter billed it, the command adapter refused it;
# D4 a bill too large to sum (1e999999999): both took it, and every report sum then
#    raised decimal.Overflow.
# Usage below: 200 input, 1000 cached, 300 output; at the "big" prices 3.00 / 0.30 / 15.00
# per million the estimate is (600 + 300 + 4500) / 1,000,000 = 0.0054.

USAGE = Usage(input=200, cache_read=1000, output=300)
ESTIMATE = Decimal("0.0054")


@pytest.mark.parametrize(
    ("billed", "auth", "snapshot", "expected"),
    [
        (None, "api_key", True, (None, ESTIMATE)),
        (None, None, True, (None, ESTIMATE)),  # command adapter without --auth
        (Decimal("0.0031"), "api_key", True, (Decimal("0.0031"), None)),
        (Decimal(0), "none", True, (Decimal(0), None)),  # a zero bill is a bill
        (Decimal("0.0031"), "oauth", True, (None, None)),
        (None, "oauth", True, (None, None)),
        (None, "api_key", False, (None, None)),
        (Decimal("0.0031"), "api_key", False, (Decimal("0.0031"), None)),
    ],
    ids=["estimate", "no-auth", "bill", "zero-bill", "oauth-bill", "oauth", "nothing", "bill-only"],
)
def test_cost_of(
    tmp_path: Path,
    billed: Decimal | None,
    auth: str | None,
    snapshot: bool,
    expected: tuple[Decimal | None, Decimal | None],
) -> None:
    snap = load_snapshot(write(tmp_path, SNAPSHOT)) if snapshot else None
    got = cost_of(USAGE, snap, billed, model="big", auth_mode=auth)
    assert (got.cost, got.estimated_cost) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("0.0031", Decimal("0.0031")),
        (" 0.0031 ", Decimal("0.0031")),
        (2, Decimal(2)),
        (Decimal("0.00012"), Decimal("0.00012")),
        ("0", Decimal(0)),
    ],
)
def test_bill_accepts(value: object, expected: Decimal | None) -> None:
    assert bill(value) == expected


@pytest.mark.parametrize(
    "value",
    [Decimal("-0.01"), "-1", "abc", "NaN", "Infinity", True, 0.5, [], "1e999999999", "1e-31"],
)
def test_bill_refuses(value: object) -> None:
    with pytest.raises(ValueError, match=r"^cost must be a non-negative decimal number") as exc:
        bill(value)
    assert str(exc.value) == f"cost must be a non-negative decimal number, got {value!r}"


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def _openai_reply(tmp_path: Path, provider: ChatServer, cost: str) -> Any:
    usage = (
        '{"prompt_tokens": 1200, "completion_tokens": 300,'
        ' "prompt_tokens_details": {"cached_tokens": 1000}' + (f', "cost": {cost}' if cost else "")
    ) + "}"
    provider.reply(
        json_answer(
            '{"model": "big", "choices": [{"message": {"content": "ANSWER"}}], "usage": '
            + usage
            + "}"
        )
    )
    adapter = build_adapter(
        "openai",
        {
            "base_url": provider.url,
            "model": "big",
            "auth": "none",
            "price_snapshot": str(write(tmp_path, SNAPSHOT)),
        },
        environ={},
    )
    return adapter.call(Request(case_id="c1", attempt=1, prompt="q"))


def _command_reply(tmp_path: Path, usage: dict[str, Any]) -> Any:
    script = tmp_path / "model.py"
    script.write_text(
        "import json, os\n"
        f"json.dump({usage!r}, open(os.environ['CASELEDGER_USAGE_FILE'], 'w'))\n"
        "print('ANSWER')\n"
    )
    adapter = build_adapter(
        "command",
        {
            "command": [sys.executable, str(script)],
            "model": "big",
            "price_snapshot": str(write(tmp_path, SNAPSHOT)),
        },
        environ={"PATH": os.environ["PATH"]},
    )
    try:
        return adapter.call(Request(case_id="c1", attempt=1, prompt="q"))
    finally:
        adapter.close()


COUNTS = {"input": 200, "cache_read": 1000, "output": 300}


def test_no_bill_both_estimate(tmp_path: Path, provider: ChatServer) -> None:
    for reply in (_openai_reply(tmp_path, provider, ""), _command_reply(tmp_path, COUNTS)):
        assert isinstance(reply, Reply)
        assert (reply.cost, reply.estimated_cost) == (None, ESTIMATE)


def test_d1_a_string_bill_is_a_bill_in_both(tmp_path: Path, provider: ChatServer) -> None:
    openai = _openai_reply(tmp_path, provider, '"0.0031"')
    command = _command_reply(tmp_path, {**COUNTS, "cost": "0.0031"})
    for reply in (openai, command):
        assert isinstance(reply, Reply)
        assert (reply.cost, reply.estimated_cost) == (Decimal("0.0031"), None)


def test_d3_an_integer_bill_is_a_bill_in_both(tmp_path: Path, provider: ChatServer) -> None:
    openai = _openai_reply(tmp_path, provider, "2")
    command = _command_reply(tmp_path, {**COUNTS, "cost": 2})
    for reply in (openai, command):
        assert isinstance(reply, Reply)
        assert (reply.cost, reply.estimated_cost) == (Decimal(2), None)


@pytest.mark.parametrize(
    ("wire", "file_value", "shown"),
    [
        ("-0.01", "-0.01", ("Decimal('-0.01')", "'-0.01'")),
        ('"abc"', "abc", ("'abc'", "'abc'")),
        ("1e999999999", "1e999999999", ("Decimal('1E+999999999')", "'1e999999999'")),
    ],
    ids=["negative", "not-a-number", "too-large"],
)
def test_d2_d4_an_unusable_bill_is_malformed_in_both(
    tmp_path: Path, provider: ChatServer, wire: str, file_value: str, shown: tuple[str, str]
) -> None:
    openai = _openai_reply(tmp_path, provider, wire)
    assert isinstance(openai, Failure)
    assert openai.kind == "malformed_response"
    assert openai.message == f"usage.cost must be a non-negative decimal number, got {shown[0]}"
    assert openai.raw_output == "ANSWER"  # the answer is kept, never replaced by an estimate
    command = _command_reply(tmp_path, {**COUNTS, "cost": file_value})
    assert isinstance(command, Failure)
    assert command.kind == "malformed_response"
    assert command.message == (
        "usage file (CASELEDGER_USAGE_FILE): cost must be a non-negative decimal number, "
        f"got {shown[1]}"
    )


def test_replay_has_no_bill_only_an_estimate(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    recording.write_text(
        json.dumps(
            {"case": "c1", "attempt": 1, "output": "ANSWER", "usage": COUNTS, "model": "big"}
        )
        + "\n"
    )
    adapter = build_adapter(
        "replay",
        {"replay_file": str(recording), "price_snapshot": str(write(tmp_path, SNAPSHOT))},
    )
    reply = adapter.call(Request(case_id="c1", attempt=1, prompt="q"))
    assert isinstance(reply, Reply)
    assert (reply.cost, reply.estimated_cost) == (None, ESTIMATE)
