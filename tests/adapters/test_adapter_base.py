"""build_adapter: kinds, option handling and the Adapter protocol."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ledger.adapters import Adapter, build_adapter
from ledger.errors import UsageError


def test_unknown_kind() -> None:
    with pytest.raises(UsageError) as exc:
        build_adapter("anthropic", {})
    assert exc.value.message == "unknown adapter kind 'anthropic'"
    assert exc.value.hint == "use one of: command, openai, pi, reference, replay"


def test_runner_options_and_unset_options_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"case": "a", "attempt": 2, "output": "x"}\n')
    options = {
        "replay_file": str(path),
        "attempts": 5,
        "profile": "p",
        "run_id": "run-1",
        "concurrency": 2,
        "retries": 0,
        "resume": False,
        "base_url": None,
        "temperature": None,
        "command": (),
    }
    adapter = build_adapter("replay", options)
    assert isinstance(adapter, Adapter)
    assert adapter.identity.default_attempts == 2


def test_every_kind_satisfies_the_protocol(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"case": "a", "attempt": 1, "output": "x"}\n')
    built = [
        build_adapter("replay", {"replay_file": str(path)}),
        build_adapter("reference", {}, cases={"a": "SELECT 1"}),
        build_adapter("command", {"command": [sys.executable, "-c", "print(1)"]}),
        build_adapter("openai", {"base_url": "http://127.0.0.1:9", "model": "m", "auth": "none"}),
    ]
    for adapter in built:
        assert isinstance(adapter, Adapter)
        adapter.close()


def test_unknown_option_lists_what_the_adapter_takes() -> None:
    with pytest.raises(UsageError) as exc:
        build_adapter("replay", {"replay_file": "x", "timeout_s": 3})
    assert exc.value.message == "the replay adapter does not take --timeout (option 'timeout_s')"
    assert exc.value.hint == (
        "the replay adapter takes: --replay-file, --replay-format, --model, --price-snapshot, "
        "--tools"
    )


def test_replies_and_failures_fit_the_events(tmp_path: Path) -> None:
    """Every Reply / Failure field maps 1:1 onto ModelResponded / ProviderFailed and encodes."""
    import msgspec

    from ledger import codec, events
    from ledger.adapters import Failure, Reply, Request

    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"case": "a", "attempt": 1, "output": "x", "usage": {"input": 3}, "generation_ms": 7,'
        ' "model": "m-1"}\n'
        '{"case": "a", "attempt": 2, "error": {"kind": "timeout", "message": "slow"}}\n'
    )
    adapter = build_adapter("replay", {"replay_file": str(path)})
    inv = adapter.invocation("sha256:" + "c" * 64, 0)
    envelope = {
        "stream": "run-1",
        "stream_seq": 1,
        "stream_prev": None,
        "at": "2026-01-01T00:00:00.000000Z",
    }
    reply = adapter.call(Request(case_id="a", attempt=1, prompt="p"))
    assert isinstance(reply, Reply)
    fields = msgspec.structs.asdict(reply)
    # How the runner parses the output (imported: a benchmark's plain SQL), not an event field.
    assert fields.pop("imported") is False
    responded = events.ModelResponded(**envelope, case_id="a", attempt=1, invocation=inv, **fields)
    body = codec.encode(responded)
    assert codec.decode(body) == responded
    failure = adapter.call(Request(case_id="a", attempt=2, prompt="p"))
    assert isinstance(failure, Failure)
    failed = events.ProviderFailed(
        **envelope, case_id="a", attempt=2, invocation=inv, **msgspec.structs.asdict(failure)
    )
    assert codec.decode(codec.encode(failed)) == failed
