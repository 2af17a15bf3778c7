"""One node's GPUs read from Prometheus, with the GPU sampler's surface.

:class:`PrometheusGpuSampler` answers ``open``/``sample``/``start``/``stop``/``ticks_since`` as
the NVML and dcgm-exporter samplers do, so a benchmark records the benchmarked server's GPUs
from Prometheus in its per-run summaries (and ``compare`` reads them as any other), and the
fleet screen's drill-in shows a node's GPUs without reaching its exporter. Each poll is one
instant query (the fleet's GPU query), narrowed to the node's GPUs by :attr:`select`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from specwatch.core.fleet import FleetGpu, FleetServer, join_gpus, target_of
from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick
from specwatch.core.ring import Ring
from specwatch.core.server import Dialect, MetricsWindow
from specwatch.sources.endpoint import Endpoint
from specwatch.sources.prometheus_api import PrometheusClient
from specwatch.sources.prometheus_queries import derive_gpus, gpu_query, label_matcher

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


class PrometheusGpuSampler:
    """A node's GPUs from Prometheus, numbered 0.. in key order, as ticks.

    Args:
        endpoint: The Prometheus (from ``prometheus_endpoint``).
        select: Which GPUs (:func:`gpus_with_keys`, :func:`gpus_of_server`).
        gpu_match: A label matcher narrowing the query (``--gpu-match``).
        interval_s: Seconds between background polls.
        clock: Monotonic seconds for tick timestamps (the benchmark's clock).
        history: How many ticks are kept.
        on_tick: Called on the poller thread after each background tick.
    """

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
        self.endpoint = endpoint
        self.select = select
        self.query = gpu_query(label_matcher(gpu_match))
        self.interval_s = interval_s
        self.clock = clock
        self.on_tick = on_tick
        self.inventory: GpuInventory | None = None
        self.latest: GpuTick | None = None
        self.history: Ring[GpuTick] = Ring(history)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _poll(self) -> GpuTick:
        started = time.perf_counter()
        t = self.clock()
        error: str | None = None
        gpus: Sequence[FleetGpu] = ()
        try:
            gpus = asyncio.run(self._read(t))
        except Exception as exc:  # Prometheus down: a tick that says so, never a raise
            error = str(exc)[:300] or type(exc).__name__
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
        async with PrometheusClient(self.endpoint) as client:
            return self.select(derive_gpus(await client.query(self.query), t))

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

    @property
    def running(self) -> bool:
        """Whether the background thread polls."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Poll on a daemon thread every :attr:`interval_s` (never overlapping)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="specwatch-prom-gpu", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            tick = self.sample()
            if self.on_tick is not None:
                self.on_tick(tick)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def set_interval(self, interval_s: float) -> None:
        """Change the time between polls."""
        self.interval_s = interval_s


def _with_index(value: _T, index: int) -> _T:
    return replace(value, index=index)  # type: ignore[type-var]


__all__ = ["PrometheusGpuSampler", "gpus_of_server", "gpus_with_keys"]
