"""The replay adapter: recorded outputs, line-numbered input errors, missing recordings."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.adapters import Failure, MissingRecording, Reply, Request, build_adapter
from ledger.adapters.replay import parse_replay
from ledger.errors import AdapterError, UsageError

CONTRACT = "sha256:" + "c" * 64

GOOD = (
    '{"case": "r01", "attempt": 1, "output": "{\\"sql\\": \\"SELECT 1\\"}", '
    '"usage": {"input": 900, "cache_read": 100, "output": 40, "reasoning_output": null}, '
    '"generation_ms": "1530.5", "model": "acme-large-2025-06", "request_id": "req-7"}\n'
    '{"case": "r01", "attempt": 3, "output": "second try", "generation_ms": 42}\n'
    "\n"
    '{"case": "r02", "attempt": 1, "error": {"kind": "timeout", "message": "no answer in 60 s"}}\n'
)


def replay(tmp_path: Path, text: str | bytes, **options: Any) -> Any:
    path = tmp_path / "outputs.jsonl"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return build_adapter("replay", {"replay_file": str(path), **options})


def ask(adapter: Any, case: str, attempt: int) -> Any:
    return adapter.call(Request(case_id=case, attempt=attempt, prompt="ignored"))


def test_recordings_become_replies_and_failures(tmp_path: Path) -> None:
    a = replay(tmp_path, GOOD)
    first = ask(a, "r01", 1)
    assert isinstance(first, Reply)
    assert first.raw_output == '{"sql": "SELECT 1"}'
    assert first.recorded_model == "acme-large-2025-06"
    assert first.resolved_model is None  # a recording's claim is never a resolved model id
    assert first.provider_request_id == "req-7"
    assert first.generation_us == 1_530_500
    assert first.usage is not None
    assert (first.usage.input, first.usage.cache_read, first.usage.cache_write) == (900, 100, None)
    assert (first.usage.output, first.usage.reasoning_output, first.usage.raw_json) == (
        40,
        None,
        None,
    )
    assert first.cost is None
    assert first.estimated_cost is None
    third = ask(a, "r01", 3)
    assert (third.raw_output, third.generation_us, third.usage) == ("second try", 42_000, None)
    failed = ask(a, "r02", 1)
    assert isinstance(failed, Failure)
    assert (failed.kind, failed.message) == ("timeout", "replayed from line 4: no answer in 60 s")
    assert failed.raw_output is None


def test_missing_recording(tmp_path: Path) -> None:
    a = replay(tmp_path, GOOD)
    missing = ask(a, "r01", 2)
    assert isinstance(missing, MissingRecording)
    path = tmp_path / "outputs.jsonl"
    assert missing.message == f"replay file {path} has no line for case 'r01' attempt 2"


def test_identity(tmp_path: Path) -> None:
    a = replay(tmp_path, GOOD, model="acme-large")
    data = (tmp_path / "outputs.jsonl").read_bytes()
    ident = a.identity
    assert ident.replay_file_sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
    assert ident.default_attempts == 3
    assert (ident.adapter_kind, ident.run_kind, ident.requested_model) == (
        "replay",
        "model",
        "acme-large",
    )
    assert (ident.timeout_ms, ident.provider, ident.auth_mode) == (0, None, None)
    inv = a.invocation(CONTRACT, 0)
    assert (inv.harness_kind, inv.wire_protocol, inv.tools) == (
        "caseledger-replay",
        "replay",
        "unknown",
    )
    assert inv.client_version == "caseledger/0.1.0 adapter-replay/1"


def test_estimated_cost_uses_the_recorded_model(tmp_path: Path) -> None:
    snap = tmp_path / "prices.json"
    snap.write_text(
        json.dumps(
            {
                "format": "caseledger-prices/1",
                "currency": "USD",
                "models": {
                    "acme-large-2025-06": {"input": "3", "cached_input": "0.3", "output": "15"}
                },
            }
        )
    )
    reply = ask(replay(tmp_path, GOOD, price_snapshot=str(snap)), "r01", 1)
    # 900 x 3 + 100 x 0.3 + 40 x 15 = 2700 + 30 + 600 = 3330 per million
    assert reply.estimated_cost == Decimal("0.00333")


def test_validate_cases_names_the_line(tmp_path: Path) -> None:
    a = replay(tmp_path, GOOD)
    a.validate_cases(["r01", "r02", "r03"])
    with pytest.raises(AdapterError) as exc:
        a.validate_cases(["r01"])
    path = tmp_path / "outputs.jsonl"
    assert (
        exc.value.message == f"replay file {path} line 4: unknown case id 'r02' (not in the bank)"
    )
    assert exc.value.exit_code == 2


BAD = [
    (
        '{"case": "r01", "attempt": 1, "output": "a"}\n{"case": "r02", "attempt": 1, \n',
        "line 2: invalid JSON: Expecting property name enclosed in double quotes (column 31)",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a", "score": 100}\n',
        "line 1: unknown field 'score' (allowed: case, attempt, output, usage, generation_ms,"
        " model, request_id, error)",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a"}\n'
        '{"case": "r02", "attempt": 1, "output": "b"}\n'
        '{"case": "r01", "attempt": 1, "output": "c"}\n',
        "line 3: duplicate recording for case 'r01' attempt 1 (first on line 1)",
    ),
    ('{"attempt": 1, "output": "a"}\n', "line 1: missing key 'case'"),
    ('{"case": "r01", "output": "a"}\n', "line 1: missing key 'attempt'"),
    ('{"case": "r01", "attempt": 1}\n', "line 1: missing key 'output'"),
    (
        '{"case": "r01", "attempt": "1", "output": "a"}\n',
        "line 1: 'attempt' must be an integer >= 1, got '1'",
    ),
    (
        '{"case": "r01", "attempt": 0, "output": "a"}\n',
        "line 1: 'attempt' must be an integer >= 1, got 0",
    ),
    ('{"case": 7, "attempt": 1, "output": "a"}\n', "line 1: 'case' must be a string, got int"),
    (
        '{"case": "r01", "attempt": 1, "output": ["a"]}\n',
        "line 1: 'output' must be a string, got list",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a", "generation_ms": 1.5}\n',
        "line 1: 'generation_ms' must be an integer or a decimal string, got Decimal('1.5')",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a", "generation_ms": "0.0001"}\n',
        "line 1: 'generation_ms' must be >= 0 with at most 3 decimals, got '0.0001'",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a", "usage": {"prompt_tokens": 5}}\n',
        "line 1: usage has unknown field 'prompt_tokens' (allowed: input, cache_read,"
        " cache_write, output, reasoning_output)",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a", "usage": {"input": -1}}\n',
        "line 1: usage.input must be a non-negative integer or null, got -1",
    ),
    (
        '{"case": "r01", "attempt": 1, "error": {"kind": "timeout"}}\n',
        "line 1: 'error.message' must be a non-empty string",
    ),
    (
        '{"case": "r01", "attempt": 1, "output": "a", "case": "r02"}\n',
        "line 1: duplicate key 'case'",
    ),
    (
        '{"case": "r01", "attempt": 1, "error": {"kind": "time_out", "message": "m"}}\n',
        "line 1: unknown error kind 'time_out' (allowed: timeout, rate_limited, server_error,"
        " bad_request, auth, policy_refusal, connection_error, malformed_response,"
        " command_failed, tool_use)",
    ),
    ("[1, 2]\n", "line 1: not a JSON object"),
    ('{"case": "r01", "attempt": 1, "output": NaN}\n', "line 1: non-finite number NaN"),
    ("\n\n", "holds no recordings"),
]


@pytest.mark.parametrize(
    ("text", "message"),
    BAD,
    ids=[
        "invalid-json-line-2",
        "unknown-field",
        "duplicate",
        "no-case",
        "no-attempt",
        "no-output",
        "attempt-string",
        "attempt-zero",
        "case-int",
        "output-list",
        "generation-float",
        "generation-sub-us",
        "usage-unknown",
        "usage-negative",
        "error-no-message",
        "error-kind",
        "duplicate-key",
        "array",
        "nan",
        "empty",
    ],
)
def test_bad_replay_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "outputs.jsonl"
    with pytest.raises(AdapterError) as exc:
        replay(tmp_path, text)
    assert exc.value.message == f"replay file {path} {message}"
    assert exc.value.exit_code == 2


def test_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(AdapterError) as exc:
        replay(tmp_path, b'{"case": "r\xff"}\n')
    assert exc.value.message.endswith(": not UTF-8 (byte offset 11)")


def test_missing_file_and_foreign_option(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        build_adapter("replay", {"replay_file": str(tmp_path / "nope.jsonl")})
    assert exc.value.message == (
        f"cannot read replay file {tmp_path / 'nope.jsonl'}: No such file or directory"
    )
    with pytest.raises(UsageError) as exc:
        build_adapter("replay", {"replay_file": "x.jsonl", "base_url": "http://h"})
    assert exc.value.message == ("the replay adapter does not take --base-url (option 'base_url')")
    with pytest.raises(UsageError) as exc:
        build_adapter("replay", {})
    assert exc.value.message == "the replay adapter needs --replay-file"


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=5), st.integers(1, 9), st.text(max_size=40)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: (t[0], t[1]),
    )
)
def test_any_output_round_trips_verbatim(rows: list[tuple[str, int, str]]) -> None:
    # Outputs hold any text, line separators included; only "\n" separates lines.
    text = "".join(
        json.dumps({"case": c, "attempt": n, "output": o}, ensure_ascii=False) + "\n"
        for c, n, o in rows
    )
    recordings = parse_replay(text.encode("utf-8"), "f.jsonl")
    assert {k: r.output for k, r in recordings.items()} == {(c, n): o for c, n, o in rows}
