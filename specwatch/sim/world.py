"""The simulated world: one server's engine, its GPUs, its clock, its faults and the truth.

Everything is seeded (``random.Random(config.seed)``, never the global generator) and moves only
with the clock, so a given seed and a given sequence of clock times and requests always give the
same steps, the same tokens and the same ground truth.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import Engine, SimRequest, TokenEvent, request_truth
from specwatch.sim.gpus import SimGpus
from specwatch.sim.metrics import telemetry_class
from specwatch.sim.truth import GroundTruth


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


MANUAL_UNIX_BASE = 1_780_000_000.0
"""Unix time of zero on a clock that only a test moves, so that timestamps in answers are
reproducible."""


class Faults(Protocol):
    """What the server asks of injected faults on every request (a test's fault injector; the
    shipped simulator has none)."""

    def should_hang(self, path: str) -> bool:
        """Whether a request to ``path`` is to be held now."""
        ...

    async def wait_released(self) -> None:
        """Wait (on the running loop) until held requests are released."""
        ...

    def take_error(self, path: str) -> int | None:
        """The HTTP status to fail this request with, if one is due."""
        ...

    def take_metrics_garbage(self) -> Sequence[str]:
        """Lines to mix into this ``/metrics`` answer (none: a clean one)."""
        ...

    def take_drop(self) -> int | None:
        """For a new stream: after how many chunks to drop it, if due."""
        ...

    def take_stream_garbage(self) -> Sequence[bytes]:
        """For a new stream: lines to interleave after its first chunk (none: a clean one)."""
        ...


class SimWorld:
    """A simulated server's state, independent of HTTP.

    Args:
        config: what to imitate.
        clock: time source (default :class:`RealClock`); tests pass a manual one.
        gpus: the boards the engine runs on (default ``config.gpu_count`` fresh ones).
    """

    def __init__(
        self, config: SimConfig, clock: Clock | None = None, gpus: SimGpus | None = None
    ) -> None:
        self.config = config
        self.clock: Clock = clock or RealClock()
        t = self.clock.now()
        self.gpus = gpus or SimGpus(count=config.gpu_count, seed=config.seed, start_t=t)
        self.truth = GroundTruth(max_steps=config.truth_max_steps)
        self.faults: Faults | None = None
        """Faults the server consults on every request (set by a test)."""
        self.rng = random.Random(config.seed)
        self._lock = threading.RLock()
        self._submitted = threading.Condition(self._lock)
        self.submitted = 0
        """Requests submitted so far (HTTP and health probes; not background traffic)."""
        self._listeners: list[Callable[[], None]] = []
        self.schedule: list[Callable[[float], None]] = []
        """Called with the new time before each advance (a demo scenario's script)."""
        self._unix_base = time.time() - t if self.clock.free_running else MANUAL_UNIX_BASE
        self.epoch = 0
        """Increments on every restart."""
        self._boot(t)

    def _boot(self, t: float) -> None:
        self.started_at = t
        self.loaded_at = t + max(0.0, self.config.load_time_s)
        self.telemetry = telemetry_class(self.config.dialect)(self.config, self.loaded_at)
        self.engine = Engine(
            self.config, self.gpus, self.truth, self.telemetry, self.rng, self.loaded_at
        )
        self._weights_on_gpu = False

    # --- time ----------------------------------------------------------------------------

    def now(self) -> float:
        """The world's clock."""
        return self.clock.now()

    def unix_time(self, t: float) -> float:
        """Unix time of clock time ``t`` (for ``created`` fields and start-time headers)."""
        return self._unix_base + t

    def advance_to(self, t: float) -> None:
        """Run the engine through every step that ends at or before ``t``."""
        with self._lock:
            for script in self.schedule:
                script(t)
            if t >= self.loaded_at and not self._weights_on_gpu:
                self._weights_on_gpu = True
                total = self.gpus.spec.mem_total_bytes
                self.gpus.set_memory_used(int(total * 0.88))
            self.engine.advance_to(t)

    def loaded(self, t: float | None = None) -> bool:
        """Whether the model has finished loading at ``t`` (default now)."""
        return (self.now() if t is None else t) >= self.loaded_at

    # --- requests ------------------------------------------------------------------------

    def submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        ignore_eos: bool = True,
        *,
        probe: bool = False,
        endpoint: str = "",
        streaming: bool = True,
    ) -> SimRequest:
        """Queue a request now (the engine first catches up with the clock)."""
        with self._lock:
            t = self.now()
            self.advance_to(t)
            if probe:
                self.truth.add_health_generation()
            req = self.engine.submit(
                t, prompt_tokens, max_tokens, ignore_eos, probe=probe, endpoint=endpoint,
                streaming=streaming,
            )  # fmt: skip
            self.submitted += 1
            self._submitted.notify_all()
            return req

    def wait_submitted(self, n: int, timeout: float | None = 10.0) -> bool:
        """Block until at least ``n`` requests have been submitted (tests on a manual clock
        wait for this before moving the clock, so that arrival times are exact)."""
        with self._submitted:
            return self._submitted.wait_for(lambda: self.submitted >= n, timeout)

    def poll(self, req: SimRequest, index: int) -> tuple[list[TokenEvent], bool, float | None]:
        """Events of ``req`` from ``index`` on, whether it is done, and when to look again."""
        with self._lock:
            self.advance_to(self.now())
            return list(req.events[index:]), req.done, self.engine.next_time()

    async def next_events(self, req: SimRequest, index: int) -> list[TokenEvent]:
        """Wait for ``req``'s events from ``index`` on; empty once it is done (or aborted)."""
        while True:
            events, done, t_next = self.poll(req, index)
            if events or done:
                return events
            if t_next is None:
                # Nothing scheduled yet the request is not done: only a restart can end this.
                t_next = self.now() + 0.05
            await self.clock.sleep_until(t_next)

    async def wait_done(self, req: SimRequest) -> None:
        """Wait until ``req`` has finished."""
        index = 0
        while not req.done:
            events = await self.next_events(req, index)
            index += len(events)

    def running_snapshot(self) -> tuple[list[SimRequest], int]:
        """Running requests and the waiting count, after catching up with the clock."""
        with self._lock:
            self.advance_to(self.now())
            return list(self.engine.running), len(self.engine.waiting)

    # --- lifecycle -----------------------------------------------------------------------

    def restart(self) -> None:
        """Restart: in-flight requests dropped, counters reset, loading for ``load_time_s``."""
        with self._lock:
            t = self.now()
            self.advance_to(t)
            for req in self.engine.abort_all(t):
                self.truth.add_request(request_truth(req))
            self.truth.add_restart(t)
            self.epoch += 1
            self.gpus.advance_to(t, 0.0)
            self._boot(t)
            listeners = list(self._listeners)
        for fn in listeners:
            fn()

    def add_restart_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (from the restarting thread) after every restart."""
        self._listeners.append(fn)

    def locked(self) -> threading.RLock:
        """The world's lock, for readers that need a consistent view."""
        return self._lock


__all__ = ["MANUAL_UNIX_BASE", "Clock", "Faults", "RealClock", "SimWorld"]
