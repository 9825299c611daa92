"""The pi adapter: the real pi CLI against a fake OpenAI-compatible model on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chatserver import Answer, ChatServer, json_answer, sse_answer
from pikit import KEY, KEY_ENV, chunks, models_json

from ledger.adapters import Failure, Reply, Request, build_adapter
from ledger.adapters import pi as pi_mod
from ledger.errors import AdapterError, UsageError

PROMPT = "  Question: how many orders?\nAnswer in query-plan-v1 JSON.\n"
CONTRACT = "sha256:" + "c" * 64
ENV = {"PATH": os.environ["PATH"], KEY_ENV: KEY}


def adapter(pi: str, server: ChatServer, tmp_path: Path, **options: Any) -> Any:
    opts: dict[str, Any] = {
        "pi": pi,
        "provider": "fake",
        "model": "model-a",
        "api_key_env": KEY_ENV,
        "pi_models": str(models_json(server, tmp_path / "models.json")),
        "timeout_s": 60,
    }
    opts.update(options)
    return build_adapter("pi", {k: v for k, v in opts.items() if v is not None}, environ=ENV)


def call(a: Any, prompt: str = PROMPT) -> Reply | Failure:
    try:
        return a.call(Request(case_id="c1", attempt=1, prompt=prompt))
    finally:
        a.close()


def test_one_plain_turn_with_the_prompt_verbatim_and_no_tools(pi_path, fake_model, tmp_path):
    a = adapter(pi_path, fake_model, tmp_path, temperature="0.2", max_tokens=512)
    reply = call(a)
    assert isinstance(reply, Reply)
    assert reply.raw_output == "hello"
    assert reply.resolved_model is None  # pi names only the requested model
    assert reply.provider_request_id == "chatcmpl-fake-1"
    assert reply.generation_us is not None
    assert reply.generation_us > 0
    (received,) = fake_model.received
    assert received.path == "/v1/chat/completions"
    request = received.json()
    assert request["model"] == "model-a"
    assert "tools" not in request
    assert "tool_choice" not in request
    assert request["messages"] == [
        {"role": "system", "content": "Follow the instructions in the user's message exactly."},
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
    ]
    assert request["temperature"] == 0.2
    assert request["max_completion_tokens"] == 512
    headers = received.headers
    assert headers["authorization"] == "Bearer " + KEY
    assert headers["x-stainless-retry-count"] == "0"


def test_identity_and_invocation(pi_path, fake_model, tmp_path):
    a = adapter(
        pi_path,
        fake_model,
        tmp_path,
        temperature="0.2",
        max_tokens=512,
        reasoning_effort="low",
        timeout_s="7.5",
        system_prompt="Answer.",
    )
    a.close()
    ident = a.identity
    want_digest = "sha256:" + hashlib.sha256(b"Answer.").hexdigest()
    assert (ident.adapter_kind, ident.run_kind, ident.harness_kind) == ("pi", "model", "pi")
    assert (ident.provider, ident.requested_model, ident.auth_mode) == (
        "fake",
        "model-a",
        "api_key",
    )
    assert ident.timeout_ms == 7500
    assert ident.bridge_version == "caseledger-pi-bridge/1"
    assert ident.policy_version == "caseledger-pi-policy/1"
    assert ident.system_prompt_digest == want_digest
    assert ident.params.temperature == Decimal("0.2")
    assert ident.params.max_tokens == 512
    assert ident.params.reasoning_effort == "low"
    inv = a.invocation(CONTRACT, 0)
    assert inv.harness_kind == "pi"
    assert (inv.response_mode, inv.single_call, inv.tools, inv.retries) == ("text", True, "off", 0)
    assert inv.prompt_contract_digest == CONTRACT
    assert inv.system_prompt_digest == want_digest
    assert inv.wire_protocol == "pi-json-event-stream"
    assert inv.client_version.endswith(" adapter-pi/1 pi/0.73.1")
    assert (inv.bridge_version, inv.policy_version) == (
        "caseledger-pi-bridge/1",
        "caseledger-pi-policy/1",
    )
    assert (inv.provider, inv.auth_mode, inv.model) == ("fake", "api_key", "model-a")
    assert inv.parameters == {"temperature": "0.2", "max_tokens": "512", "reasoning_effort": "low"}


# prompt 1200 tokens of which 1000 "cached" and 100 written to the cache; 300 output
# tokens of which 120 reasoning. pi's rules (by hand): cacheRead = 1000 - 100 = 900
# (OpenAI-style providers count the written tokens among cached_tokens), cacheWrite =
# 100, input = 1200 - 900 - 100 = 200 (already without cached tokens: nothing is
# subtracted again), output = 300 (reasoning inside it). Total = 200 + 900 + 100 + 300
# = 1500, never 1500 + 120.
USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 100},
    "completion_tokens_details": {"reasoning_tokens": 120},
}
PRICES = {
    "format": "caseledger-prices/1",
    "currency": "USD",
    "models": {
        "model-a": {
            "input": "2.00",
            "cached_input": "0.50",
            "cache_write": "2.50",
            "output": "8.00",
        }
    },
}


def test_usage_with_cache_reads_and_reasoning(pi_path, fake_model, tmp_path):
    fake_model.reply(sse_answer(chunks("hi", usage=USAGE)))
    snapshot = tmp_path / "prices.json"
    snapshot.write_text(json.dumps(PRICES))
    reply = call(adapter(pi_path, fake_model, tmp_path, price_snapshot=str(snapshot)))
    assert isinstance(reply, Reply)
    u = reply.usage
    assert u is not None
    assert (u.input, u.cache_read, u.cache_write, u.output) == (200, 900, 100, 300)
    assert u.reasoning_output is None  # pi does not report it
    assert u.input + u.cache_read + u.cache_write + u.output == 1500
    # pi's own usage object, as pi wrote it (all integers: canonical JSON).
    assert json.loads(u.raw_json or "") == {
        "input": 200,
        "output": 300,
        "cacheRead": 900,
        "cacheWrite": 100,
        "totalTokens": 1500,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    # (200 x 2.00 + 900 x 0.50 + 100 x 2.50 + 300 x 8.00) / 1e6 = 3500 / 1e6
    assert reply.cost is None
    assert reply.estimated_cost == Decimal("0.0035")


def test_pi_catalog_cost_is_not_a_bill(pi_path, fake_model, tmp_path):
    fake_model.reply(sse_answer(chunks("hi", usage=USAGE)))
    models = models_json(
        fake_model,
        tmp_path / "priced.json",
        cost={"input": 2, "output": 8, "cacheRead": 0.5, "cacheWrite": 2.5},
    )
    reply = call(adapter(pi_path, fake_model, tmp_path, pi_models=str(models)))
    assert isinstance(reply, Reply)
    assert reply.cost is None
    assert reply.estimated_cost is None
    raw = json.loads(reply.usage.raw_json or "", parse_float=Decimal)
    # kept as pi wrote it: its catalog price of the 1500 tokens is 0.0035 (float sums).
    assert abs(raw["cost"]["total"] - Decimal("0.0035")) < Decimal("1e-12")


def test_subscription_has_no_cost(pi_path, fake_model, tmp_path):
    fake_model.reply(sse_answer(chunks("hi", usage=USAGE)))
    snapshot = tmp_path / "prices.json"
    snapshot.write_text(json.dumps(PRICES))
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"fake": {"type": "api_key", "key": "sk-login-file-key"}}))
    a = adapter(
        pi_path,
        fake_model,
        tmp_path,
        auth="oauth",
        api_key_env=None,
        pi_auth_file=str(auth),
        price_snapshot=str(snapshot),
    )
    assert a.identity.auth_mode == "oauth"
    reply = call(a)
    assert isinstance(reply, Reply)
    assert (reply.cost, reply.estimated_cost) == (None, None)
    assert fake_model.received[0].headers["authorization"] == "Bearer sk-login-file-key"


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, "rate_limited"), (500, "server_error"), (401, "auth"), (400, "bad_request")],
)
def test_provider_errors_are_classified_and_not_retried(
    pi_path, fake_model, tmp_path, status, kind
):
    body = json.dumps({"error": {"message": f"fake failure {status}"}}).encode()
    fake_model.reply(json_answer(body, status))
    failure = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(failure, Failure)
    assert failure.kind == kind
    assert failure.message.startswith(f"{status} ")
    assert len(fake_model.received) == 1  # neither pi nor its SDK retried


def test_tool_use_is_a_failure_after_one_call(pi_path, fake_model, tmp_path):
    fake_model.reply(sse_answer(chunks(tool="bash")))
    failure = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(failure, Failure)
    assert failure.kind == "tool_use"
    assert "(bash)" in failure.message
    assert len(fake_model.received) == 1
    assert "tools" not in fake_model.received[0].json()


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


def test_timeout_kills_pi_and_its_children(pi_path, fake_model, tmp_path):
    # The kill must find pi fully started: its request reached the model server. On a
    # busy machine pi's start can outlast a short timeout; then the call is repeated
    # with a longer one (3 s is enough on a quiet machine, where it used to wait 6).
    fake_model.reply(sse_answer(chunks("late"), delay=30.0))
    for timeout_s in (3, 12):
        a = adapter(pi_path, fake_model, tmp_path, timeout_s=timeout_s)
        marker = str(a._root)  # every pi of this adapter runs with its bridge path in argv
        start = time.monotonic()
        failure = a.call(Request(case_id="c1", attempt=1, prompt=PROMPT))
        spent = time.monotonic() - start
        try:
            assert isinstance(failure, Failure)
            assert failure.kind == "timeout"
            assert failure.message == (
                f"pi did not finish within {timeout_s} s; its process group was killed"
            )
            assert timeout_s <= spent < timeout_s + 14
            assert _processes_with(marker) == []
        finally:
            a.close()
        assert not Path(marker).exists()  # close() removed the run's pi folders
        if fake_model.received:
            break
    assert len(fake_model.received) == 1


def test_pi_failing_is_command_failed(pi_path, fake_model, tmp_path):
    failure = call(adapter(pi_path, fake_model, tmp_path, provider="no-such-provider"))
    assert isinstance(failure, Failure)
    assert failure.kind == "command_failed"
    assert failure.message.startswith("pi failed (exit status 1); stderr: ")
    assert 'Unknown provider "no-such-provider"' in failure.message
    assert fake_model.received == []


def test_the_key_is_scrubbed_from_what_pi_returns(pi_path, fake_model, tmp_path):
    fake_model.reply(sse_answer(chunks(f"my key is {KEY}")))
    reply = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(reply, Reply)
    assert KEY not in reply.raw_output
    assert reply.raw_output == "my key is [redacted]"


# ---------------------------------------------------------------- build-time refusals


def test_pi_missing_is_a_usage_error_with_an_install_hint(tmp_path):
    with pytest.raises(UsageError) as err:
        build_adapter(
            "pi",
            {
                "pi": str(tmp_path / "nowhere" / "pi"),
                "provider": "fake",
                "model": "m",
                "api_key_env": KEY_ENV,
            },
            environ=ENV,
        )
    assert err.value.message == (
        f"pi is not installed: no executable {str(tmp_path / 'nowhere' / 'pi')!r} (from --pi)"
    )
    assert "npm install --prefix" in (err.value.hint or "")
    assert "@mariozechner/pi-coding-agent@0.73.1" in (err.value.hint or "")
    assert err.value.exit_code == 2


def test_cli_without_pi_exits_2_without_traceback(tmp_path):
    home = tmp_path / "led"
    home.mkdir()
    cli = [str(Path(sys.executable).parent / "caseledger"), "--ledger", str(home / "ledger.db")]
    env = {**os.environ, "PATH": "/usr/bin:/bin", KEY_ENV: KEY}
    env.pop("CASELEDGER_PI", None)
    for args in (["init"], ["bank", "publish", "sales-fixture"]):
        done = subprocess.run([*cli, *args], capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
    run = [*cli, "run", "--bank", "sales-fixture", "--adapter", "pi"]
    opts = ["--provider", "fake", "--model", "m", "--api-key-env", KEY_ENV]
    done = subprocess.run(
        [*run, *opts, "--pi", str(tmp_path / "no-pi")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: pi is not installed: no executable ")
    assert "hint: install it: npm install --prefix" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model": None}, "the pi adapter needs --model"),
        ({"auth": "none"}, "--auth must be one of api_key, oauth for pi, got 'none'"),
        (
            {"api_key_env": None},
            "--auth api_key needs --api-key-env naming the variable holding the key",
        ),
        (
            {"reasoning_effort": "max"},
            "--reasoning-effort must be one of pi's thinking levels "
            "(off, minimal, low, medium, high, xhigh), got 'max'",
        ),
        (
            {"provider": "openai-codex", "max_tokens": 100},
            "--max-tokens is not accepted for openai-codex: the provider sets it",
        ),
        ({"command": "x"}, "the pi adapter does not take --command (option 'command')"),
        ({"system_prompt": ""}, "--system-prompt must be a non-empty string for pi"),
    ],
)
def test_option_refusals(tmp_path, options, message):
    opts: dict[str, Any] = {
        "pi": "/nonexistent/pi",
        "provider": "fake",
        "model": "m",
        "api_key_env": KEY_ENV,
        **options,
    }
    with pytest.raises(UsageError) as err:
        build_adapter("pi", {k: v for k, v in opts.items() if v is not None}, environ=ENV)
    assert err.value.message == message


def test_bad_models_file_is_an_adapter_error(tmp_path):
    bad = tmp_path / "models.json"
    bad.write_text("[1, 2]")
    with pytest.raises(AdapterError) as err:
        build_adapter(
            "pi",
            {
                "pi": "/nonexistent/pi",
                "provider": "fake",
                "model": "m",
                "api_key_env": KEY_ENV,
                "pi_models": str(bad),
            },
            environ=ENV,
        )
    assert err.value.message == f"--pi-models {bad} must be an object with a 'providers' object"


# ---------------------------------------------------------------- pi's event stream


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (b"", "pi's event stream has no agent_end event"),
        (b'{"type":"session"}\nnot json\n', "line 2 of pi's event stream is not JSON"),
        (b'{"type":"session"}\n[1]\n', "line 2 of pi's event stream is not an event object"),
        (b'{"type":"agent_end","messages":[{"x":1}]}\n', "pi's agent_end event: "),
        (b'{"type":"agent_end","messages":[]}\n{"type":"x","v":NaN}\n', "non-finite number"),
    ],
)
def test_malformed_event_streams(out, message):
    with pytest.raises(pi_mod._Bad) as err:
        pi_mod._agent_end(out)
    assert str(err.value).startswith(message) or message in str(err.value)


def _pi_of_another_version(pi_path: str, root: Path, version: str) -> Path:
    """The real pi package, copied with only its package.json version changed (pi reports
    that field as its version); its dependencies are the installed ones, linked."""
    package = Path(os.path.realpath(pi_path)).parents[1]  # .../pi-coding-agent
    modules = package.parents[1]  # .../node_modules
    target = root / "node_modules"
    (target / "@mariozechner").mkdir(parents=True)
    for entry in modules.iterdir():
        if entry.name != "@mariozechner":
            (target / entry.name).symlink_to(entry.resolve())
    for entry in (modules / "@mariozechner").iterdir():
        if entry.name != package.name:
            (target / "@mariozechner" / entry.name).symlink_to(entry.resolve())
    copy = target / "@mariozechner" / package.name
    shutil.copytree(package, copy, symlinks=True)
    manifest = copy / "package.json"
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    doc["version"] = version
    manifest.write_text(json.dumps(doc), encoding="utf-8")
    return copy / "dist" / "cli.js"


def test_pi_of_another_version_is_refused(pi_path, tmp_path):
    other = _pi_of_another_version(pi_path, tmp_path, "0.72.0")
    with pytest.raises(UsageError) as err:
        build_adapter(
            "pi",
            {"pi": str(other), "provider": "fake", "model": "m", "api_key_env": KEY_ENV},
            environ=ENV,
        )
    assert err.value.message == (
        f"{other} is pi 0.72.0; caseledger's pi adapter needs exactly 0.73.1"
    )
    assert err.value.exit_code == 2


def _chat_json(text: str) -> bytes:
    """A whole (not streamed) Chat Completions answer: what a server that does not speak
    Server-Sent Events sends back to pi's streaming request."""
    return json.dumps(
        {
            "id": "chatcmpl-plain",
            "object": "chat.completion",
            "model": "served-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
        }
    ).encode()


def test_a_server_that_does_not_stream_is_a_provider_failure(pi_path, fake_model, tmp_path):
    """Issue 35 item 1: pi reads no text and no tokens from a reply that is not an event
    stream; that is the transport's failure, never the model's empty answer."""
    fake_model.reply(json_answer(_chat_json('{"sql": "SELECT 1"}')))
    failure = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(failure, Failure)
    assert failure.kind == "malformed_response"
    assert "no text and no output tokens" in failure.message
    assert len(fake_model.received) == 1


def test_a_connection_cut_by_the_server_is_a_provider_failure(pi_path, fake_model, tmp_path):
    """Issue 35 item 1: the server reads the request and closes the connection without a
    response (a reset transport): a provider failure, never the model's empty answer."""
    fake_model.reply(Answer(hang_up=True))
    failure = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(failure, Failure)
    # the class the openai adapter gives a server that hangs up (test_cli_run_end)
    assert failure.kind == "connection_error"
    assert len(fake_model.received) == 1  # one try: both of pi's retry layers are off
    assert fake_model.served == []


def test_an_empty_stream_is_a_provider_failure(pi_path, fake_model, tmp_path):
    fake_model.reply(sse_answer(chunks(None)))
    failure = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(failure, Failure)
    assert failure.kind == "malformed_response"
    assert "no text and no output tokens" in failure.message


def test_an_empty_answer_with_tokens_is_the_models(pi_path, fake_model, tmp_path):
    """The model spent output tokens and said nothing: its answer, scored as such."""
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    fake_model.reply(sse_answer(chunks("", usage=usage)))
    reply = call(adapter(pi_path, fake_model, tmp_path))
    assert isinstance(reply, Reply)
    assert reply.raw_output == ""
    assert reply.usage is not None
    assert reply.usage.output == 3
