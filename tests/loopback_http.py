"""A hand-written HTTP answer served on loopback for a test: the hostile servers, the
Prometheus-like answers of the fleet tests and the fleet-scale script."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that writes no access log to the test's stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(
    handler: type[BaseHTTPRequestHandler],
    server: type[ThreadingHTTPServer] = ThreadingHTTPServer,
) -> Iterator[str]:
    """``handler`` on 127.0.0.1 (a free port) on a daemon thread; yields the base URL
    (``http://127.0.0.1:PORT``) and stops the server on the way out."""
    httpd = server(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
