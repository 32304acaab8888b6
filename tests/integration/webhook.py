"""A webhook on loopback for the notification tests: a real HTTP server in a thread of the
test's process, answering 500 to its first ``fail`` POSTs (or what ``answer`` says of a body),
then 204, and recording every POST it accepted (its idempotency key and JSON body)."""

from __future__ import annotations

import json
import threading
import typing as t
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hook:
    """A webhook on loopback: answers 500 to its first ``fail`` POSTs, then 204; records
    every POST it accepted (body and idempotency key)."""

    def __init__(
        self,
        fail: int = 0,
        port: int = 0,
        answer: t.Callable[[dict[str, t.Any]], int | None] | None = None,
    ) -> None:
        """``answer``: the status to answer a body with (None: as ``fail`` says)."""
        self.fail, self.tried, self.accepted = fail, 0, []
        self.answer = answer
        self.bodies: list[dict[str, t.Any]] = []  # every POST's body, accepted or not
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.tried += 1
                hook.bodies.append(body)
                status = hook.answer(body) if hook.answer else None
                if status is not None and not 200 <= status < 300:
                    self.send_response(status)
                elif hook.tried <= hook.fail:
                    self.send_response(500)
                else:
                    hook.accepted.append((self.headers["Idempotency-Key"], body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: t.Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
