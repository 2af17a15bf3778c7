"""The shape of every GPU reader: NVML (``GpuSampler``) and dcgm-exporter (``DcgmGpuSource``).

A benchmark, a probe and the live session only use what this protocol names, so either reader
can stand behind them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from specwatch.core.gpu import GpuInventory, GpuTick


class GpuReader(Protocol):
    """Opens to an inventory, samples ticks (on demand or on its own thread), keeps a history."""

    inventory: GpuInventory | None
    """What ``open()`` found, refreshed when fixed data changes."""
    on_tick: Callable[[GpuTick], None] | None
    """Called on the reader's thread after each background tick."""

    def open(self) -> GpuInventory:
        """Find the GPUs; never raises."""
        ...

    def sample(self) -> GpuTick:
        """One tick now, on the calling thread; never raises."""
        ...

    def start(self) -> None:
        """Sample on a background thread."""
        ...

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread and release the reader."""
        ...

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        ...

    def set_interval(self, interval_s: float) -> None:
        """Change the time between background ticks."""
        ...

    def ticks_since(self, t: float) -> list[GpuTick]:
        """Ticks with ``tick.t >= t``, oldest first."""
        ...


__all__ = ["GpuReader"]
