"""One node's GPUs read from Prometheus, with the GPU sampler's surface.

:class:`PrometheusGpuSampler` answers ``open``/``sample``/``start``/``stop``/``ticks_since`` as
the NVML and dcgm-exporter samplers do, so a benchmark records the benchmarked server's GPUs
from Prometheus in its per-run summaries (and ``compare`` reads them as any other), and the
fleet screen's drill-in shows a node's GPUs without reaching its exporter. Each poll is one
instant query (the fleet's GPU query), narrowed to the node's GPUs by :attr:`select`, on one
event loop and one kept-alive client for the sampler's life (a loop and a client per poll cost
more than the query).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from specwatch.core.fleet import FleetGpu, FleetServer, join_gpus, target_of
from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import Dialect, MetricsWindow
from specwatch.sources.gpu_reader import GpuTickHistory, TickLoop
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.prometheus.api import PrometheusClient
from specwatch.sources.prometheus.queries import derive_gpus, gpu_query, label_matcher

_T = TypeVar("_T")
Select = Callable[[Sequence[FleetGpu]], Sequence[FleetGpu]]


def gpus_with_keys(keys: Sequence[str]) -> Select:
    """A selection of exactly these :attr:`FleetGpu.key` values (a fleet join's answer)."""
    wanted = set(keys)
    return lambda gpus: [g for g in gpus if g.key in wanted]


def gpus_of_server(url: str, pairs: Sequence[tuple[str, str]] = ()) -> Select:
    """The GPUs a server at ``url`` runs on, joined as the fleet joins them (pair, host)."""
    server = FleetServer(target_of(url), "", Dialect.OPENAI, None, MetricsWindow(t=0.0, dt=0.0))

    def select(gpus: Sequence[FleetGpu]) -> Sequence[FleetGpu]:
        (join,) = join_gpus([server], gpus, pairs)
        return gpus_with_keys(join.gpus)(gpus)

    return select


class PrometheusGpuSampler(TickLoop):
    """A node's GPUs from Prometheus, numbered 0.. in key order, as ticks.

    Args:
        endpoint: The Prometheus (from ``prometheus_endpoint``).
        select: Which GPUs (:func:`gpus_with_keys`, :func:`gpus_of_server`).
        gpu_match: A label matcher narrowing the query (``--gpu-match``).
        interval_s: Seconds between background polls.
        clock: Monotonic seconds for tick timestamps (the benchmark's clock).
        history: How many ticks are kept.
        on_tick: Called on the poller thread after each background tick; an exception from it
            is kept in ``callback_error``, and polling goes on.
    """

    thread_name = "specwatch-prom-gpu"

    def __init__(
        self,
        endpoint: Endpoint,
        select: Select,
        gpu_match: str | None = None,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        history: int = 3600,
        on_tick: Callable[[GpuTick], None] | None = None,
    ) -> None:
        super().__init__(interval_s, on_tick)
        self.endpoint = endpoint
        self.select = select
        self.query = gpu_query(label_matcher(gpu_match))
        self.clock = clock
        self.inventory: GpuInventory | None = None
        self.latest: GpuTick | None = None
        self.history: GpuTickHistory = GpuTickHistory(history)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: PrometheusClient | None = None

    def _poll(self) -> GpuTick:
        started = time.perf_counter()
        t = self.clock()
        error: str | None = None
        gpus: Sequence[FleetGpu] = ()
        try:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            gpus = self._loop.run_until_complete(self._read(t))
        except Exception as exc:  # Prometheus down: a tick that says so, never a raise
            error = sanitize_line(str(exc), 400) or type(exc).__name__
        ordered = sorted(gpus, key=lambda g: g.key)
        samples: list[GpuSample] = []
        statics = []
        for i, g in enumerate(ordered):
            statics.append(_with_index(g.static, i))
            samples.append(_with_index(g.sample, i))
        if ordered or self.inventory is None:
            reason = None if ordered else (error or "no GPUs of this node in Prometheus")
            inventory = GpuInventory(available=bool(ordered), reason=reason, gpus=tuple(statics))
            if inventory != self.inventory:
                self.inventory = inventory
        cost = (time.perf_counter() - started) * 1000.0
        return GpuTick(t, time.time(), tuple(samples), cost, error)

    async def _read(self, t: float) -> Sequence[FleetGpu]:
        if self._client is None:
            self._client = PrometheusClient(self.endpoint)
        return self.select(derive_gpus(await self._client.query(self.query), t))

    def _close_locked(self) -> None:
        loop, client = self._loop, self._client
        self._loop = self._client = None
        if loop is None:
            return

        def close() -> None:
            if client is not None:
                # Nothing useful can be done about a client that fails to close.
                with contextlib.suppress(Exception):
                    loop.run_until_complete(client.aclose())
            loop.close()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            close()
            return
        # Stopped from a running event loop (the TUI's): another loop cannot run on this
        # thread, so the kept connection is closed on a short thread of its own.
        closer = threading.Thread(target=close, name="specwatch-prom-gpu-close", daemon=True)
        closer.start()
        closer.join(5.0)

    def open(self) -> GpuInventory:
        """Poll once and number the node's GPUs. Never raises."""
        with self._lock:
            self._poll()
        assert self.inventory is not None
        return self.inventory

    def sample(self) -> GpuTick:
        """Poll now on the calling thread and keep the tick. Never raises."""
        with self._lock:
            tick = self._poll()
            self.latest = tick
            self.history.append(tick)
        return tick

    def ticks_since(self, t: float) -> list[GpuTick]:
        """Kept ticks at or after ``t``."""
        return [k for k in self.history if k.t >= t]

    def start(self) -> None:
        """Poll on a daemon thread every :attr:`interval_s` (never overlapping); unlike the
        other readers it does not :meth:`open` first: the thread's first poll does."""
        if self.running:
            return
        self._stop.clear()
        self._wake.clear()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread and close the kept connection. Safe to call repeatedly.

        A later ``sample()`` or ``start()`` opens a new one.
        """
        if not self._end_thread(timeout_s):
            return
        with self._lock:
            self._close_locked()


def _with_index(value: _T, index: int) -> _T:
    return replace(value, index=index)  # type: ignore[type-var]


__all__ = ["PrometheusGpuSampler", "gpus_of_server", "gpus_with_keys"]
