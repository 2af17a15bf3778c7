"""The GPU ticks a benchmark records, and their per-GPU summaries."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specwatch.core.gpu import GpuInventory, GpuTick

if TYPE_CHECKING:
    from specwatch.core.gpu_summary import GpuRunSummary
    from specwatch.sources.gpu_reader import GpuReader


class GpuRecorder:
    """GPU ticks over the benchmark, from the sampler's history.

    A sampler that is already running (the TUI's) is only read; an idle one is driven here
    every ``interval_s``. Either way one extra tick is taken as each run starts decoding, so a
    run shorter than the sampling period still gets a reading under load.
    """

    def __init__(self, sampler: GpuReader | None, interval_s: float) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self.inventory: GpuInventory | None = None

    @property
    def active(self) -> bool:
        """Whether there are GPUs to record."""
        return self.sampler is not None and self.inventory is not None and self.inventory.available

    async def start(self) -> None:
        """Open the sampler if needed; drive it here when nobody else does."""
        s = self.sampler
        if s is None:
            return
        self.inventory = s.inventory or await asyncio.to_thread(s.open)
        if self.active and not s.running:
            self._task = asyncio.create_task(self._loop(s))

    async def _loop(self, s: GpuReader) -> None:
        while True:
            started = time.monotonic()
            await asyncio.to_thread(s.sample)
            # The next tick is scheduled only after this one finished: ticks never pile up.
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    async def sample_now(self) -> None:
        """Take one extra tick now (off the event loop)."""
        if self.active and self.sampler is not None:
            await asyncio.to_thread(self.sampler.sample)

    async def stop(self) -> None:
        """Stop driving the sampler (a sampler someone else runs is left alone)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def ticks(self, t0: float, t1: float) -> list[GpuTick]:
        """The recorded ticks in ``[t0, t1]``, oldest first."""
        if not self.active or self.sampler is None:
            return []
        return sorted((k for k in self.sampler.ticks_since(t0) if k.t <= t1), key=lambda k: k.t)

    def summarize(self, ticks: Sequence[GpuTick], tokens: int | None) -> tuple[GpuRunSummary, ...]:
        """Per-GPU summaries of ``ticks`` (already narrowed to the busy samples)."""
        if not ticks or self.inventory is None:
            return ()
        from specwatch.core.gpu_summary import summarize_ticks

        # The sampler refreshes slow static fields; its latest inventory names them best.
        inventory = (self.sampler.inventory if self.sampler else None) or self.inventory
        return summarize_ticks(ticks, inventory, tokens)
