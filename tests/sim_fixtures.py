"""The simulator's test-only parts: a clock a test moves by hand, one run faster than the wall
clock, and faults it injects.

Faults are what real servers do to monitors on bad days. Every knob is thread-safe: tests set
faults from their own thread while the server runs on its loop. A fault either applies to the
next matching requests (``times``) or holds until cleared. :func:`faults_of` installs an
injector on a world (the shipped simulator has none).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass

from specwatch.sim.world import SimWorld


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


class ManualClock:
    """A clock that only moves when told to; thread-safe.

    Sleepers on any event loop are woken (thread-safely) by ``advance``/``set``.
    """

    free_running = False

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


STREAM_GARBAGE = (
    b'data: {"choices": [{"text": "unterminated\n\n',
    b"this line is not server-sent events at all\n\n",
    b"data: \xff\xfe not utf-8\n\n",
)
"""Lines a broken proxy or a buggy server might interleave into a stream."""

METRICS_GARBAGE = (
    "this is not prometheus text\n",
    'broken_metric{label="unterminated 1\n',
    "# TYPE half_a_type\n",
    "metric_with_bad_value NaNaN\n",
)


@dataclass(slots=True)
class _Counted:
    remaining: int
    path: str | None
    value: int


class FaultInjector:
    """Faults the server consults on every request (a :class:`~specwatch.sim.world.Faults`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = threading.Condition(self._lock)
        self._errors: list[_Counted] = []
        self._drops: list[_Counted] = []
        self._stream_garbage = 0
        self._metrics_garbage = 0
        self._hang_path: str | None = None
        self._hanging = False
        self._hang_after = 0
        self._hang_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.hung_requests = 0
        """Requests that have been held by :meth:`hang` so far."""

    # --- knobs (tests) ----------------------------------------------------------------

    def fail_next(self, n: int = 1, status: int = 500, path: str | None = None) -> None:
        """Answer the next ``n`` requests (to ``path`` when given) with HTTP ``status``."""
        with self._lock:
            self._errors.append(_Counted(n, path, status))

    def drop_stream(self, after_chunks: int = 3, times: int = 1) -> None:
        """Close the connection of the next ``times`` streams after ``after_chunks`` chunks."""
        with self._lock:
            self._drops.append(_Counted(times, None, after_chunks))

    def garbage_in_streams(self, times: int = 1) -> None:
        """Interleave garbage lines into the next ``times`` streams (after their first chunk)."""
        with self._lock:
            self._stream_garbage += times

    def garbage_in_metrics(self, times: int = 1) -> None:
        """Mix garbage lines into the next ``times`` ``/metrics`` answers."""
        with self._lock:
            self._metrics_garbage += times

    def hang(self, path: str | None = None, after: int = 0) -> None:
        """Accept requests (to ``path`` when given) but never answer until :meth:`clear_hang`;
        the first ``after`` of them are answered."""
        with self._lock:
            self._hanging = True
            self._hang_path = path
            self._hang_after = after

    def clear_hang(self) -> None:
        """Release every held request."""
        with self._lock:
            self._hanging = False
            waiters, self._hang_waiters = self._hang_waiters, []
        for loop, fut in waiters:
            # A server that stopped meanwhile has closed its loop: nothing left to wake there.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, fut)

    def clear(self) -> None:
        """Remove every pending fault (and release held requests)."""
        with self._lock:
            self._errors.clear()
            self._drops.clear()
            self._stream_garbage = 0
            self._metrics_garbage = 0
        self.clear_hang()

    # --- queries (the server) --------------------------------------------------------------

    def take_error(self, path: str) -> int | None:
        """The status to fail this request with, if one is due."""
        with self._lock:
            for c in self._errors:
                if c.remaining > 0 and (c.path is None or c.path == path):
                    c.remaining -= 1
                    return c.value
            self._errors = [c for c in self._errors if c.remaining > 0]
            return None

    def take_drop(self) -> int | None:
        """For a new stream: after how many chunks to drop it, if due."""
        with self._lock:
            for c in self._drops:
                if c.remaining > 0:
                    c.remaining -= 1
                    return c.value
            return None

    def take_stream_garbage(self) -> tuple[bytes, ...]:
        """For a new stream: the lines to interleave, if due."""
        with self._lock:
            if self._stream_garbage > 0:
                self._stream_garbage -= 1
                return STREAM_GARBAGE
            return ()

    def take_metrics_garbage(self) -> tuple[str, ...]:
        """For a ``/metrics`` answer: the lines to mix in, if due."""
        with self._lock:
            if self._metrics_garbage > 0:
                self._metrics_garbage -= 1
                return METRICS_GARBAGE
            return ()

    def should_hang(self, path: str) -> bool:
        """Whether a request to ``path`` is to be held now."""
        with self._lock:
            if not self._hanging or self._hang_path not in (None, path):
                return False
            self._hang_after -= 1
            return self._hang_after < 0

    async def wait_released(self) -> None:
        """Wait (on the running loop) until :meth:`clear_hang`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if not self._hanging:
                return
            self._hang_waiters.append((loop, fut))
            self.hung_requests += 1
            self._held.notify_all()
        try:
            await fut
        finally:
            with self._lock:
                self._hang_waiters = [w for w in self._hang_waiters if w[1] is not fut]

    def wait_hung(self, n: int, timeout: float | None = 10.0) -> bool:
        """Block until ``n`` requests in all have been held by :meth:`hang` (for tests)."""
        with self._held:
            return self._held.wait_for(lambda: self.hung_requests >= n, timeout)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def faults_of(world: SimWorld) -> FaultInjector:
    """``world``'s fault injector, installed on first use."""
    faults = world.faults
    if not isinstance(faults, FaultInjector):
        faults = FaultInjector()
        world.faults = faults
    return faults
