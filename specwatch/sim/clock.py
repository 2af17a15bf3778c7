"""The simulator's clock: what it needs of time, and real monotonic time (tests bring their own)."""

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
