"""Helpers of the pi adapter tests: where the real pi is, and a fake model server.

The pi CLI under test is real (npm ``@mariozechner/pi-coding-agent``, the pinned
version); only the model behind it is fake: an OpenAI-compatible Chat
Completions server on 127.0.0.1 that streams its answers (Server-Sent Events)
as OpenAI does, and records every request it receives.

Where pi is found: ``$CASELEDGER_PI``, else ``.ci/pi/node_modules/.bin/pi`` in
this clone (``.ci/run`` installs it there with ``npm ci``), else ``pi`` on PATH.
Without one, the pi tests skip, except when ``CASELEDGER_REQUIRE_PI=1`` (CI sets
it): then a missing pi fails them.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "FAKE_PI_KEY"
KEY = "sk-fake-pi-KEY-0123456789"  # a fake key the tests plant and look for


def find_pi() -> str | None:
    """The pi executable the tests run, or None."""
    named = os.environ.get("CASELEDGER_PI")
    if named:
        return named
    local = REPO / ".ci" / "pi" / "node_modules" / ".bin" / "pi"
    if local.exists():
        return str(local)
    return shutil.which("pi")


@pytest.fixture(scope="session")
def pi_path() -> str:
    """The real pi, or a skip (a failure when CASELEDGER_REQUIRE_PI=1)."""
    found = find_pi()
    if found is None:
        message = (
            "pi is not installed: npm ci --prefix .ci/pi (or set CASELEDGER_PI to a pi "
            "executable of @mariozechner/pi-coding-agent 0.73.1)"
        )
        if os.environ.get("CASELEDGER_REQUIRE_PI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


# A reply the fake model sends: (status, body chunks or error body, delay seconds).
Script = Callable[[dict[str, Any]], tuple[int, list[dict[str, Any]] | bytes, float]]


def chunks(
    text: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
    tool: str | None = None,
    finish: str = "stop",
    response_id: str = "chatcmpl-fake-1",
) -> list[dict[str, Any]]:
    """The SSE chunks of one streamed Chat Completions answer."""
    base = {"id": response_id, "object": "chat.completion.chunk", "model": "served-model"}
    out: list[dict[str, Any]] = []
    if text is not None:
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            out.append({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
    if tool is not None:
        call = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": tool, "arguments": '{"command": "ls"}'},
        }
        out.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        finish = "tool_calls"
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage is not None:
        out.append({**base, "choices": [], "usage": usage})
    return out


class FakeModel:
    """An OpenAI-compatible streaming server; ``script`` decides each answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: Script = lambda body: (200, chunks("hello"), 0.0)
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                with outer._lock:
                    outer.requests.append({"path": self.path, **body})
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, reply, delay = outer.script(body)
                time.sleep(delay)
                try:
                    if isinstance(reply, bytes):
                        self.send_response(status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(reply)))
                        self.end_headers()
                        self.wfile.write(reply)
                        return
                    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in reply)
                    data += b"data: [DONE]\n\n"
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client is gone (the timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def models_json(
        self, path: Path, models: tuple[str, ...] = ("model-a", "model-b"), **model: Any
    ) -> Path:
        """pi's models.json with the custom provider ``fake`` served by this server."""
        doc = {
            "providers": {
                "fake": {
                    "baseUrl": self.url,
                    "api": "openai-completions",
                    "apiKey": "NOT_THE_KEY",
                    "models": [{"id": m, **model} for m in models],
                }
            }
        }
        path.write_text(json.dumps(doc), "utf-8")
        return path


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    server = FakeModel()
    yield server
    server.close()
