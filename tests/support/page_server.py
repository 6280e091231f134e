"""The status page served over a real socket from accounts a test sets: the page itself,
/accounts (the summary of `stats`, which the test may swap while the page polls), /history
(of `history`) and /faults (none), as the broker's metrics listener answers them, for the
status page tests that drive headless Chromium with numbers of their choosing."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from nullbroker.ops.history import History
from nullbroker.ops.http_endpoint import (
    STATUS_PAGE,
    HttpRequest,
    HttpResponse,
    history_handler,
    json_response,
)
from nullbroker.ops.report import summary
from nullbroker.stats import BrokerStats


class PageServer:
    def __init__(self, stats: BrokerStats | None = None, history: History | None = None) -> None:
        self.stats = stats if stats is not None else BrokerStats()
        self.history = history if history is not None else History()
        server = self
        handle = history_handler(self.history, lambda request: HttpResponse(404, b"not found\n"))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == "/accounts":
                    response = json_response(200, summary(server.stats))
                elif path == "/faults":
                    response = json_response(200, [])
                elif path == "/":
                    page = STATUS_PAGE.read_bytes()
                    response = HttpResponse(200, page, b"text/html; charset=utf-8")
                else:
                    answered = handle(HttpRequest(b"GET", path, query, b""))
                    assert isinstance(answered, HttpResponse)
                    response = answered
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type.decode())
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_port}/?interval=0.1"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
