"""Where a session's GPU readings come from, behind one small protocol.

A source is started with an ``emit`` callback and from then on emits
:class:`~specwatch.session.events.GpuInventoryChanged` (first when it opens, then on every change
of fixed data) and :class:`~specwatch.session.events.GpuTicked`. Local NVML is the one source
today; a remote dcgm-exporter or Prometheus source is one more class with the same three methods.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.session.events import GpuInventoryChanged, GpuTicked, SessionEvent

if TYPE_CHECKING:
    from specwatch.sources.nvml import GpuSampler

Emit = Callable[[SessionEvent], None]


class GpuSource(Protocol):
    """A source of GPU inventory and ticks."""

    def start(self, emit: Emit) -> None:
        """Open the source and start ticking; blocking (call from a thread). Never raises."""
        ...

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop ticking and release the source; safe to call repeatedly."""
        ...

    def set_interval(self, interval_s: float) -> None:
        """Change the time between ticks."""
        ...


class NvmlGpuSource:
    """The local GPUs through NVML, sampled on the sampler's own thread.

    After each tick the sampler's inventory is compared with the one last emitted, so a power
    limit, a maximum clock or a PCIe maximum that changed reaches subscribers as a new inventory,
    before the tick that first saw it.

    Args:
        interval_s: Seconds between ticks.
        nvml: The NVML module (``None``: the real ``pynvml``; the demo and tests: ``FakeNvml``).
        clock: Monotonic seconds for tick timestamps (the session's clock).
    """

    def __init__(
        self,
        interval_s: float = 1.0,
        nvml: object | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from specwatch.sources.nvml import GpuSampler

        self.sampler: GpuSampler = GpuSampler(
            interval_s=interval_s, nvml=nvml, on_tick=self._on_tick, clock=clock
        )
        """The sampler; a benchmark reads its history for per-run GPU summaries."""
        self._emit: Emit | None = None
        self._emitted: GpuInventory | None = None
        self._stopped = False

    def start(self, emit: Emit) -> None:
        """Open NVML, emit the inventory, start the sampler thread when there are GPUs."""
        self._emit = emit
        try:
            inventory = self.sampler.open()
        except Exception as e:  # open() should never raise; if it does, say why and carry on
            inventory = GpuInventory(available=False, reason=f"NVML failed: {e}")
        self._emitted = inventory
        emit(GpuInventoryChanged(inventory))
        if inventory.available and not self._stopped:
            self.sampler.start()

    def _on_tick(self, tick: GpuTick) -> None:
        emit = self._emit
        if emit is None or self._stopped:
            return
        inventory = self.sampler.inventory
        if inventory is not None and inventory != self._emitted:
            self._emitted = inventory
            emit(GpuInventoryChanged(inventory))
        emit(GpuTicked(tick))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the sampler thread and shut NVML down."""
        self._stopped = True
        with contextlib.suppress(Exception):
            self.sampler.stop(timeout_s=timeout_s)

    def set_interval(self, interval_s: float) -> None:
        """Change the sampling interval (applies to the wait in progress)."""
        self.sampler.set_interval(interval_s)


class NoGpus:
    """A source that only says GPU sampling is off."""

    def __init__(self, reason: str = "GPU sampling disabled") -> None:
        self.reason = reason

    def start(self, emit: Emit) -> None:
        """Emit an unavailable inventory."""
        emit(GpuInventoryChanged(GpuInventory(available=False, reason=self.reason)))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Nothing to stop."""

    def set_interval(self, interval_s: float) -> None:
        """Nothing ticks."""
