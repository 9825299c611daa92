"""The one fake OpenAI-compatible Chat Completions server of the tests, on 127.0.0.1.

Every test that needs a model server uses :class:`ChatServer`: the code under test
(the openai adapter over ``http.client``, the real pi CLI over Node's fetch) talks to
it over real HTTP. ``answer(request)`` decides each response: an :class:`Answer`
(status, body, headers, a delay before it is sent). The server records every
request it receives (``received``: path, headers, body, arrival time) and, apart,
the ones whose answer it wrote out completely (``served``: a client that gave up
during the delay is not served).

Answers: :func:`json_answer` (a whole JSON body), :func:`sse_answer` (a streamed
answer as Server-Sent Events, what pi asks for), :func:`scheduled` (the n-th request
gets the n-th answer, cycling; with ``run --concurrency 1`` requests arrive in plan
order), :func:`completion` (a non-streamed Chat Completions document) and
:func:`case_of` (the bank case whose question a request's prompt holds).
"""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.closing import Closing

__all__ = [
    "Answer",
    "ChatServer",
    "Received",
    "case_of",
    "completion",
    "json_answer",
    "scheduled",
    "sse_answer",
]


@dataclass(frozen=True)
class Answer:
    """One HTTP response: sent after ``delay`` seconds with exactly ``headers`` (and
    Content-Length)."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    #: Close the connection after reading the request, without a response (a reset
    #: transport; the request is recorded as received, never as served).
    hang_up: bool = False


@dataclass(frozen=True)
class Received:
    """One request as the server read it; ``headers`` are looked up case-insensitively."""

    path: str
    headers: http.client.HTTPMessage
    body: bytes
    at: float  # time.monotonic() on arrival

    def json(self, **loads: Any) -> Any:
        return json.loads(self.body, **loads)

    @property
    def prompt(self) -> str:
        """The text of the last message (a plain string, or pi's list of text parts)."""
        content = self.json()["messages"][-1]["content"]
        if isinstance(content, str):
            return content
        return "".join(part["text"] for part in content)


def json_answer(doc: Any, status: int = 200, *, delay: float = 0.0, **headers: str) -> Answer:
    """A JSON body (``doc`` encoded, or bytes / text sent as they are)."""
    if isinstance(doc, str):
        body = doc.encode()
    elif isinstance(doc, bytes):
        body = doc
    else:
        body = json.dumps(doc).encode()
    return Answer(status, body, {"Content-Type": "application/json", **headers}, delay)


def sse_answer(chunks: Sequence[Mapping[str, Any]], *, delay: float = 0.0) -> Answer:
    """A streamed answer: each chunk as a ``data:`` event, then ``data: [DONE]``."""
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    body += b"data: [DONE]\n\n"
    return Answer(200, body, {"Content-Type": "text/event-stream"}, delay)


def completion(
    content: Any, *, model: str, usage: Mapping[str, Any] | None = None, **top: Any
) -> dict[str, Any]:
    """A non-streamed Chat Completions document with one assistant message."""
    message = {"role": "assistant", "content": content}
    doc: dict[str, Any] = {
        **top,
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }
    if usage is not None:
        doc["usage"] = dict(usage)
    return doc


def scheduled(
    schedule: Sequence[Answer | tuple[int, Mapping[str, str], bytes]],
) -> Callable[[Received], Answer]:
    """The n-th request (in arrival order) gets ``schedule[n % len(schedule)]``: an
    Answer, or (status, headers, body) of a JSON answer."""
    answers = [a if isinstance(a, Answer) else json_answer(a[2], a[0], **a[1]) for a in schedule]
    count = iter(range(1 << 62))
    return lambda _request: answers[next(count) % len(answers)]


def case_of(request: Received, cases: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The case whose question is in the prompt (the longest, when one contains another)."""
    prompt = request.prompt
    return max((c for c in cases if c["question"] in prompt), key=lambda c: len(c["question"]))


class ChatServer(Closing):
    """Serves ``answer(request)`` on an ephemeral port; ``url`` is its ``/v1`` base URL.

    ``answer`` is chosen under the server's lock in arrival order and may be replaced
    between requests; ``reply`` sets one answer for every request.
    """

    def __init__(self, answer: Callable[[Received], Answer] | Answer = Answer()) -> None:
        self.answer: Callable[[Received], Answer] = (
            (lambda _request: answer) if isinstance(answer, Answer) else answer
        )
        self.received: list[Received] = []
        self.served: list[Received] = []
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = Received(self.path, self.headers, body, time.monotonic())
                with lock:
                    outer.received.append(request)
                    reply = outer.answer(request)
                time.sleep(reply.delay)
                if reply.hang_up:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    self.wfile.flush()
                except OSError:
                    return  # the client went away (a timeout): not served
                with lock:
                    outer.served.append(request)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def reply(self, answer: Answer) -> None:
        """Answer every request from now on with ``answer``."""
        self.answer = lambda _request: answer

    @property
    def auth(self) -> list[str]:
        """Each request's Authorization header, in arrival order ("" when absent)."""
        return [r.headers.get("Authorization", "") for r in self.received]

    def close(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
