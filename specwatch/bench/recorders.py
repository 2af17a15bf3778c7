"""What a benchmark records beside its runs: the GPU ticks, with their per-GPU summaries, and
this host's CPU (the figures between readings taken as each run starts and ends and every
``interval_s`` between, :mod:`specwatch.sources.host`)."""

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
from typing import TYPE_CHECKING

from specwatch.core.host import HostSpan, combine_spans

if TYPE_CHECKING:
    from specwatch.sources.host import HostSampler


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
        await _cancel(self._task)
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


# --- this host's CPU over the runs ------------------------------------------------------------


MAX_SPANS = 100_000
"""Spans kept (a day of readings at one a second)."""


class HostRecorder:
    """Drives a :class:`~specwatch.sources.host.HostSampler` off the event loop and keeps the
    spans between its readings, to pool them over a run.

    Args:
        sampler: ``None``: nothing is recorded.
        interval_s: Seconds between readings inside a run (the run queue is an instant figure).
    """

    def __init__(self, sampler: HostSampler | None, interval_s: float = 1.0) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self._spans: list[tuple[float, float, HostSpan]] = []
        self._task: asyncio.Task[None] | None = None
        self._reading = asyncio.Lock()

    async def mark(self, force_scan: bool = True) -> float | None:
        """Read now (scanning the processes when a second passed since the last scan).

        Returns:
            The reading's time on the sampler's clock; ``None`` without a sampler.
        """
        s = self.sampler
        if s is None:
            return None
        async with self._reading:  # the loop's and a run's readings, one at a time
            span = await asyncio.to_thread(s.sample, force_scan)
            now = s.last_t
        if span is not None and now is not None:
            self._spans.append((now - span.duration_s, now, span))
            del self._spans[:-MAX_SPANS]
        return now

    async def start(self) -> None:
        """The first reading, then one every ``interval_s`` until :meth:`stop`."""
        if self.sampler is None:
            return
        await self.mark()
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.mark(force_scan=False)

    async def stop(self) -> None:
        """Stop the periodic readings."""
        await _cancel(self._task)
        self._task = None

    def between(self, t0: float | None, t1: float | None) -> HostSpan | None:
        """The spans inside ``[t0, t1]`` (two :meth:`mark` times) pooled."""
        if t0 is None or t1 is None:
            return None
        slack = 1e-6
        inside = [s for a, b, s in self._spans if a >= t0 - slack and b <= t1 + slack]
        return combine_spans(inside)


async def _cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` and wait until it has ended (``None``: nothing runs)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


__all__ = ["GpuRecorder", "HostRecorder"]
