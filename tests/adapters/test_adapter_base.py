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
    assert exc.value.hint == "use one of: command, openai, reference, replay"


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
    assert exc.value.hint == "the replay adapter takes: --replay-file, --model, --price-snapshot"
