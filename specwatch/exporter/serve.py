"""Serve a live session's series on ``/metrics`` until told to stop.

``prometheus_client``'s WSGI app served by the standard library's threading WSGI server, as
``prometheus_client.start_http_server`` does, but with a listen backlog for a fleet's scrapers
(that function leaves the standard library's 5, and a burst of scrapers beyond it waits for
SYN retries) and a timeout on idle connections (it has none: a client that connects and sends
nothing holds a thread for ever). The session runs on the asyncio loop of :func:`run_exporter`.
SIGTERM, SIGHUP and SIGINT end it cleanly (a recording is closed whole by the caller).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.process_collector import ProcessCollector

from specwatch.core.goodput import DEFAULT_SLO, Slo
from specwatch.exporter.families import SessionCollector
from specwatch.exporter.readings import Readings
from specwatch.session.gpu_source import NoGpus

if TYPE_CHECKING:
    from specwatch.session.live import LiveSession


LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the server accepts them (capped by ``somaxconn``)."""
IDLE_TIMEOUT_S = 10.0
"""A connection that sends nothing for this long is closed (each read and write)."""


class _QuietHandler(WSGIRequestHandler):
    timeout = IDLE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing (a scrape every few seconds is not news)."""


class _ScrapeServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went quiet or away is no error of ours: no traceback."""


def _server_for(host: str) -> type[_ScrapeServer]:
    family = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]
    return type("ScrapeServer", (_ScrapeServer,), {"address_family": family})


@dataclass
class Exporter:
    """A session's readings, their collector and the registry the HTTP server serves."""

    readings: Readings
    collector: SessionCollector
    registry: CollectorRegistry

    @classmethod
    def of(
        cls, session: LiveSession, plain_s: float | None = None, slo: Slo = DEFAULT_SLO
    ) -> Exporter:
        """Subscribe to ``session`` and register its series, plus this process's own CPU and
        memory (``process_cpu_seconds_total``); goodput is counted against ``slo``."""
        interval = session.pollers[0].interval_s if session.pollers else 1.0
        off = isinstance(session.gpus, NoGpus)
        readings = Readings(session.endpoints, slo=slo, interval_s=interval, gpus_off=off)
        session.subscribe(readings)
        registry = CollectorRegistry(auto_describe=False)
        collector = SessionCollector(readings.view, plain_s)
        registry.register(collector)
        ProcessCollector(registry=registry)
        return cls(readings, collector, registry)

    def serve(
        self, host: str, port: int, idle_timeout_s: float = IDLE_TIMEOUT_S
    ) -> tuple[Any, int]:
        """Serve ``/metrics`` on ``host:port`` (0: a free port) on a thread; returns the HTTP
        server (``shutdown()`` to stop) and the port it listens on. A connection silent for
        ``idle_timeout_s`` is closed.

        Raises:
            OSError: The address cannot be bound (in use, not this host's).
        """
        handler = type("Handler", (_QuietHandler,), {"timeout": idle_timeout_s})
        server = _server_for(host)((host, port), handler)
        server.set_app(make_wsgi_app(self.registry))
        threading.Thread(
            target=server.serve_forever, name="specwatch-exporter", daemon=True
        ).start()
        return server, int(server.server_address[1])


async def run_until_signal(
    session: LiveSession,
    stop_requested: Callable[[], bool] = lambda: False,
    duration_s: float | None = None,
) -> str:
    """Run ``session`` until SIGTERM/SIGHUP/SIGINT, ``stop_requested()`` or ``duration_s``.

    Returns:
        Why it stopped (``"SIGTERM"``, ``"duration"``, ``"stopped"``).
    """
    done = asyncio.Event()
    why: list[str] = []
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):

        def on_signal(name: str = sig.name) -> None:
            why.append(name)
            done.set()

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal)
    end = None if duration_s is None else loop.time() + duration_s
    try:
        async with session:
            while not done.is_set():
                if stop_requested():
                    return "stopped"
                left = 0.5 if end is None else min(0.5, end - loop.time())
                if left <= 0:
                    return "duration"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), left)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
    return why[0] if why else "signal"


__all__ = ["Exporter", "run_until_signal"]
