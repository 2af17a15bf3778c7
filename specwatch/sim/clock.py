"""Clocks for the simulator: real monotonic time, or a manual clock tests move by hand."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the simulator needs of time."""

    def now(self) -> float:
        """Seconds on this clock."""
        ...

    async def sleep_until(self, t: float) -> None:
        """Return once ``now() >= t``."""
        ...


class RealClock:
    """Monotonic wall time."""

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


class ManualClock:
    """A clock that only moves when told to; thread-safe.

    Sleepers on any event loop are woken (thread-safely) by ``advance``/``set``.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._t = start
        self._lock = threading.Lock()
        self._waiters: list[tuple[float, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def now(self) -> float:
        """The current manual time."""
        return self._t

    def set(self, t: float) -> None:
        """Move to ``t`` (never backwards) and wake every sleeper that is due."""
        with self._lock:
            self._t = max(self._t, t)
            due = [w for w in self._waiters if w[0] <= self._t]
            self._waiters = [w for w in self._waiters if w[0] > self._t]
        for _, loop, fut in due:
            loop.call_soon_threadsafe(_resolve, fut)

    def advance(self, dt: float) -> None:
        """Move forward by ``dt`` seconds."""
        self.set(self._t + dt)

    async def sleep_until(self, t: float) -> None:
        """Wait until the clock has been moved to ``t`` or beyond."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._t >= t:
                return
            self._waiters.append((t, loop, fut))
        await fut


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
