"""One server's poller: wait for it, identify it, then scrape ``/metrics`` at an interval.

The next scrape is scheduled only after the previous one finished, so polls never overlap, and
the poller waits (saying so) whenever the server is down or loading. Nothing here raises into
the session: a failed scrape becomes an event.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import ServerInfo
from specwatch.session.events import (
    MetricsScraped,
    ServerIdentified,
    ServerLost,
    ServerReady,
    ServerWaiting,
    SessionEvent,
)
from specwatch.sources.http.endpoint import Endpoint

if TYPE_CHECKING:
    from specwatch.core.identity import ServerIdentity
    from specwatch.sources.detect import WaitStatus
    from specwatch.sources.watch.watcher import MetricsWatcher

LOST_AFTER = 3
"""Consecutive failed scrapes, with the server also failing detection, before it counts as lost."""
HEALTH_EVERY_S = 5.0
"""How often a server without usable ``/metrics`` is checked for life."""
RETRY_FATAL_S = 10.0
"""After an error waiting cannot fix (a rejected key), try again this much later."""


class ServerPoller:
    """Waits for the server, identifies it, then scrapes ``/metrics`` at an interval.

    Args:
        endpoint: Where the server is (the API key stays inside it, never printed).
        emit: Where events go.
        interval_s: Seconds between the end of one scrape and the start of the next.
        clock: Monotonic seconds, shared with the GPU source so both land on one time axis.
        timeout_s: Per-request timeout for the HTTP client.
        server: This endpoint's index in the session (carried by every event).
        deadline_s: Wall-clock limit of each request (a server dripping a byte a second, or
            an endless ``/metrics``, must not hold the monitor).
        identify: Reads the code identity of the server at a base URL (blocking; run on a
            thread of its own once per ready, then a ``ServerIdentified`` event); ``None``:
            not read (an in-process demo server would be identified as ourselves).

    Every text it emits is sanitised (server errors already are; anything else here).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        emit: Callable[[SessionEvent], None],
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = 5.0,
        server: int = 0,
        deadline_s: float | None = None,
        identify: Callable[[str, ServerInfo], ServerIdentity] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.emit = emit
        self.interval_s = interval_s
        self.clock = clock
        self.timeout_s = timeout_s
        self.server = server
        if deadline_s is None:
            # httpx (and with it its CLI's rich) loads with the client: not before a poll starts
            from specwatch.sources.http.client import POLL_DEADLINE_S

            deadline_s = POLL_DEADLINE_S
        self.deadline_s = deadline_s
        self.identify = identify
        self.info: ServerInfo | None = None
        """The server as last detected; ``None`` while waiting."""
        self._watcher: MetricsWatcher | None = None
        """Kept across reconnections: its last scrape tells a restart (counters went back)
        from a network blip, so a restart gets its mark on the graph."""

    def set_interval(self, interval_s: float) -> None:
        """Change the scrape interval; takes effect after the current wait."""
        self.interval_s = interval_s

    def _on_attempt(self, status: WaitStatus) -> None:
        self.emit(
            ServerWaiting(
                self.clock(),
                status.state,
                status.attempt,
                status.elapsed_s,
                status.detail,
                self.server,
            )
        )

    async def run(self) -> None:
        """Poll until cancelled."""
        from specwatch.sources.detect import wait_ready
        from specwatch.sources.http.client import ServerClient

        async with ServerClient(
            self.endpoint, timeout_s=self.timeout_s, deadline_s=self.deadline_s
        ) as client:
            while True:
                self.info = None
                try:
                    info = await wait_ready(client, on_attempt=self._on_attempt)
                except Exception as e:  # wrong key, TLS: waiting cannot fix it, but keep trying
                    self.emit(ServerLost(self.clock(), _why(e), self.server))
                    await asyncio.sleep(RETRY_FATAL_S)
                    continue
                self.info = info
                self.emit(ServerReady(self.clock(), info, self.server))
                self._identify(info)
                if info.metrics_enabled is False:
                    reason = await self._health_loop(client)
                else:
                    reason = await self._scrape_loop(client, info)
                self.info = None
                self.emit(ServerLost(self.clock(), reason, self.server))

    def _identify(self, info: ServerInfo) -> None:
        """Read the server's identity on a daemon thread (``/proc`` and git can take seconds)."""
        identify = self.identify
        if identify is None:
            return

        def work() -> None:
            try:
                identity = identify(self.endpoint.base_url, info)
            except Exception:  # an identity is extra information: never a reason to fail
                return
            self.emit(ServerIdentified(self.clock(), identity, self.server))

        threading.Thread(target=work, name=f"specwatch-identify-{self.server}", daemon=True).start()

    async def _scrape_loop(self, client: object, info: ServerInfo) -> str:
        from specwatch.sources.detect import detect
        from specwatch.sources.watch.watcher import MetricsWatcher

        watcher = self._watcher
        if watcher is None or watcher.info.dialect is not info.dialect:
            watcher = MetricsWatcher(client, info, clock=self.clock)  # type: ignore[arg-type]
            self._watcher = watcher
        else:
            watcher.info = info
        failures = 0
        while True:
            window = await watcher.scrape()
            self.emit(MetricsScraped(window, self.server))
            error = window.notes.get("error")
            if error:
                failures += 1
                if failures >= LOST_AFTER:
                    try:
                        await detect(client)  # type: ignore[arg-type]
                    except Exception as e:  # detection failing is the signal we look for
                        return _why(e) if str(e) else error
                    failures = 0
            else:
                failures = 0
            await asyncio.sleep(self.interval_s)

    async def _health_loop(self, client: object) -> str:
        from specwatch.sources.detect import detect

        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            try:
                await detect(client)  # type: ignore[arg-type]
            except Exception as e:  # any failure means the server is gone for now
                return _why(e)


def _why(exc: BaseException) -> str:
    """One sanitised line for an exception."""
    return sanitize_line(str(exc) or type(exc).__name__, 600)
