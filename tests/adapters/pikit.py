"""Helpers of the pi adapter tests: where the real pi is, and a fake model server.

The pi CLI under test is real (npm ``@mariozechner/pi-coding-agent``, the pinned
version); only the model behind it is fake: the tests' Chat Completions server
(tests/chatserver.py) on 127.0.0.1, streaming its answers (Server-Sent Events) as
OpenAI does; ``chunks`` builds such an answer's events.

Where pi is found: ``$CASELEDGER_PI``, else ``.ci/pi/node_modules/.bin/pi`` in
this clone. When that is missing too, the first test that needs pi installs it
there with ``.ci/pi/install`` (the pinned ``npm ci`` that ``.ci/run`` runs),
once per session and under a file lock so that two xdist workers never install
at the same time. A pi test never skips: without npm it fails saying how to get it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chatserver import ChatServer, sse_answer

REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "FAKE_PI_KEY"
KEY = "sk-fake-pi-KEY-0123456789"  # a fake key the tests plant and look for


PI_DIR = REPO / ".ci" / "pi"
PI_LOCAL = PI_DIR / "node_modules" / ".bin" / "pi"


def install_pi() -> None:
    """Run ``.ci/pi/install`` unless another process did it while we waited for the lock."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.fail(
            "the pi adapter's tests need npm and Node.js >= 20.6 to install the pinned pi "
            "into .ci/pi/node_modules: install them (Debian: apt-get install nodejs npm), "
            "or set CASELEDGER_PI to a pi executable of the version in .ci/pi/package.json",
            pytrace=False,
        )
    with open(PI_DIR / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if PI_LOCAL.exists():
            return
        done = subprocess.run(
            [str(PI_DIR / "install")], capture_output=True, text=True, check=False
        )
        if done.returncode != 0 or not PI_LOCAL.exists():
            pytest.fail(
                f".ci/pi/install failed (exit status {done.returncode}); run it by hand to "
                f"see why:\n{done.stdout}{done.stderr}",
                pytrace=False,
            )


@pytest.fixture(scope="session")
def pi_path() -> str:
    """The real pi: ``$CASELEDGER_PI``, else this clone's, installed first if missing."""
    named = os.environ.get("CASELEDGER_PI")
    if named:
        return named
    if not PI_LOCAL.exists():
        install_pi()
    return str(PI_LOCAL)


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


def models_json(
    server: ChatServer,
    path: Path,
    models: tuple[str, ...] = ("model-a", "model-b"),
    **model: Any,
) -> Path:
    """pi's models.json with the custom provider ``fake`` served by ``server``."""
    doc = {
        "providers": {
            "fake": {
                "baseUrl": server.url,
                "api": "openai-completions",
                "apiKey": "NOT_THE_KEY",
                "models": [{"id": m, **model} for m in models],
            }
        }
    }
    path.write_text(json.dumps(doc), "utf-8")
    return path


@pytest.fixture
def fake_model() -> Iterator[ChatServer]:
    """The model behind pi: streams "hello" until a test sets another answer."""
    with ChatServer(sse_answer(chunks("hello"))) as server:
        yield server
