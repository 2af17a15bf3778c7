"""This host's CPU over a benchmark's runs: the figures between readings taken as each run
starts and ends and every ``interval_s`` between (:mod:`specwatch.sources.host`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from specwatch.core.host import HostSpan, combine_spans

if TYPE_CHECKING:
    from specwatch.sources.host import HostSampler

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
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def between(self, t0: float | None, t1: float | None) -> HostSpan | None:
        """The spans inside ``[t0, t1]`` (two :meth:`mark` times) pooled."""
        if t0 is None or t1 is None:
            return None
        slack = 1e-6
        inside = [s for a, b, s in self._spans if a >= t0 - slack and b <= t1 + slack]
        return combine_spans(inside)


__all__ = ["HostRecorder"]
