"""The live session: everything that runs while specwatch watches, and nothing that draws.

It owns one :class:`ServerPoller` task per endpoint, a GPU source and its thread, at most one
benchmark job, and the live verdict with its reference marks, and hands every reading to its
subscribers as a typed event, followed by a :class:`VerdictChanged` whenever that reading moved
the verdict. The TUI subscribes and renders; a headless front end (a probe, a recorder, a test)
subscribes the same way and gets the same verdict.

The server poller is here because only this session runs it: it waits for its server, identifies
it, then scrapes ``/metrics``, scheduling the next scrape only after the last one finished (polls
never overlap), and waits, saying so, whenever the server is down or loading. Nothing in it
raises into the session: a failed scrape becomes an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from specwatch.core.identity import ServerIdentity
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import ServerInfo
from specwatch.session import events as ev
from specwatch.session.bench_job import BenchJob
from specwatch.session.events import SessionEvent
from specwatch.session.gpu_source import GpuSource, NoGpus, ReaderGpuSource
from specwatch.session.host_source import HostSource
from specwatch.session.live_verdict import LiveVerdict
from specwatch.session.verdict_state import Reference
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.identity.process import identify as identify_server

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow
    from specwatch.core.snapshot_records import BenchConfig
    from specwatch.session.profile_job import ProfileJob, ProfileOptions
    from specwatch.sources.detect import WaitStatus
    from specwatch.sources.watcher import MetricsWatcher

Subscriber = Callable[[SessionEvent], object]
Identify = Callable[[str, ServerInfo], ServerIdentity]

VERDICT_INPUTS = (
    ev.GpuInventoryChanged,
    ev.GpuTicked,
    ev.HostSampled,
    ev.MetricsScraped,
    ev.ServerReady,
    ev.ServerIdentified,
    ev.ServerLost,
    ev.BenchProgress,
    ev.BenchFinished,
    ev.ProfileProgress,
    ev.ProfileFinished,
)
"""The events the live verdict reads."""


PROFILE_STOP_S = 5.0
"""How long stopping the session waits for a profile job to tell vLLM to stop profiling."""


LOST_AFTER = 3
"""Consecutive failed scrapes, with the server also failing detection, before it counts as lost."""
HEALTH_EVERY_S = 5.0
"""How often a server without usable ``/metrics`` is checked for life."""
RETRY_FATAL_S = 10.0
"""After an error waiting cannot fix (a rejected key), try again this much later."""


class ServerPoller:
    """Waits for the server, identifies it, then scrapes ``/metrics`` at an interval.

    Args:
        endpoint: Where the server is (the API key stays inside it, never printed).
        emit: Where events go.
        interval_s: Seconds between the end of one scrape and the start of the next.
        clock: Monotonic seconds, shared with the GPU source so both land on one time axis.
        timeout_s: Per-request timeout for the HTTP client.
        server: This endpoint's index in the session (carried by every event).
        deadline_s: Wall-clock limit of each request (a server dripping a byte a second, or
            an endless ``/metrics``, must not hold the monitor).
        identify: Reads the code identity of the server at a base URL (blocking; run on a
            thread of its own once per ready, then a ``ServerIdentified`` event); ``None``:
            not read (an in-process demo server would be identified as ourselves).

    Every text it emits is sanitised (server errors already are; anything else here).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        emit: Callable[[SessionEvent], None],
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = 5.0,
        server: int = 0,
        deadline_s: float | None = None,
        identify: Callable[[str, ServerInfo], ServerIdentity] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.emit = emit
        self.interval_s = interval_s
        self.clock = clock
        self.timeout_s = timeout_s
        self.server = server
        if deadline_s is None:
            # httpx (and with it its CLI's rich) loads with the client: not before a poll starts
            from specwatch.sources.http.client import POLL_DEADLINE_S

            deadline_s = POLL_DEADLINE_S
        self.deadline_s = deadline_s
        self.identify = identify
        self.info: ServerInfo | None = None
        """The server as last detected; ``None`` while waiting."""
        self._watcher: MetricsWatcher | None = None
        """Kept across reconnections: its last scrape tells a restart (counters went back)
        from a network blip, so a restart gets its mark on the graph."""

    def set_interval(self, interval_s: float) -> None:
        """Change the scrape interval; takes effect after the current wait."""
        self.interval_s = interval_s

    def _on_attempt(self, status: WaitStatus) -> None:
        self.emit(
            ev.ServerWaiting(
                self.clock(),
                status.state,
                status.attempt,
                status.elapsed_s,
                status.detail,
                self.server,
            )
        )

    async def run(self) -> None:
        """Poll until cancelled."""
        from specwatch.sources.detect import wait_ready
        from specwatch.sources.http.client import ServerClient

        async with ServerClient(
            self.endpoint, timeout_s=self.timeout_s, deadline_s=self.deadline_s
        ) as client:
            while True:
                self.info = None
                try:
                    info = await wait_ready(client, on_attempt=self._on_attempt)
                except Exception as e:  # wrong key, TLS: waiting cannot fix it, but keep trying
                    self.emit(ev.ServerLost(self.clock(), _why(e), self.server))
                    await asyncio.sleep(RETRY_FATAL_S)
                    continue
                self.info = info
                self.emit(ev.ServerReady(self.clock(), info, self.server))
                self._identify(info)
                if info.metrics_enabled is False:
                    reason = await self._health_loop(client)
                else:
                    reason = await self._scrape_loop(client, info)
                self.info = None
                self.emit(ev.ServerLost(self.clock(), reason, self.server))

    def _identify(self, info: ServerInfo) -> None:
        """Read the server's identity on a daemon thread (``/proc`` and git can take seconds)."""
        identify = self.identify
        if identify is None:
            return

        def work() -> None:
            try:
                identity = identify(self.endpoint.base_url, info)
            except Exception:  # an identity is extra information: never a reason to fail
                return
            self.emit(ev.ServerIdentified(self.clock(), identity, self.server))

        threading.Thread(target=work, name=f"specwatch-identify-{self.server}", daemon=True).start()

    async def _scrape_loop(self, client: object, info: ServerInfo) -> str:
        from specwatch.sources.detect import detect
        from specwatch.sources.watcher import MetricsWatcher

        watcher = self._watcher
        if watcher is None or watcher.info.dialect is not info.dialect:
            watcher = MetricsWatcher(client, info, clock=self.clock)  # type: ignore[arg-type]
            self._watcher = watcher
        else:
            watcher.info = info
        failures = 0
        while True:
            window = await watcher.scrape()
            self.emit(ev.MetricsScraped(window, self.server))
            error = window.notes.get("error")
            if error:
                failures += 1
                if failures >= LOST_AFTER:
                    try:
                        await detect(client)  # type: ignore[arg-type]
                    except Exception as e:  # detection failing is the signal we look for
                        return _why(e) if str(e) else error
                    failures = 0
            else:
                failures = 0
            await asyncio.sleep(self.interval_s)

    async def _health_loop(self, client: object) -> str:
        from specwatch.sources.detect import detect

        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            try:
                await detect(client)  # type: ignore[arg-type]
            except Exception as e:  # any failure means the server is gone for now
                return _why(e)


def _why(exc: BaseException) -> str:
    """One sanitised line for an exception."""
    return sanitize_line(str(exc) or type(exc).__name__, 600)


class Stoppable(Protocol):
    """Something the session stops when it ends (the in-process demo server)."""

    def stop(self) -> None:
        """Stop it."""
        ...


class LiveSession:
    """Pollers for a list of servers, a GPU source, and a benchmark job, emitting events.

    Subscribers are called on the thread or task that produced the event (the GPU source's
    thread, the event loop the session was started on, the benchmark's thread), so a
    subscriber must be thread-safe and quick: ``App.post_message`` or a queue put.

    Args:
        endpoints: The servers to watch (empty: GPUs only).
        gpus: The GPU source (``None``: none, reported as disabled).
        metrics_interval_s: Seconds between scrapes.
        timeout_s: Per-request HTTP timeout (a hung server is noticed after this long).
        clock: Monotonic seconds for every timestamp (give the GPU source the same one).
        demo: Stopped when the session stops.
        identify: Reads a ready server's code identity (off the loop, then a
            ``ServerIdentified`` event); default: ``sources.identity.process.identify``,
            except with an in-process ``demo`` (it would be identified as ourselves);
            ``None``: not read.
        reference: The live verdict's reference from the start (a snapshot's); ``None``: the
            first steady window after warmup.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        gpus: GpuSource | None = None,
        metrics_interval_s: float = 1.0,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        demo: Stoppable | None = None,
        identify: Identify | Literal["default"] | None = "default",
        reference: Reference | None = None,
        host: HostSource | Literal["default"] | None = "default",
    ) -> None:
        if isinstance(identify, str):  # "default"
            identify = None if demo is not None else identify_server
        self.endpoints = tuple(endpoints)
        self.identify: Identify | None = identify
        """Reads a server's code identity (``None``: not read)."""
        self.gpus: GpuSource = gpus if gpus is not None else NoGpus()
        if isinstance(host, str):  # "default": the real host, unless this is a demo
            host = None if demo is not None else HostSource(clock=clock)
        self.host: HostSource | None = host
        """This host's CPU sampler (``None``: not read, e.g. a demo)."""
        self.clock = clock
        self.demo = demo
        self.pollers = [
            ServerPoller(
                e, self.emit, metrics_interval_s, clock, timeout_s, server=i, identify=identify
            )
            for i, e in enumerate(self.endpoints)
        ]
        self.bench: BenchJob | None = None
        """The latest benchmark job (running or done)."""
        self.profile: ProfileJob | None = None
        """The latest profile job (running or done)."""
        self._step_s: dict[int, float] = {}
        """Each server's latest windowed step time (kept beside a profile taken live)."""
        self.verdict: LiveVerdict | None = LiveVerdict(reference)
        """The live verdict of :attr:`verdict_server` (``None``: not judged here, e.g. a replay
        of recorded verdicts)."""
        self.verdict_server = 0
        """The endpoint the verdict judges."""
        # The verdict is fed from the GPU thread, the loop and the benchmark's thread; one at a
        # time, and each VerdictChanged handed on before the next reading can move it again.
        self._verdict_lock = threading.RLock()
        self._subscribers: list[Subscriber] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopped = threading.Event()

    # --- subscribers ----------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Receive every later event; returns the function that unsubscribes."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(subscriber)

        return unsubscribe

    def emit(self, event: SessionEvent) -> None:
        """Hand ``event`` to every subscriber, then the verdict it led to if that changed
        (nothing after :meth:`stop`)."""
        if self._stopped.is_set():
            return
        if isinstance(event, ev.MetricsScraped) and event.window.step_latency_s is not None:
            self._step_s[event.server] = event.window.step_latency_s
        self._deliver(event)
        if (
            isinstance(event, VERDICT_INPUTS)
            and getattr(event, "server", self.verdict_server) == self.verdict_server
        ):
            self._judge(lambda v: v.feed(event))

    def _deliver(self, event: SessionEvent) -> None:
        for subscriber in list(self._subscribers):
            # One failing subscriber must not starve the others or kill a source's thread.
            with contextlib.suppress(Exception):
                subscriber(event)

    def _judge(self, change: Callable[[LiveVerdict], object]) -> bool:
        """Apply ``change`` to the verdict; emit it if it moved. ``False``: no verdict here."""
        with self._verdict_lock:
            verdict = self.verdict
            if verdict is None:
                return False
            before = verdict.version
            # A reading the verdict cannot take (a malformed window) leaves it as it was.
            with contextlib.suppress(Exception):
                change(verdict)
            if verdict.version != before and not self._stopped.is_set():
                state = verdict.state()
                self._deliver(ev.VerdictChanged(verdict.now, state, self.verdict_server))
        return True

    # --- the live verdict's reference -----------------------------------------------------------

    def mark_reference(self) -> bool:
        """Judge against the window ending at the newest reading from now on (the ``r`` key).

        Returns:
            Whether this session judges at all (a replay of recorded verdicts does not).
        """
        return self._judge(lambda v: v.mark(v.now))

    def seed_verdict(self, windows: Sequence[MetricsWindow]) -> bool:
        """Give the verdict the server's windows read before this session, oldest first, on
        this session's clock (a drill-down from the fleet: no reference from scratch)."""
        return self._judge(lambda v: v.seed(windows))

    def use_reference(self, reference: Reference) -> bool:
        """Judge against ``reference`` (a benchmark snapshot's figures) from now on.

        Returns:
            Whether this session judges at all.
        """
        return self._judge(lambda v: v.use_reference(reference))

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the pollers on the running event loop and the GPU source on a thread.

        Call from a coroutine or a callback of a running loop (the TUI's ``on_mount``).
        """
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(p.run(), name=f"specwatch-server-{p.server}") for p in self.pollers
        ]
        if self.host is not None:
            self.subscribe(self.host.follow)
            self.host.start(self.emit)
        # Opening NVML can take seconds: never on the loop.
        threading.Thread(target=self._start_gpus, name="specwatch-gpu-open", daemon=True).start()

    def _start_gpus(self) -> None:
        if not self._stopped.is_set():
            self.gpus.start(self.emit)

    def stop(self, gpu_timeout_s: float = 10.0) -> None:
        """Cancel the pollers and the benchmark, stop the GPU source and the demo. Idempotent."""
        self._stopped.set()
        if self.bench is not None:
            self.bench.cancel()
        if self.profile is not None and self.profile.running:
            # A vLLM profiling session stays open until told: let the job send its stop.
            self.profile.cancel()
            self.profile.join(PROFILE_STOP_S)
        for task in self._tasks:
            # The loop may already be closed (after the app exited): nothing left to cancel.
            with contextlib.suppress(RuntimeError):
                task.cancel()
        self.gpus.stop(timeout_s=gpu_timeout_s)
        if self.host is not None:
            self.host.stop()
        if self.demo is not None:
            with contextlib.suppress(Exception):
                self.demo.stop()

    async def aclose(self) -> None:
        """Stop, and wait for the poller tasks to end."""
        self.stop()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> LiveSession:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- what front ends ask for ----------------------------------------------------------------

    def server_info(self, server: int = 0) -> ServerInfo | None:
        """The server as last detected; ``None`` while waiting or without that endpoint."""
        return self.pollers[server].info if server < len(self.pollers) else None

    def set_interval(self, interval_s: float) -> None:
        """Change the GPU and scrape intervals together."""
        self.gpus.set_interval(interval_s)
        for p in self.pollers:
            p.set_interval(interval_s)

    @property
    def bench_running(self) -> bool:
        """Whether a benchmark job is in progress."""
        return self.bench is not None and self.bench.running

    def start_benchmark(
        self,
        out_dir: Path,
        config: BenchConfig | None = None,
        server: int = 0,
        command: Sequence[str] = ("specwatch", "(live benchmark)"),
    ) -> BenchJob | None:
        """Benchmark a connected server on a thread of its own; ``None`` when none is ready."""
        info = self.server_info(server)
        if info is None or self.bench_running:
            return None
        sampler = self.gpus.sampler if isinstance(self.gpus, ReaderGpuSource) else None
        job = BenchJob(
            self.endpoints[server],
            info,
            sampler,
            out_dir,
            self.emit,
            config=config,
            clock=self.clock,
            command=command,
            identify=self.identify,
        )
        self.bench = job
        job.start()
        return job

    @property
    def profile_running(self) -> bool:
        """Whether a profile job is in progress."""
        return self.profile is not None and self.profile.running

    def start_profile(self, options: ProfileOptions, server: int = 0) -> ProfileJob | None:
        """Ask a connected server's profiler for steps, on a thread of its own; ``None`` when
        no server is ready or a profile already runs."""
        from specwatch.session.profile_job import ProfileJob

        info = self.server_info(server)
        if info is None or self.profile_running:
            return None
        step = self._step_s.get(server)
        job = ProfileJob(
            self.endpoints[server],
            info,
            options,
            self.emit,
            clock=self.clock,
            live_step_ms=lambda: step * 1000.0 if step is not None else None,
        )
        self.profile = job
        job.start()
        return job

    def cancel_profile(self) -> None:
        """Stop the profile in progress (a vLLM profiling session is stopped too)."""
        if self.profile is not None:
            self.profile.cancel()

    def cancel_benchmark(self) -> None:
        """Stop the benchmark after its run in flight, keeping the finished runs."""
        if self.bench is not None:
            self.bench.cancel()
