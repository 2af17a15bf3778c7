"""Clocks for the simulator: real monotonic time, or the same time run faster."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """What the simulator needs of time."""

    free_running: bool
    """Whether time passes by itself (``False``: only a test moves it, so the server keeps no
    background ticker and answers carry reproducible Unix times)."""

    def now(self) -> float:
        """Seconds on this clock."""
        ...

    async def sleep_until(self, t: float) -> None:
        """Return once ``now() >= t``."""
        ...


class RealClock:
    """Monotonic wall time."""

    free_running = True

    def now(self) -> float:
        """Seconds from ``time.monotonic``."""
        return time.monotonic()

    async def sleep_until(self, t: float) -> None:
        """Sleep on the running loop until ``t``."""
        delay = t - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class ScaledClock:
    """Monotonic wall time run ``factor`` times faster: minutes of a simulated story in seconds.

    Everything that reads the same clock (the world, the session's timestamps) sees one
    consistent time; only what is measured on the real clock (HTTP round trips) is not sped up.
    """

    free_running = True

    def __init__(self, factor: float, start: float | None = None) -> None:
        if not factor > 0:
            raise ValueError("factor must be positive")
        self.factor = factor
        self._m0 = time.monotonic()
        self._t0 = self._m0 if start is None else start

    def now(self) -> float:
        """Simulated seconds."""
        return self._t0 + (time.monotonic() - self._m0) * self.factor

    def real_s(self, simulated_s: float) -> float:
        """Real seconds that ``simulated_s`` simulated seconds take."""
        return simulated_s / self.factor

    async def sleep_until(self, t: float) -> None:
        """Sleep on the running loop until simulated ``t``."""
        delay = (t - self.now()) / self.factor
        if delay > 0:
            await asyncio.sleep(delay)
