"""Serve a live session's series on ``/metrics`` until told to stop.

``prometheus_client``'s own HTTP server on its own thread; the session runs on the asyncio loop
of :func:`run_exporter`. SIGTERM, SIGHUP and SIGINT end it cleanly (a recording is closed whole
by the caller).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import start_http_server
from prometheus_client.process_collector import ProcessCollector

from specwatch.exporter.families import SessionCollector
from specwatch.exporter.readings import Readings

if TYPE_CHECKING:
    from specwatch.session.live import LiveSession


@dataclass
class Exporter:
    """A session's readings, their collector and the registry the HTTP server serves."""

    readings: Readings
    collector: SessionCollector
    registry: CollectorRegistry

    @classmethod
    def of(cls, session: LiveSession, plain_s: float | None = None) -> Exporter:
        """Subscribe to ``session`` and register its series, plus this process's own CPU and
        memory (``process_cpu_seconds_total``)."""
        readings = Readings(session.endpoints)
        session.subscribe(readings)
        registry = CollectorRegistry(auto_describe=False)
        collector = SessionCollector(readings.view, plain_s)
        registry.register(collector)
        ProcessCollector(registry=registry)
        return cls(readings, collector, registry)

    def serve(self, host: str, port: int) -> tuple[Any, int]:
        """Serve ``/metrics`` on ``host:port`` (0: a free port) on a thread; returns the HTTP
        server (``shutdown()`` to stop) and the port it listens on."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
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
