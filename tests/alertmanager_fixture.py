"""A real Alertmanager for tests, delivering to a webhook receiver in the test.

:func:`running_alertmanager` starts Debian's ``prometheus-alertmanager`` (0.25) on a free
loopback port with its own data directory, clustering off, and one route to a
:class:`WebhookReceiver` (no grouping wait), and waits for ``/-/ready``. The apt package's own
service is never used.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.prometheus_fixture import free_port

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
SKIP_REASON = (
    "the alertmanager binary is not installed (Debian: apt-get install -y "
    "prometheus-alertmanager; .ci/run installs it when it can)"
)


@dataclass
class WebhookReceiver:
    """Collects the alerts Alertmanager posts (thread-safe)."""

    alerts: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def firing(self, name: str) -> list[dict[str, Any]]:
        """The firing alerts named ``name`` received so far."""
        with self._lock:
            return [
                a
                for a in self.alerts
                if a.get("status") == "firing" and a.get("labels", {}).get("alertname") == name
            ]

    def start(self) -> str:
        """Serve on a free loopback port; returns the webhook URL."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                with owner._lock:
                    owner.alerts.extend(body.get("alerts", []))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.port}/alerts"

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def alertmanager_config(webhook_url: str) -> dict[str, Any]:
    """One route, no waiting: every alert goes to ``webhook_url`` at once."""
    return {
        "route": {
            "receiver": "test",
            "group_by": ["alertname"],
            "group_wait": "0s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [{"name": "test", "webhook_configs": [{"url": webhook_url}]}],
    }


@contextmanager
def running_alertmanager(webhook_url: str, data_dir: Path) -> Iterator[str]:
    """Start Alertmanager on a free loopback port; yield its ``host:port`` once ready; stop it."""
    assert ALERTMANAGER is not None, SKIP_REASON
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "alertmanager.yml"
    config.write_text(json.dumps(alertmanager_config(webhook_url), indent=1))
    address = f"127.0.0.1:{free_port()}"
    log = data_dir / "alertmanager.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                ALERTMANAGER,
                f"--config.file={config}",
                f"--storage.path={data_dir / 'data'}",
                f"--web.listen-address={address}",
                "--cluster.listen-address=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        end = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text(errors="replace")[-2000:]
            try:
                if httpx.get(f"http://{address}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < end, log.read_text(errors="replace")[-2000:]
            time.sleep(0.1)  # polling for readiness, with a deadline
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


__all__ = ["ALERTMANAGER", "SKIP_REASON", "WebhookReceiver", "running_alertmanager"]
