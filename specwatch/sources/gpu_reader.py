"""A GPU reader: the shape of every one (NVML's ``GpuSampler``, dcgm-exporter's
``DcgmGpuSource``, Prometheus's) and the background loop they share.

A benchmark, a probe and the live session only use what :class:`GpuReader` names, so any
reader can stand behind them; every reader runs the same :class:`TickLoop` on its own thread
(sample, hand the tick over, wait the rest), only how a tick is read differs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol

from specwatch.core.gpu import GpuInventory, GpuTick

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; the annotations are never evaluated (3.10 runs this)


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


class TickLoop:
    """Runs :meth:`sample` every ``interval_s`` seconds on a daemon thread until stopped.

    A subclass implements :meth:`open`, :meth:`sample` and :meth:`stop` (which calls
    :meth:`_end_thread`); setting ``_wake`` cuts a wait short (a new interval, or stop).
    """

    thread_name: ClassVar[str]

    def __init__(self, interval_s: float, on_tick: Callable[[GpuTick], None] | None) -> None:
        check_interval(interval_s)
        self._interval_s = interval_s
        self.on_tick = on_tick
        """Called on the loop's thread after each background tick (may be replaced). Keep it
        short (post a message); exceptions are caught and kept in ``callback_error``."""
        self.callback_error: str | None = None
        """The last exception raised by ``on_tick``, as text."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> GpuInventory:
        """Find the GPUs (never raises)."""
        raise NotImplementedError

    def sample(self) -> GpuTick:
        """Read one tick (never raises)."""
        raise NotImplementedError

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread (and release what the reader holds)."""
        raise NotImplementedError

    def start(self) -> None:
        """Open if needed and sample on a daemon thread.

        The next tick is scheduled only once the previous one has finished, so ticks never
        overlap or pile up. Does nothing when the thread is already running.
        """
        if self.running:
            return
        self.open()
        self._stop.clear()
        self._wake.clear()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _end_thread(self, timeout_s: float) -> bool:
        """Stop the thread and join it; ``False`` when it is still running after ``timeout_s``
        (stuck in a read)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        # From on_tick (the loop's own thread) there is nothing to join: the loop ends after
        # the callback returns.
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                return False
            self._thread = None
        return True

    def close(self) -> None:
        """The same as :meth:`stop`."""
        self.stop()

    def __enter__(self) -> Self:
        self.open()
        return self

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


__all__ = ["GpuReader", "TickLoop", "check_interval"]
