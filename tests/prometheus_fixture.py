"""A real Prometheus for tests, scraping simulated nodes on loopback.

:func:`running_prometheus` starts the ``prometheus`` binary (Debian's package, 2.42) on a free
loopback port with a generated config (1 s scrape and evaluation), its own data directory, and
waits (polling ``/api/v1/targets`` against a deadline) until every target is up. The apt
package's own service is never used.

Nodes are named: a target's ``instance`` label is rewritten to ``NODE:PORT`` (a ``node`` label
on the static config), so several loopback servers look like servers on several hosts.

:class:`FakeDcgm` serves hand-written dcgm-exporter series (``/metrics``) until the simulated
exporter lands.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

PROMETHEUS = shutil.which("prometheus")
SKIP_REASON = (
    "the prometheus binary is not installed (Debian: apt-get install -y prometheus; "
    ".ci/run installs it when it can)"
)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """One target: ``job``, ``127.0.0.1:port``, and the node it stands for."""

    job: str
    port: int
    node: str

    @property
    def instance(self) -> str:
        """The ``instance`` label Prometheus gives it (``node:port``)."""
        return f"{self.node}:{self.port}"


def prometheus_config(targets: Sequence[ScrapeTarget], interval_s: float = 1.0) -> dict[str, Any]:
    """The config: one scrape job per ``job``, instance relabelled to ``node:port``."""
    jobs: dict[str, list[dict[str, Any]]] = {}
    for t in targets:
        jobs.setdefault(t.job, []).append(
            {"targets": [f"127.0.0.1:{t.port}"], "labels": {"node": t.node}}
        )
    every = f"{round(interval_s * 1000)}ms"
    return {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "scrape_configs": [
            {
                "job_name": job,
                "scrape_interval": every,
                "scrape_timeout": every,
                "static_configs": statics,
                "relabel_configs": [
                    {
                        "source_labels": ["node", "__address__"],
                        "regex": "(.+);.+:(\\d+)",
                        "replacement": "$1:$2",
                        "target_label": "instance",
                    },
                    {"regex": "node", "action": "labeldrop"},
                ],
            }
            for job, statics in jobs.items()
        ],
    }


@dataclass
class PrometheusProcess:
    """A running Prometheus: its URL and process."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def targets(self) -> list[dict[str, Any]]:
        """Active targets as Prometheus reports them."""
        body = httpx.get(self.url + "/api/v1/targets", timeout=5).json()
        return list(body["data"]["activeTargets"])

    def wait(self, check: Any, what: str, deadline_s: float = 30.0) -> None:
        """Poll ``check()`` until true; fail with ``what`` and the log tail at the deadline."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.process.poll() is not None:
                break
            try:
                if check():
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.1)  # polling interval, not a stand-in for synchronisation
        tail = self.log.read_text(errors="replace")[-2000:]
        raise AssertionError(f"prometheus: {what} not reached in {deadline_s} s; log:\n{tail}")

    def samples(self, expr: str) -> int:
        """How many series an instant query returns now."""
        body = httpx.post(self.url + "/api/v1/query", data={"query": expr}, timeout=5).json()
        return len(body["data"]["result"])


@contextmanager
def running_prometheus(
    targets: Sequence[ScrapeTarget],
    data_dir: Path,
    interval_s: float = 1.0,
    extra: Mapping[str, Any] | None = None,
) -> Iterator[PrometheusProcess]:
    """Start Prometheus on a free loopback port; yield once every target is up; stop it.

    ``extra``: more top-level config (``rule_files``, ``alerting``).
    """
    assert PROMETHEUS is not None, SKIP_REASON
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "prometheus.yml"
    body = {**prometheus_config(targets, interval_s), **(extra or {})}
    config.write_text(json.dumps(body, indent=1))
    port = free_port()
    log = data_dir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={data_dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prom = PrometheusProcess(f"http://127.0.0.1:{port}", process, log)
    try:
        want = len(targets)

        def all_up() -> bool:
            active = prom.targets()
            return len(active) == want and all(t["health"] == "up" for t in active)

        prom.wait(all_up, f"{want} targets up")
        yield prom
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@dataclass
class FakeDcgm:
    """A hand-written dcgm-exporter ``/metrics`` on a loopback port (GPU label sets as real)."""

    hostname: str
    gpus: int = 2
    values: dict[str, float] = field(default_factory=dict)
    """Field -> value for every GPU (GPU ``i`` gets ``value + i`` for clocks/temperatures)."""
    port: int = 0
    _server: ThreadingHTTPServer | None = None

    def body(self) -> bytes:
        """The exposition text now."""
        lines: list[str] = []
        for name, value in self.values.items():
            lines.append(f"# TYPE {name} gauge")
            for i in range(self.gpus):
                labels = self.labels(i)
                text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
                shown = value if value >= 2**31 - 16 else value + i
                lines.append(f"{name}{{{text}}} {shown:.17g}")
        return ("\n".join(lines) + "\n").encode()

    def labels(self, i: int) -> Mapping[str, str]:
        """The exporter's labels of GPU ``i``."""
        return {
            "gpu": str(i),
            "UUID": f"GPU-{self.hostname}-{i:04d}",
            "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
            "device": f"nvidia{i}",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": self.hostname,
            "DCGM_FI_DRIVER_VERSION": "570.86.15",
        }

    def start(self) -> int:
        """Serve on a free loopback port; returns it."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                payload = owner.body()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.port

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


__all__ = [
    "PROMETHEUS",
    "SKIP_REASON",
    "FakeDcgm",
    "PrometheusProcess",
    "ScrapeTarget",
    "free_port",
    "prometheus_config",
    "running_prometheus",
]
