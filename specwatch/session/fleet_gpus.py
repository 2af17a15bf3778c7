"""A node's GPUs from Prometheus as the session's GPU source (the fleet screen's drill-in)."""

from __future__ import annotations

from collections.abc import Callable

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.session.events import GpuInventoryChanged, GpuTicked, SessionEvent
from specwatch.sources.prometheus.gpus import PrometheusGpuSampler


class PrometheusGpuSource:
    """The session's :class:`~specwatch.session.gpu_source.GpuSource` over a Prometheus sampler."""

    opening = "asking Prometheus for the node's GPUs…"

    def __init__(self, sampler: PrometheusGpuSampler) -> None:
        self.sampler = sampler
        self._emit: Callable[[SessionEvent], None] | None = None
        self._emitted: GpuInventory | None = None

    def start(self, emit: Callable[[SessionEvent], None]) -> None:
        """Poll once, emit the inventory, then tick on the sampler's thread."""
        self._emit = emit
        self._emitted = self.sampler.open()
        emit(GpuInventoryChanged(self._emitted))
        self.sampler.on_tick = self._on_tick
        self.sampler.start()

    def _on_tick(self, tick: GpuTick) -> None:
        emit, inventory = self._emit, self.sampler.inventory
        if emit is None:
            return
        if inventory is not None and inventory != self._emitted:
            self._emitted = inventory
            emit(GpuInventoryChanged(inventory))
        emit(GpuTicked(tick))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop polling."""
        self.sampler.stop(timeout_s)

    def set_interval(self, interval_s: float) -> None:
        """Change the time between polls."""
        self.sampler.set_interval(interval_s)


__all__ = ["PrometheusGpuSource"]
