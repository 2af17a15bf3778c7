"""What the exporter last heard from the session: a subscriber that keeps the newest reading of
each kind, and withdraws a server's figures the moment a read of it fails (so a scrape never
shows a stale verdict or window as current).

A server is up while its newest ``/metrics`` scrape succeeded: a scrape past its deadline, an
answer that is not Prometheus text or one without any of the dialect's series (the watcher
says so in ``notes["error"]``) puts it down at once and counts one error, as does each failed
wait once the server has been ready (before that, a server refusing connections or saying it is
loading is starting, not failing: ``up`` 0 says so, and a sidecar started beside a server that
loads for minutes would otherwise count an error a second); the poller's own, slower decision
that the server is lost only adds to that. A successful
detection alone does not make it up (something answering 200 with random bytes on every path
is detected as a generic server), except where metrics are off and detection is all there is.

Events arrive on the session's threads; :meth:`Readings.view` hands the collector a consistent
copy under one lock.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from specwatch.core.energy import Energy, PowerLog
from specwatch.core.goodput import DEFAULT_SLO, Slo, cdf_counts
from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.host import HostSpan
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import MetricsWindow, ServerInfo, SpecConfig
from specwatch.session import events as ev
from specwatch.session.verdict_state import LiveVerdictState
from specwatch.sources.http.endpoint import Endpoint, redact

LABEL_LIMIT = 120
"""Longest label value taken from outside (a model id, a URL)."""


def label(text: str | None) -> str:
    """A label value safe to export: one line, no control characters, bounded."""
    return sanitize_line(text or "", LABEL_LIMIT)


@dataclass(frozen=True, slots=True)
class ServerView:
    """One server as the exporter shows it."""

    server: str
    """The address without credentials."""
    model: str = ""
    dialect: str = ""
    up: bool = False
    """Whether its newest scrape succeeded (detection alone where metrics are off)."""
    counters: bool | None = None
    """Whether its ``/metrics`` serves the counters specwatch reads: ``False`` for a
    llama-server started without ``--metrics`` or a vLLM with ``--disable-log-stats`` (no token
    rate, acceptance or verdict will come); ``None`` before it was first detected."""
    window: MetricsWindow | None = None
    """The newest ``/metrics`` window (``None`` while down: dropped, not kept stale)."""
    verdict: LiveVerdictState | None = None
    """The live verdict (the session's first server only; ``None`` while down)."""
    energy: Energy | None = None
    """Energy per token over :attr:`window` (a session of one server only: GPUs read are not
    split between servers; ``None`` while down)."""
    errors: int = 0
    """Failed reads of it: failed scrapes, failed waits, losses (none against a healthy one)."""
    last_success: float | None = None
    """Unix seconds of the newest successful scrape."""
    late_reads: int = 0
    """Scrapes read over three intervals late while it was up
    (:meth:`~specwatch.core.server.MetricsWindow.late_read`): the exporter short of CPU, or
    the server slow to answer; their windows' figures are means over the whole span."""
    goodput: tuple[GoodputCount, ...] = ()
    """Requests timed against each objective set, since the exporter started (counters: kept
    while the server is down)."""


@dataclass(frozen=True, slots=True)
class GoodputCount:
    """Requests the server's histograms timed against one objective, and how many met it: at
    least ``met_low``, at most ``met_high`` (equal when the objective is a bucket bound)."""

    objective: str
    """``ttft`` or ``tpot``."""
    limit_s: float
    requests: float = 0.0
    met_low: float = 0.0
    met_high: float = 0.0

    def plus(self, low: float, high: float, requests: float) -> GoodputCount:
        """These counts with one window's added (:func:`~specwatch.core.goodput.cdf_counts`)."""
        return replace(
            self,
            requests=self.requests + requests,
            met_low=self.met_low + low,
            met_high=self.met_high + high,
        )


def _goodput_counts(slo: Slo) -> tuple[GoodputCount, ...]:
    limits = (("ttft", slo.ttft_s), ("tpot", slo.tpot_s))
    return tuple(GoodputCount(name, limit) for name, limit in limits if limit is not None)


def _add_goodput(
    counts: tuple[GoodputCount, ...], window: MetricsWindow
) -> tuple[GoodputCount, ...]:
    out = []
    for c in counts:
        cdf = window.latency_cdf.get(c.objective)
        got = cdf_counts(cdf, c.limit_s) if cdf else None
        out.append(c if got is None else c.plus(*got))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class GpuView:
    """The GPUs as the exporter shows them."""

    inventory: GpuInventory | None = None
    tick: GpuTick | None = None
    errors: int = 0
    last_success: float | None = None


@dataclass(frozen=True, slots=True)
class View:
    """Everything one scrape shows."""

    servers: tuple[ServerView, ...]
    gpus: GpuView = field(default_factory=GpuView)
    host: HostSpan | None = None
    """This host's CPU over the newest interval the session read."""


class Readings:
    """A session subscriber keeping the newest readings (thread-safe).

    Args:
        endpoints: The session's servers, by index.
        wall: Unix seconds (for the last-success series).
        slo: Goodput's objectives (``--slo-ttft`` / ``--slo-tpot``).
        interval_s: The session's ``/metrics`` interval (what a late read is late against).
        gpus_off: GPUs are not read, as asked (``--no-gpu``): their unavailable inventory is
            no failed read.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        wall: Callable[[], float] = time.time,
        slo: Slo = DEFAULT_SLO,
        interval_s: float = 1.0,
        gpus_off: bool = False,
    ):
        self._wall = wall
        self.interval_s = interval_s
        self.gpus_off = gpus_off
        self._lock = threading.Lock()
        counts = _goodput_counts(slo)
        self._servers = [ServerView(label(redact(str(e), e)), goodput=counts) for e in endpoints]
        self._kept: list[tuple[MetricsWindow | None, LiveVerdictState | None]] = [
            (None, None) for _ in endpoints
        ]
        """Per server, the newest window and verdict since it was last lost: withdrawn while a
        scrape fails, shown again once one succeeds (the session's verdict did not end)."""
        self._connected = [False for _ in endpoints]
        """Ready and not lost since: a verdict arriving otherwise was judged on readings from
        before the loss."""
        self._ready_t = [-math.inf for _ in endpoints]
        """Session seconds each server was last ready (a window reaching back before it spans
        the outage, not a late read)."""
        self._was_ready = [False for _ in endpoints]
        """Ready at least once: from then on a wait is a failed read of a server that was up."""
        self._gpus = GpuView()
        self._host: HostSpan | None = None
        self._power = PowerLog()
        self._spec: SpecConfig | None = None
        """The first server's speculative setup (its draft length, for the rejected share)."""

    def __call__(self, event: ev.SessionEvent) -> None:
        """Take one session event."""
        with self._lock:
            self._take(event)

    def _set(self, index: int, **changes: object) -> None:
        if 0 <= index < len(self._servers):
            self._servers[index] = replace(self._servers[index], **changes)  # type: ignore[arg-type]

    def _failed(self, index: int, *, lost: bool) -> None:
        """A failed read: down, figures withdrawn, one more error; ``lost`` also forgets them."""
        if not 0 <= index < len(self._servers):
            return
        if lost:
            self._kept[index] = (None, None)
            self._connected[index] = False
        self._set(
            index,
            up=False,
            window=None,
            verdict=None,
            energy=None,
            errors=self._servers[index].errors + 1,
        )

    def _scraped(self, index: int, window: MetricsWindow) -> None:
        if not 0 <= index < len(self._servers):
            return
        notes = window.notes
        if notes.get("error") and "metrics" not in notes:  # metrics off is an answer, not a fault
            self._failed(index, lost=False)
            return
        kept, verdict = self._kept[index]
        energy = self._servers[index].energy
        goodput = self._servers[index].goodput
        late = self._servers[index].late_reads
        if window.late_read(self.interval_s, self._ready_t[index]):
            late += 1
        # A window of no width (the first scrape) measured nothing: keep the one before.
        if window.dt > 0:
            kept = window
            inv = self._gpus.inventory
            no_gpus = inv.reason if inv is not None and not inv.available else None
            one = len(self._servers) == 1
            energy = self._power.energy(window, no_gpus, self._spec) if one else None
            if not window.restarted:  # a restart's window is no delta of requests
                goodput = _add_goodput(goodput, window)
        self._kept[index] = (kept, verdict)
        self._set(
            index,
            up=True,
            last_success=self._wall(),
            window=kept,
            verdict=verdict,
            energy=energy,
            goodput=goodput,
            late_reads=late,
        )

    def _take(self, event: ev.SessionEvent) -> None:
        if isinstance(event, ev.MetricsScraped):
            self._scraped(event.server, event.window)
        elif isinstance(event, ev.ServerReady):
            if 0 <= event.server < len(self._ready_t):
                self._ready_t[event.server] = event.t
            self._ready(event.server, event.info)
        elif isinstance(event, ev.ServerWaiting):
            if event.state != "ready":  # the attempt that found it ready is no failure
                self._waiting(event.server, event.state)
        elif isinstance(event, ev.ServerLost):
            self._failed(event.server, lost=True)
        elif isinstance(event, ev.VerdictChanged):
            s = event.server
            if 0 <= s < len(self._servers) and self._connected[s]:
                self._kept[s] = (self._kept[s][0], event.state)
                if self._servers[s].up:
                    self._set(s, verdict=event.state)
        elif isinstance(event, ev.GpuTicked):
            self._power.add(event.tick)
            g = self._gpus
            if event.tick.error:  # the GPUs' last figures are no longer current: dropped
                self._gpus = replace(g, tick=None, errors=g.errors + 1)
            else:
                self._gpus = replace(g, tick=event.tick, last_success=self._wall())
        elif isinstance(event, ev.HostSampled):
            self._host = event.span
        elif isinstance(event, ev.GpuInventoryChanged):
            bad = 0 if event.inventory.available or self.gpus_off else 1
            g = self._gpus
            self._gpus = replace(g, inventory=event.inventory, errors=g.errors + bad)

    def _waiting(self, index: int, state: str) -> None:
        if not 0 <= index < len(self._servers):
            return
        if self._was_ready[index] or state not in ("refused", "loading"):
            self._failed(index, lost=True)

    def _ready(self, index: int, info: ServerInfo) -> None:
        if not 0 <= index < len(self._servers):
            return
        self._connected[index] = True
        if index == 0:
            self._spec = info.spec
        self._was_ready[index] = True
        names = {"model": label(info.model), "dialect": label(str(info.dialect.value))}
        counters = info.metrics_enabled is not False
        if not counters:  # no scrape will say: answering detection is up
            self._set(index, up=True, last_success=self._wall(), counters=counters, **names)
        else:
            self._set(index, counters=counters, **names)

    def view(self) -> View:
        """A consistent copy of what is known now."""
        with self._lock:
            return View(tuple(self._servers), self._gpus, self._host)


__all__ = ["LABEL_LIMIT", "GoodputCount", "GpuView", "Readings", "ServerView", "View", "label"]
