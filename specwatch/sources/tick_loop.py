"""The background loop shared by the GPU readers: sample, hand the tick over, wait the rest.

The NVML sampler and the dcgm-exporter source run the same loop on their own thread; only how
a tick is read differs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from specwatch.core.gpu import GpuTick


class TickLoop:
    """Runs :meth:`sample` every ``_interval_s`` seconds until ``_stop`` is set.

    A subclass sets ``_stop``, ``_wake``, ``_interval_s``, ``on_tick`` and ``callback_error`` in its
    constructor and implements :meth:`sample`; setting ``_wake`` cuts a wait short (a new
    interval, or stop).
    """

    _stop: threading.Event
    _wake: threading.Event
    _interval_s: float
    _thread: threading.Thread | None
    on_tick: Callable[[GpuTick], None] | None
    callback_error: str | None

    def sample(self) -> GpuTick:
        """Read one tick (never raises)."""
        raise NotImplementedError

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread (and release what the reader holds)."""
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def interval_s(self) -> float:
        """Seconds between background ticks."""
        return self._interval_s

    def set_interval(self, interval_s: float) -> None:
        """Change the interval; a running thread applies it to the wait in progress.

        Raises:
            ValueError: When ``interval_s`` is not a positive number.
        """
        check_interval(interval_s)
        self._interval_s = interval_s
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            tick = self.sample()
            if self.on_tick is not None:
                try:
                    self.on_tick(tick)
                except Exception as exc:
                    self.callback_error = f"{type(exc).__name__}: {exc}"
            self._wait_after(started)

    def _wait_after(self, started: float) -> None:
        while True:
            self._wake.clear()
            # Checked after clearing: stop() sets the stop flag before the wake event.
            if self._stop.is_set():
                return
            due = started + self._interval_s
            now = time.monotonic()
            if now >= due:
                if now - due > self._interval_s:
                    # A tick overran by more than an interval: pause a full interval rather
                    # than firing back to back.
                    started = now
                    continue
                return
            self._wake.wait(due - now)


def check_interval(interval_s: float) -> None:
    """Raise ``ValueError`` unless ``interval_s`` is a positive number of seconds."""
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r}")


__all__ = ["TickLoop", "check_interval"]
