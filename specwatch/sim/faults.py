"""Fault injection for the simulated server: what real servers do to monitors on bad days.

Every knob is thread-safe: tests set faults from their own thread while the server runs on its
loop. A fault either applies to the next matching requests (``times``) or holds until cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

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
    """Faults the server consults on every request.

    Args:
        restart: what :meth:`restart` calls (the world's restart).
    """

    def __init__(self, restart: Callable[[], None]) -> None:
        self._restart = restart
        self._lock = threading.Lock()
        self._held = threading.Condition(self._lock)
        self._errors: list[_Counted] = []
        self._drops: list[_Counted] = []
        self._stream_garbage = 0
        self._metrics_garbage = 0
        self._hang_path: str | None = None
        self._hanging = False
        self._hang_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.hung_requests = 0
        """Requests that have been held by :meth:`hang` so far."""

    # --- knobs (tests, CLI) ----------------------------------------------------------------

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

    def hang(self, path: str | None = None) -> None:
        """Accept requests (to ``path`` when given) but never answer until :meth:`clear_hang`."""
        with self._lock:
            self._hanging = True
            self._hang_path = path

    def clear_hang(self) -> None:
        """Release every held request."""
        with self._lock:
            self._hanging = False
            waiters, self._hang_waiters = self._hang_waiters, []
        for loop, fut in waiters:
            # A server that stopped meanwhile has closed its loop: nothing left to wake there.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, fut)

    def restart(self) -> None:
        """Restart the server: counters reset, in-flight requests dropped, loading again."""
        self._restart()

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

    def take_stream_garbage(self) -> bool:
        """For a new stream: whether to interleave garbage."""
        with self._lock:
            if self._stream_garbage > 0:
                self._stream_garbage -= 1
                return True
            return False

    def take_metrics_garbage(self) -> bool:
        """For a ``/metrics`` answer: whether to mix in garbage."""
        with self._lock:
            if self._metrics_garbage > 0:
                self._metrics_garbage -= 1
                return True
            return False

    def should_hang(self, path: str) -> bool:
        """Whether a request to ``path`` is to be held now."""
        with self._lock:
            return self._hanging and (self._hang_path is None or self._hang_path == path)

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
