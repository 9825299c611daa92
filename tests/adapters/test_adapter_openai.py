"""The openai adapter against a real Chat Completions server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from chatserver import ChatServer, json_answer

from ledger.adapters import Failure, Reply, Request, build_adapter
from ledger.adapters.base import RetryPolicy, call_with_retries
from ledger.errors import AdapterError, UsageError

SECRET = "sk-test-SECRET-123"  # noqa: S105 (a fake key the tests plant and look for)
ENV = {"TEST_OPENAI_KEY": SECRET}
PROMPT = "Question: how many orders?\nAnswer in query-plan-v1 JSON."
CONTRACT = "sha256:" + "c" * 64

# A Chat Completions response as OpenAI documents it, with a model id that
# differs from the requested one.
USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1000, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 120},
}
USAGE_CANONICAL = (
    '{"completion_tokens":300,"completion_tokens_details":{"reasoning_tokens":120},'
    '"prompt_tokens":1200,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":1000},'
    '"total_tokens":1500}'
)


def completion(content: Any = '{"sql": "SELECT 1"}', **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test-2026-01-01",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(json_answer(completion(), **{"x-request-id": "req-abc123"})) as srv:
        yield srv


def adapter(server: ChatServer, **options: Any) -> Any:
    opts: dict[str, Any] = {
        "base_url": server.url,
        "model": "gpt-test",
        "api_key_env": "TEST_OPENAI_KEY",
        "timeout_s": 5,
    }
    opts.update(options)
    return build_adapter("openai", opts, environ=ENV)


def ask(a: Any) -> Reply | Failure:
    return a.call(Request(case_id="r01", attempt=1, prompt=PROMPT))


def test_reply_holds_the_providers_values(server: ChatServer) -> None:
    a = adapter(server, temperature=0.2, max_tokens=256)
    reply = ask(a)
    assert isinstance(reply, Reply)
    assert reply.raw_output == '{"sql": "SELECT 1"}'
    assert reply.provider_request_id == "req-abc123"
    assert reply.resolved_model == "gpt-test-2026-01-01"
    assert reply.recorded_model is None
    usage = reply.usage
    assert usage is not None
    assert (usage.input, usage.cache_read, usage.cache_write) == (200, 1000, None)
    assert (usage.output, usage.reasoning_output) == (300, 120)
    assert usage.raw_json == USAGE_CANONICAL
    assert reply.cost is None
    assert reply.estimated_cost is None
    assert reply.generation_us is not None
    assert reply.generation_us > 0


def test_request_on_the_wire(server: ChatServer) -> None:
    ask(adapter(server, temperature="0.2", max_tokens=256, reasoning_effort="low"))
    (request,) = server.received
    path, headers, body = request.path, request.headers, request.body
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer " + SECRET
    assert headers["Content-Type"] == "application/json"
    sent = json.loads(body, parse_float=Decimal)
    assert sent == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": Decimal("0.2"),
        "max_tokens": 256,
        "reasoning_effort": "low",
    }


def test_only_explicit_params_are_sent(server: ChatServer) -> None:
    a = adapter(server, system_prompt="You are terse.")
    ask(a)
    sent = server.received[0].json()
    assert sent == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": PROMPT},
        ],
    }
    inv = a.invocation(CONTRACT, 0)
    assert inv.parameters == {}
    digest = "sha256:" + hashlib.sha256(b"You are terse.").hexdigest()
    assert inv.system_prompt_digest == digest
    assert a.identity.system_prompt_digest == digest


def test_invocation_and_identity(server: ChatServer) -> None:
    a = adapter(server, temperature=0.2, max_tokens=256)
    inv = a.invocation(CONTRACT, 2)
    assert inv.harness_kind == "caseledger-single-turn"
    assert (inv.response_mode, inv.single_call, inv.tools) == ("text", True, "off")
    assert (inv.retries, inv.prompt_contract_digest) == (2, CONTRACT)
    assert inv.wire_protocol == "openai-chat-completions"
    assert inv.client_version == "caseledger/0.1.0 adapter-openai/1"
    assert (inv.provider, inv.auth_mode, inv.model) == ("127.0.0.1", "api_key", "gpt-test")
    assert inv.parameters == {"temperature": "0.2", "max_tokens": "256"}
    assert inv.system_prompt_digest is None
    ident = a.identity
    assert (ident.adapter_kind, ident.run_kind, ident.requested_model) == (
        "openai",
        "model",
        "gpt-test",
    )
    assert ident.params.temperature == Decimal("0.2")
    assert ident.params.max_tokens == 256
    assert ident.timeout_ms == 5000
    assert ident.replay_file_sha256 is None
    assert ident.default_attempts is None


def test_billed_cost_and_raw_usage_text_kept_when_it_has_a_float(server: ChatServer) -> None:
    body = (
        '{"model": "m-1", "choices": [{"message": {"role": "assistant", "content": "x"},'
        ' "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5,'
        ' "cost": 0.00012}}'
    )
    server.reply(json_answer(body))
    reply = ask(adapter(server))
    assert isinstance(reply, Reply)
    assert reply.usage is not None
    assert reply.usage.raw_json == '{"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.00012}'
    assert (reply.usage.input, reply.usage.cache_read, reply.usage.output) == (10, None, 5)
    assert reply.cost == Decimal("0.00012")
    assert reply.estimated_cost is None
    assert reply.provider_request_id is None


def test_estimated_cost_from_a_price_snapshot(server: ChatServer, tmp_path: Path) -> None:
    snap = tmp_path / "prices.json"
    snap.write_text(
        json.dumps(
            {
                "format": "caseledger-prices/1",
                "currency": "USD",
                "models": {
                    "gpt-test": {"input": "2.50", "cached_input": "1.25", "output": "10.00"}
                },
            }
        )
    )
    a = adapter(server, price_snapshot=str(snap))
    reply = ask(a)
    assert isinstance(reply, Reply)
    # 200 x 2.50 + 1000 x 1.25 + 300 x 10.00 = 500 + 1250 + 3000 = 4750 per million
    assert reply.estimated_cost == Decimal("0.00475")
    assert reply.cost is None
    assert a.identity.price_snapshot_digest == (
        "sha256:" + hashlib.sha256(snap.read_bytes()).hexdigest()
    )


def test_oauth_has_no_cost(server: ChatServer) -> None:
    body = json.dumps({**completion(), "usage": {**USAGE, "cost": 1}})
    server.reply(json_answer(body))
    reply = ask(adapter(server, auth="oauth"))
    assert isinstance(reply, Reply)
    assert reply.cost is None
    assert reply.estimated_cost is None


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, "rate_limited"),
        (500, "server_error"),
        (503, "server_error"),
        (400, "bad_request"),
        (404, "bad_request"),
        (422, "bad_request"),
        (401, "auth"),
        (403, "auth"),
    ],
    ids=lambda v: str(v),
)
def test_http_errors_become_failure_kinds(server: ChatServer, status: int, kind: str) -> None:
    server.reply(
        json_answer('{"error": {"message": "nope"}}', status, **{"x-request-id": "req-err"})
    )
    failure = ask(adapter(server))
    assert isinstance(failure, Failure)
    assert (failure.kind, failure.http_status) == (kind, status)
    assert failure.provider_request_id == "req-err"
    assert failure.message == f'HTTP {status}: {{"error": {{"message": "nope"}}}}'


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("this is not json{", "response body is not JSON: Expecting value"),
        ('{"choices": []}', "response has no choices"),
        ('{"choices": [{"message": {"content": null}}]}', "choices[0].message.content is null"),
        (
            '{"choices": [{"message": {"content": 7}}]}',
            "choices[0].message.content is not a string",
        ),
        ("[1]", "response body is not a JSON object"),
    ],
    ids=["not-json", "no-choices", "null-content", "number-content", "array"],
)
def test_malformed_body(server: ChatServer, body: str, reason: str) -> None:
    server.reply(json_answer(body))
    failure = ask(adapter(server))
    assert isinstance(failure, Failure)
    assert failure.kind == "malformed_response"
    assert failure.message.startswith(reason)
    assert failure.http_status == 200


def test_a_lone_surrogate_in_the_content_is_a_malformed_response(server: ChatServer) -> None:
    """Content ``"\\ud800"`` (a JSON escape with no pair) has no UTF-8 form: as a body
    that is not UTF-8 at all, the answer is a ``malformed_response``, never a crash
    (issue 30; the replay adapter gives the same, tests/cli/test_fuzz_inputs.py)."""
    not_utf8 = json.dumps(completion("x")).encode().replace(b'"x"', b'"\xed\xa0\x80"')
    server.reply(json_answer(not_utf8))
    assert ask(adapter(server)).kind == "malformed_response"  # type: ignore[union-attr]
    server.reply(json_answer(json.dumps(completion("ok \ud800")), **{"x-request-id": "req-9"}))
    answer = call_with_retries(
        adapter(server),
        Request(case_id="r01", attempt=1, prompt=PROMPT),
        RetryPolicy(),
        clock=lambda: "2026-12-06T00:00:00.000000Z",
    )
    failure = answer.outcome
    assert isinstance(failure, Failure)
    assert (failure.kind, failure.message, failure.raw_output, failure.provider_request_id) == (
        "malformed_response",
        "the answer is not valid Unicode text: raw_output holds a lone surrogate "
        "(\\ud800 at character 3)",
        None,
        "req-9",
    )
    assert failure.usage is not None
    assert failure.usage.output == 300


def test_slow_response_is_a_timeout(server: ChatServer) -> None:
    server.reply(json_answer(json.dumps(completion()), delay=3.0))
    a = adapter(server, timeout_s="0.5")
    start = time.monotonic()
    failure = ask(a)
    assert time.monotonic() - start < 2.0
    assert isinstance(failure, Failure)
    assert failure.kind == "timeout"
    assert failure.message == "no complete response within 0.5 s"
    assert a.identity.timeout_ms == 500


def test_refusal_and_content_filter_are_policy_refusals(server: ChatServer) -> None:
    server.reply(
        json_answer(json.dumps(completion(content=None, refusal="I can't help with that.")))
    )
    failure = ask(adapter(server))
    assert isinstance(failure, Failure)
    assert failure.kind == "policy_refusal"
    assert failure.raw_output == "I can't help with that."
    assert failure.message == "model refused: I can't help with that."
    assert failure.usage is not None
    assert failure.usage.input == 200

    filtered = completion(content="partial")
    filtered["choices"][0]["finish_reason"] = "content_filter"
    server.reply(json_answer(json.dumps(filtered)))
    failure = ask(adapter(server))
    assert isinstance(failure, Failure)
    assert (failure.kind, failure.raw_output, failure.message) == (
        "policy_refusal",
        "partial",
        "content filter",
    )


def test_connection_refused() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    a = build_adapter(
        "openai", {"base_url": f"http://127.0.0.1:{port}", "model": "m", "auth": "none"}
    )
    failure = ask(a)
    assert isinstance(failure, Failure)
    assert failure.kind == "connection_error"


def test_api_key_appears_nowhere(
    server: ChatServer, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    a = adapter(server, temperature=0.2)
    results: list[Any] = [a.identity, a.invocation(CONTRACT, 0), ask(a)]
    # A server that echoes the key back in its error body.
    server.reply(json_answer({"error": f"Incorrect API key provided: {SECRET}"}, 401))
    results.append(ask(a))
    for status, body in ((429, "{}"), (500, "oops"), (200, "{not json")):
        server.reply(json_answer(body, status))
        results.append(ask(a))
    server.reply(json_answer(json.dumps(completion()), delay=2.0))
    results.append(ask(adapter(server, timeout_s="0.3")))
    assert results[3].message == 'HTTP 401: {"error": "Incorrect API key provided: [redacted]"}'
    encoded = b"".join(msgspec.json.encode(r) for r in results)
    assert SECRET.encode() not in encoded
    assert "SECRET" not in repr(a)
    captured = capsys.readouterr()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert logged  # the adapter does log each call at DEBUG
    for text in (captured.out, captured.err, logged):
        assert SECRET not in text


def test_missing_key_variable_is_named_not_valued(server: ChatServer) -> None:
    with pytest.raises(AdapterError) as exc:
        build_adapter(
            "openai", {"base_url": server.url, "model": "m", "api_key_env": "NOPE_KEY"}, environ={}
        )
    assert exc.value.message == (
        "environment variable NOPE_KEY (named by --api-key-env) is not set or empty"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"command": "x"}, "the openai adapter does not take --command (option 'command')"),
        ({"model": None}, "the openai adapter needs --model"),
        ({"auth": "none"}, "--api-key-env was given with --auth none; drop one of them"),
        ({"auth": "magic"}, "--auth must be one of api_key, oauth, none, got 'magic'"),
        (
            {"base_url": "ftp://h/v1"},
            "--base-url must be an http:// or https:// URL, got 'ftp://h/v1'",
        ),
        (
            {"base_url": "http://u:p@h/v1"},
            "--base-url must not contain credentials; use --api-key-env",
        ),
        ({"temperature": "hot"}, "--temperature must be a number, got 'hot'"),
        ({"max_tokens": 0}, "--max-tokens must be an integer >= 1, got 0"),
        ({"timeout_s": 0}, "--timeout must be a positive number, got 0"),
    ],
    ids=[
        "foreign-option",
        "no-model",
        "auth-none-with-key",
        "bad-auth",
        "ftp",
        "credentials",
        "temperature",
        "max-tokens",
        "timeout",
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    opts = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "TEST_OPENAI_KEY"}
    opts.update(options)
    with pytest.raises(UsageError) as exc:
        build_adapter("openai", opts, environ=ENV)
    assert exc.value.message == message


def test_every_text_from_the_provider_is_scrubbed(server: ChatServer) -> None:
    body = completion(content=f"SELECT '{SECRET}' AS k")
    body["model"] = f"m-{SECRET}"
    body["usage"] = {**USAGE, "note": SECRET}
    server.reply(json_answer(json.dumps(body), **{"x-request-id": f"r-{SECRET}"}))
    reply = ask(adapter(server))
    assert isinstance(reply, Reply)
    assert reply.raw_output == "SELECT '[redacted]' AS k"
    assert reply.provider_request_id == "r-[redacted]"
    assert reply.resolved_model == "m-[redacted]"
    assert reply.usage is not None
    assert reply.usage.raw_json == (
        '{"completion_tokens":300,"completion_tokens_details":{"reasoning_tokens":120},'
        '"note":"[redacted]",'
        '"prompt_tokens":1200,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":1000},'
        '"total_tokens":1500}'
    )


def test_usage_text_with_the_key_is_not_kept_as_received(server: ChatServer) -> None:
    # A float cost would keep the text as received; holding the key, the scrubbed
    # object is kept as canonical JSON instead (the decimal as a string).
    usage = '{"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.00012, "who": "' + SECRET
    usage += '"}'
    body = (
        '{"model": "m-1", "choices": [{"message": {"role": "assistant", "content": "x"},'
        f' "finish_reason": "stop"}}], "usage": {usage}}}'
    )
    server.reply(json_answer(body))
    reply = ask(adapter(server))
    assert isinstance(reply, Reply)
    assert reply.usage is not None
    assert reply.usage.raw_json == (
        '{"completion_tokens":5,"cost":"0.00012","prompt_tokens":10,"who":"[redacted]"}'
    )
    assert reply.cost == Decimal("0.00012")


def test_key_across_the_300_byte_cut_is_scrubbed_whole(server: ChatServer) -> None:
    a = adapter(server)
    for start in range(300 - len(SECRET) - 1, 302):
        server.reply(json_answer("x" * start + SECRET + "y" * 50, 500))
        failure = ask(a)
        assert isinstance(failure, Failure)
        # Worked out by hand: the key becomes the 10-character marker, then 300 bytes.
        expected = ("x" * start + "[redacted]" + "y" * 50)[:300]
        assert failure.message == f"HTTP 500: {expected}", start
        assert "sk-test-" not in failure.message
        assert "SECRET" not in failure.message


def test_refusal_is_scrubbed_before_its_cut(server: ChatServer) -> None:
    refusal = "no " * 95 + SECRET  # the key starts at 15 + 285 = character 300 of the message
    server.reply(json_answer(json.dumps(completion(content=None, refusal=refusal))))
    failure = ask(adapter(server))
    assert isinstance(failure, Failure)
    assert failure.raw_output == "no " * 95 + "[redacted]"
    assert failure.message == ("model refused: " + "no " * 95)[:300]
    assert len(failure.message) == 300


def test_a_key_given_as_the_variable_name_is_refused_unechoed() -> None:
    opts = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": SECRET}
    with pytest.raises(UsageError) as exc:
        build_adapter("openai", opts, environ={SECRET: "x"})
    assert exc.value.diagnostics() == (
        "the value given to --api-key-env is not a variable name; "
        "pass the NAME of the variable that holds the key"
    )
