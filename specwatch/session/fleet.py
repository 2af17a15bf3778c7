"""The headless fleet session: a fleet source refreshed at an interval, typed events out.

The same surface as :class:`~specwatch.session.live.LiveSession` (``subscribe``, ``start``,
``stop``, ``aclose``, ``set_interval``): the TUI's fleet screen, ``probe`` and a recorder all
subscribe to it. One task does everything in order: it fills the graphs' history once
(``history()``, one point per graph column), then refreshes; the next refresh is scheduled only
after the previous one finished, so refreshes never overlap, however slow the Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from specwatch.core.sanitize import sanitize_line
from specwatch.sources.prometheus.fleet import FleetHistory, FleetReading

HISTORY_S = 300.0
"""How far back the graphs are filled at start-up."""


@dataclass(frozen=True, slots=True)
class FleetRefreshed:
    """One refresh of every server and GPU (failed query groups are in ``reading.errors``)."""

    reading: FleetReading


@dataclass(frozen=True, slots=True)
class FleetHistoryLoaded:
    """The graphs' past, read once at start-up."""

    history: FleetHistory


@dataclass(frozen=True, slots=True)
class FleetError:
    """Something failed: ``history`` (the graphs start empty) or ``refresh`` (kept trying)."""

    t: float
    where: str
    message: str


FleetEvent = FleetRefreshed | FleetHistoryLoaded | FleetError
"""Everything a fleet session emits."""
FleetSubscriber = Callable[[FleetEvent], object]


class FleetSource(Protocol):
    """Where a fleet comes from: Prometheus, or servers and exporters read directly."""

    async def refresh(self, at: float | None = None) -> FleetReading:
        """Every server and GPU once; never raises."""
        ...

    async def history(self, start: float, end: float, step_s: float) -> FleetHistory:
        """Figures over ``[start, end]``, one point per ``step_s``; may raise."""
        ...


class FleetSession:
    """Refreshes a fleet source on its own task and emits :data:`FleetEvent` values.

    Args:
        source: The fleet source (its client is closed by its owner, or by ``close``).
        interval_s: Seconds between the end of one refresh and the start of the next.
        history_s: How far back to fill the graphs at start-up (0: not at all).
        column_s: The graphs' column width: the history's step.
        clock: Monotonic seconds for error events.
        wall: Unix seconds (the history's range).
        close: Awaited when the session closes (the source's client).
    """

    def __init__(
        self,
        source: FleetSource,
        interval_s: float = 2.0,
        history_s: float = HISTORY_S,
        column_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        close: Callable[[], object] | None = None,
    ) -> None:
        self.source = source
        self.interval_s = interval_s
        self.history_s = history_s
        self.column_s = column_s
        self.clock = clock
        self.wall = wall
        self._close = close
        self.latest: FleetReading | None = None
        """The last reading (``None`` before the first refresh)."""
        self.refreshes = 0
        self._subscribers: list[FleetSubscriber] = []
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._wake = asyncio.Event()

    def subscribe(self, subscriber: FleetSubscriber) -> Callable[[], None]:
        """Receive every later event; returns the function that unsubscribes."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(subscriber)

        return unsubscribe

    def emit(self, event: FleetEvent) -> None:
        """Hand ``event`` to every subscriber (nothing after :meth:`stop`)."""
        if self._stopped:
            return
        for subscriber in list(self._subscribers):
            with contextlib.suppress(Exception):  # one failing subscriber must not stop the rest
                subscriber(event)

    def start(self) -> None:
        """Start the refresh task on the running loop (call from a coroutine or callback)."""
        if self._task is None and not self._stopped:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="specwatch-fleet")

    def set_interval(self, interval_s: float) -> None:
        """Change the time between refreshes; takes effect after the wait in progress."""
        self.interval_s = interval_s

    def refresh_now(self) -> None:
        """Cut the wait in progress short (the refresh in flight, if any, is not repeated)."""
        self._wake.set()

    async def _run(self) -> None:
        if self.history_s > 0:
            await self._history()
        while not self._stopped:
            reading = await self.source.refresh()
            self.latest = reading
            self.refreshes += 1
            self.emit(FleetRefreshed(reading))
            if reading.errors:
                self.emit(FleetError(self.clock(), "refresh", "; ".join(reading.errors)))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def _history(self) -> None:
        end = self.wall()
        try:
            history = await self.source.history(end - self.history_s, end, self.column_s)
        except Exception as exc:  # no past is no reason not to show the present
            self.emit(
                FleetError(
                    self.clock(), "history", sanitize_line(str(exc), 400) or type(exc).__name__
                )
            )
            return
        self.emit(FleetHistoryLoaded(history))

    def stop(self) -> None:
        """Cancel the refresh task. Idempotent."""
        self._stopped = True
        if self._task is not None:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                self._task.cancel()

    async def aclose(self) -> None:
        """Stop, wait for the task to end, and close the source's client."""
        self.stop()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if self._close is not None:
            result = self._close()
            if asyncio.iscoroutine(result):
                await result

    async def __aenter__(self) -> FleetSession:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "HISTORY_S",
    "FleetError",
    "FleetEvent",
    "FleetHistoryLoaded",
    "FleetRefreshed",
    "FleetSession",
    "FleetSource",
]
