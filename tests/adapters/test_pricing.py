"""Price snapshots: loading, digest and hand-worked estimates."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ledger.adapters.pricing import load_snapshot
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
