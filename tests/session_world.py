"""A simulated server and GPUs on a manual clock, and a subscriber that collects session events.

The session's own threads and tasks still run in real time (a scrape every interval); what they
read — tokens, temperatures, limits — and every timestamp they stamp is on the manual clock, which
only the test moves.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from specwatch.session import LiveSession, NvmlGpuSource
from specwatch.session.events import SessionEvent
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.http.endpoint import parse_endpoint
from tests.sim_fixtures import FaultInjector, ManualClock

E = TypeVar("E")
START_T = 1000.0
FAST_S = 0.05
"""Real seconds between the session's GPU ticks and scrapes in these tests."""


@dataclass
class ManualSim:
    """One simulated server whose time moves only when the test moves it."""

    world: SimWorld
    server: SimServer
    clock: ManualClock
    url: str

    def advance(self, dt: float) -> float:
        """Move the clock and the simulated world forward; the new time."""
        t = self.clock.now() + dt
        self.clock.set(t)
        self.world.advance_to(t)
        return t

    def nvml(self) -> FakeNvml:
        """A fake NVML over this world's GPUs, on its clock."""
        return FakeNvml(self.world.gpus, clock=self.clock.now)

    def session(self, nvml: object | None = None, **kw: Any) -> LiveSession:
        """A session watching this server and its GPUs, stamping with the manual clock."""
        gpus = NvmlGpuSource(
            FAST_S, nvml=nvml if nvml is not None else self.nvml(), clock=self.clock.now
        )
        kw.setdefault("metrics_interval_s", FAST_S)
        kw.setdefault("timeout_s", 1.0)
        # The host is not simulated: a manual-clock world's verdict must not follow the load of
        # the machine running the suite (its CPU would read as contention beside the model).
        kw.setdefault("host", None)
        return LiveSession([parse_endpoint(self.url)], gpus, clock=self.clock.now, **kw)


@contextmanager
def manual_sim(
    dialect: str = "sglang",
    clock: ManualClock | None = None,
    port: int = 0,
    **overrides: Any,
) -> Iterator[ManualSim]:
    """A simulated server (2 GPUs, light background load) on a manual clock at t=1000."""
    clock = clock or ManualClock(START_T)
    overrides.setdefault("background_concurrency", 2)
    overrides.setdefault("gpu_count", 2)
    overrides.setdefault("seed", 1)
    world = SimWorld(preset(dialect, **overrides), clock=clock)
    server = SimServer(world, port=port)
    url = server.start()
    try:
        yield ManualSim(world, server, clock, url)
    finally:
        if isinstance(world.faults, FaultInjector):
            world.faults.clear()  # release held requests, or the server's stop waits on them
        server.stop()


class Collector:
    """A session subscriber that keeps every event (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: SessionEvent) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: type[E]) -> list[E]:
        """The events of one type, in arrival order."""
        with self._lock:
            return [e for e in self.events if isinstance(e, kind)]


async def drive_until(
    sim: ManualSim | None,
    cond: Callable[[], bool],
    timeout_s: float = 10.0,
    step_s: float = 0.1,
    pause: Callable[[], Any] | None = None,
) -> None:
    """Move the simulation ``step_s`` at a time until ``cond`` holds (fails after ``timeout_s``).

    Between steps the event loop runs (``pause``: e.g. a Pilot's ``pause``) so the session's
    tasks and threads can catch up.
    """
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        if sim is not None:
            sim.advance(step_s)
        if pause is not None:
            await pause()
        else:
            await asyncio.sleep(0.02)
