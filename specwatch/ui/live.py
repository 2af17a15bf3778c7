"""The live sources behind the app: a GPU sampler thread and an async server poller.

Both only post messages; neither touches a widget. The poller schedules its next scrape only
after the previous one finished, so polls never overlap, and it waits (saying so) whenever the
server is down or loading. Nothing here raises into the app: a failed sample becomes a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.server import ServerInfo
from specwatch.sources.endpoint import Endpoint
from specwatch.ui.messages import (
    GpuInventoryFound,
    GpuTicked,
    MetricsScraped,
    ServerLost,
    ServerReady,
    ServerWaiting,
)

if TYPE_CHECKING:
    from specwatch.sim.demo import Demo
    from specwatch.sources.detect import WaitStatus
    from specwatch.sources.metrics import MetricsWatcher
    from specwatch.sources.nvml import GpuSampler

Post = Callable[[Message], object]

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
        post: Where messages go (``App.post_message``).
        interval_s: Seconds between the end of one scrape and the start of the next.
        clock: Monotonic seconds, shared with the GPU sampler so both land on one time axis.
        timeout_s: Per-request timeout for the HTTP client.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        post: Post,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = 5.0,
    ) -> None:
        self.endpoint = endpoint
        self.post = post
        self.interval_s = interval_s
        self.clock = clock
        self.timeout_s = timeout_s
        self.info: ServerInfo | None = None
        """The server as last detected; ``None`` while waiting."""
        self._wake = asyncio.Event()
        self._watcher: MetricsWatcher | None = None
        """Kept across reconnections: its last scrape tells a restart (counters went back)
        from a network blip, so a restart gets its mark on the graph."""

    def set_interval(self, interval_s: float) -> None:
        """Change the scrape interval; takes effect after the current wait."""
        self.interval_s = interval_s

    def _on_attempt(self, status: WaitStatus) -> None:
        self.post(
            ServerWaiting(
                self.clock(), status.state, status.attempt, status.elapsed_s, status.detail
            )
        )

    async def run(self) -> None:
        """Poll until cancelled."""
        from specwatch.sources.client import ServerClient
        from specwatch.sources.detect import wait_ready

        async with ServerClient(self.endpoint, timeout_s=self.timeout_s) as client:
            while True:
                self.info = None
                try:
                    info = await wait_ready(client, on_attempt=self._on_attempt)
                except Exception as e:  # wrong key, TLS: waiting cannot fix it, but keep trying
                    self.post(ServerLost(self.clock(), str(e) or type(e).__name__))
                    await asyncio.sleep(RETRY_FATAL_S)
                    continue
                self.info = info
                self.post(ServerReady(self.clock(), info))
                if info.metrics_enabled is False:
                    reason = await self._health_loop(client, info)
                else:
                    reason = await self._scrape_loop(client, info)
                self.info = None
                self.post(ServerLost(self.clock(), reason))

    async def _scrape_loop(self, client: object, info: ServerInfo) -> str:
        from specwatch.sources.detect import detect
        from specwatch.sources.metrics import MetricsWatcher

        watcher = self._watcher
        if watcher is None or watcher.info.dialect is not info.dialect:
            watcher = MetricsWatcher(client, info, clock=self.clock)  # type: ignore[arg-type]
            self._watcher = watcher
        else:
            watcher.info = info
        failures = 0
        while True:
            window = await watcher.scrape()
            self.post(MetricsScraped(window))
            error = window.notes.get("error")
            if error:
                failures += 1
                if failures >= LOST_AFTER:
                    try:
                        await detect(client)  # type: ignore[arg-type]
                    except Exception as e:  # detection failing is the signal we look for
                        return str(e) or error
                    failures = 0
            else:
                failures = 0
            await asyncio.sleep(self.interval_s)

    async def _health_loop(self, client: object, info: ServerInfo) -> str:
        from specwatch.sources.detect import detect

        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            try:
                await detect(client)  # type: ignore[arg-type]
            except Exception as e:  # any failure means the server is gone for now
                return str(e) or type(e).__name__


class LiveSources:
    """The GPU sampler and the server poller of one app session (and the demo, if any).

    Args:
        endpoint: The server, or ``None`` to watch GPUs only.
        nvml: The NVML module to sample (``None``: the real ``pynvml``; the demo: ``FakeNvml``).
        interval_s: Seconds between GPU ticks.
        metrics_interval_s: Seconds between scrapes.
        demo: The in-process demo to stop on exit.
        gpus: Whether to sample GPUs at all.
        timeout_s: Per-request HTTP timeout (a hung server is noticed after this long).
    """

    def __init__(
        self,
        endpoint: Endpoint | None,
        nvml: object | None = None,
        interval_s: float = 1.0,
        metrics_interval_s: float = 1.0,
        demo: Demo | None = None,
        gpus: bool = True,
        timeout_s: float = 5.0,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.metrics_interval_s = metrics_interval_s
        self.demo = demo
        self.poller: ServerPoller | None = None
        self._post: Post | None = None
        self._stopped = threading.Event()
        self.sampler: GpuSampler | None = None
        if gpus:
            from specwatch.sources.nvml import GpuSampler

            self.sampler = GpuSampler(interval_s=interval_s, nvml=nvml, on_tick=self._relay)

    def _relay(self, tick: GpuTick) -> None:
        post = self._post
        if post is not None and not self._stopped.is_set():
            post(GpuTicked(tick))

    def open_gpus(self, post: Post) -> None:
        """Open NVML and start the sampler thread (call from a thread: nvmlInit can be slow)."""
        self._post = post
        sampler = self.sampler
        if sampler is None:
            post(GpuInventoryFound(GpuInventory(available=False, reason="GPU sampling disabled")))
            return
        try:
            inventory = sampler.open()
        except Exception as e:  # open() should never raise; if it does, say why and carry on
            inventory = GpuInventory(available=False, reason=f"NVML failed: {e}")
        post(GpuInventoryFound(inventory))
        if not inventory.available or self._stopped.is_set():
            return
        sampler.start()

    def make_poller(self, post: Post) -> ServerPoller | None:
        """The server poller (run it in an async worker), or ``None`` without a server."""
        if self.endpoint is None:
            return None
        self.poller = ServerPoller(
            self.endpoint, post, self.metrics_interval_s, timeout_s=self.timeout_s
        )
        return self.poller

    def set_interval(self, interval_s: float) -> None:
        """Change the GPU and scrape intervals together."""
        if self.sampler is not None:
            self.sampler.set_interval(interval_s)
        if self.poller is not None:
            self.poller.set_interval(interval_s)

    def stop(self) -> None:
        """Stop the sampler thread and the demo (the poller dies with its worker)."""
        self._stopped.set()
        if self.sampler is not None:
            with contextlib.suppress(Exception):
                self.sampler.stop()
        if self.demo is not None:
            with contextlib.suppress(Exception):
                self.demo.stop()
