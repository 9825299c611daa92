"""A scheduled Chat Completions server on 127.0.0.1 for the tests (one module, shared).

The n-th POST gets ``schedule[n % len(schedule)]``: (HTTP status, extra headers, body).
With ``run --concurrency 1`` requests arrive in plan order, so a test knows which
attempt got which answer. ``auth`` keeps each request's Authorization header.
"""

from __future__ import annotations

import http.server
import threading
from typing import Any

__all__ = ["ScheduledServer"]


class ScheduledServer:
    """Serves ``schedule`` in order on an ephemeral port; ``url`` is its ``/v1`` base URL."""

    def __init__(self, schedule: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.schedule = schedule
        self.count = 0
        self.auth: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.auth.append(self.headers.get("Authorization", ""))
                status, headers, body = outer.schedule[outer.count % len(outer.schedule)]
                outer.count += 1
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
