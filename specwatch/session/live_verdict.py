"""The live verdict: the current window against a reference, continuously, headless.

The question specwatch exists for — GPU state, load, or code? — answered on the live screen
with the rule and wording of ``compare`` (:func:`specwatch.core.judge.judge`). The
*reference* is one of:

- **steady**: the first :data:`REFERENCE_S` seconds of traffic after the server's warmup settled
  (two consecutive windows with traffic within :data:`WARMUP_SETTLED`, or :data:`WARMUP_MAX_S`);
- **marked**: the window ending at a moment the user marked (a key in the TUI);
- **snapshot**: a benchmark snapshot given on the command line (``--reference FILE``).

The *current* window is the last :data:`CURRENT_S` seconds. Each side holds tok/s per metrics
interval, the slowest busy GPU's mean SM clock (and that board's maximum), the busy GPUs' lowest
memory clock (a memory-bound decode follows it), their DRAM activity and DRAM traffic per token
where the source reads it (dcgm-exporter's profiling field), the clock-event reasons active on
busy GPUs, the mean running requests and prompt tok/s, the accept length, and the server's
launch configuration when the window was read (a server restarted with another draft length is
**configuration changed**, as in ``compare``).

Feed it session events (:meth:`LiveVerdict.feed`, usable as a session subscriber) or the typed
calls; read :meth:`LiveVerdict.state`. Not thread-safe: feed it from one thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from specwatch.core import gpu as rules
from specwatch.session.verdict_state import WAITING, LiveVerdictState, Reference

if TYPE_CHECKING:
    # The TUI builds a LiveVerdict before its first frame; the events, the rule (judge,
    # statistics) and the snapshot records are imported when first used, after it.
    from specwatch.core.gpu import GpuInventory, GpuTick
    from specwatch.core.host import HostSpan
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.judge import Figures
    from specwatch.core.launch_config import LaunchConfig
    from specwatch.core.server import MetricsWindow, ServerInfo
    from specwatch.session import events as ev

REFERENCE_S = 30.0
"""Seconds of traffic a steady or marked reference spans."""
CURRENT_S = 30.0
"""Seconds the current window spans."""
WARMUP_MAX_S = 120.0
"""Warmup ends after this long even if the rate never settles."""
WARMUP_SETTLED = 0.15
"""Warmup ends when two consecutive windows with traffic agree within 15%."""
KEEP_S = 600.0
"""Seconds of readings kept (a mark looks back :data:`CURRENT_S`)."""
IDLE_S = 10.0
"""A server that generated no token for this long (or never since it was watched) is idle, not
warming up: a warmup is only seen under traffic."""


AWAY = "server away: judged again once it answers"
"""What the verdict says while the server does not answer."""
POOL_S = 3.0
"""tok/s samples are pooled over this many seconds of consecutive intervals: a scrape's exact
moment jitters against the counters it reads, and the jitter cancels inside a pool."""
MIN_INTERVALS = 5
"""Pooled tok/s samples with traffic a window needs before it is judged."""


@dataclass(frozen=True, slots=True)
class Interval:
    """One metrics interval: tok/s and the load beside it."""

    t: float
    dt: float
    tok_s: float
    running: float | None
    prompt_tok_s: float | None
    accept_length: float | None


@dataclass(frozen=True, slots=True)
class GpuPoint:
    """One GPU tick as the verdict reads it: the pace of the busy GPUs."""

    t: float
    clock_mhz: float | None
    max_mhz: float | None
    reasons: frozenset[str]
    mem_clock_mhz: float | None = None
    dram_active: float | None = None
    """Mean DRAM activity of the busy GPUs."""
    dram_mhz: float | None = None
    """``Σ dram_active × memory clock`` over the busy GPUs (bytes per second, up to the bus
    width); ``None`` unless every busy GPU has both."""


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _request_end(w: MetricsWindow) -> list[str]:
    """The figures ``w`` gives for whole requests that ended in it, not for the window
    (its ``request_end`` note: ``"name, name: why"``)."""
    names, _, _ = w.notes.get("request_end", "").partition(":")
    return [n.strip() for n in names.split(",") if n.strip()]


def _pool(intervals: list[Interval]) -> list[float]:
    """tok/s over consecutive runs of intervals spanning at least :data:`POOL_S` each."""
    out: list[float] = []
    tokens = span = 0.0
    for i in intervals:
        tokens += i.tok_s * i.dt
        span += i.dt
        if span >= POOL_S:
            out.append(tokens / span)
            tokens = span = 0.0
    if span >= POOL_S / 2:
        out.append(tokens / span)
    return out


def gpu_point(tick: GpuTick, max_clock: Mapping[int, float]) -> GpuPoint:
    """One GPU tick: the slowest busy GPU's clock (and its board's maximum in ``max_clock``),
    the busy GPUs' lowest memory clock, their DRAM activity and their active reasons."""
    busy = [s for s in tick.samples if rules.sample_busy(s)]
    slow = rules.slowest(rules.pace_of_samples(busy))
    active = frozenset(
        r.short
        for s in busy
        for r in rules.decode(s.clock_event_reasons)
        if r.bit != rules.IDLE_BIT
    )
    clock = slow.sm_clock_mhz if slow is not None else None
    top = max_clock.get(slow.index) if slow is not None else None
    # A memory-bound decode waits on the slowest HBM, whichever board that is.
    mem = min((s.mem_clock_mhz for s in busy if s.mem_clock_mhz is not None), default=None)
    drams = [(s.dram_active, s.mem_clock_mhz) for s in busy if s.dram_active is not None]
    dram = _mean([d for d, _ in drams])
    moved = None
    if busy and len(drams) == len(busy) and all(m is not None for _, m in drams):
        moved = sum(d * (m or 0) for d, m in drams)
    return GpuPoint(tick.t, clock, top, active, mem, dram, moved)


def span_figures(
    intervals: Iterable[Interval], gpus: Iterable[GpuPoint], t0: float, t1: float
) -> Figures | None:
    """The figures of ``(t0, t1]``; ``None`` with fewer than MIN_INTERVALS with traffic."""
    from specwatch.core.judge import Figures

    iv = [i for i in intervals if t0 < i.t <= t1]
    pooled = _pool(iv)
    if sum(1 for x in pooled if x > 0) < MIN_INTERVALS:
        return None
    gp = [g for g in gpus if t0 < g.t <= t1]
    clocks = [g.clock_mhz for g in gp if g.clock_mhz is not None]
    tops = [g.max_mhz for g in gp if g.max_mhz is not None]
    mems = [g.mem_clock_mhz for g in gp if g.mem_clock_mhz is not None]
    moved = _mean([g.dram_mhz for g in gp if g.dram_mhz is not None])
    rate = sum(pooled) / len(pooled)
    active: frozenset[str] = frozenset().union(*(g.reasons for g in gp))
    return Figures(
        tok_s=tuple(pooled),
        slowest_sm_clock_mhz=_mean(clocks),
        board_max_sm_clock_mhz=max(tops) if tops else None,
        clock_reasons=active,
        running_requests=_mean([i.running for i in iv if i.running is not None]),
        prompt_tok_s=_mean([i.prompt_tok_s for i in iv if i.prompt_tok_s is not None]),
        accept_length=_mean([i.accept_length for i in iv if i.accept_length is not None]),
        slowest_mem_clock_mhz=_mean(mems),
        dram_active=_mean([g.dram_active for g in gp if g.dram_active is not None]),
        dram_per_token=moved / rate if moved is not None and rate > 0 else None,
    )


class LiveVerdict:
    """Tracks a reference and judges the current window against it.

    Args:
        reference: A fixed reference (a snapshot's figures); ``None``: the first steady window.
    """

    def __init__(self, reference: Reference | None = None) -> None:
        self.reference = reference
        self._fixed = reference is not None
        self._intervals: deque[Interval] = deque()
        self._gpus: deque[GpuPoint] = deque()
        self._host: deque[tuple[float, HostSpan]] = deque()
        """This host's CPU by reading time: a window's figures get the spans inside it."""
        self._max_clock: dict[int, float] = {}
        self._ready = False
        self._no_metrics = ""
        self._away = False
        """The server stopped answering: no judgement of readings from before it stands."""
        self._server: ServerInfo | None = None
        self._launch: LaunchConfig | None = None
        self._seeded = False
        self._last_traffic: float | None = None
        self._warmup_t0: float | None = None
        self._warmup_prev: float | None = None
        self._steady_t0: float | None = None
        self._mark_pending: float | None = None
        self._own_load: deque[tuple[str, list[float | None]]] = deque(maxlen=8)
        """The session's own work on the server, ``(what, [start, end or None while it runs])``
        (``benchmark`` or ``profile``): the load of a benchmark is not the server's usual one,
        and profiled steps are slower than unprofiled ones, so no window holding either is
        judged or taken as reference."""
        self._mark_after_own = False
        self._now = 0.0
        self._state = WAITING
        self.version = 0
        """Grows whenever :meth:`state` changes."""

    # --- input ------------------------------------------------------------------------------

    def feed(self, event: ev.SessionEvent) -> None:
        """Take one session event (so the tracker can subscribe to a session directly)."""
        from specwatch.session import events as ev

        if isinstance(event, ev.GpuInventoryChanged):
            self.set_inventory(event.inventory)
        elif isinstance(event, ev.GpuTicked):
            self.add_tick(event.tick)
        elif isinstance(event, ev.HostSampled):
            self._host.append((event.t, event.span))
        elif isinstance(event, ev.MetricsScraped):
            self.add_window(event.window)
        elif isinstance(event, ev.ServerReady):
            self.set_server(event.info)
            self.server_ready(event.t, event.info.counters_off)
        elif isinstance(event, ev.ServerIdentified):
            self.set_server(self._server, event.identity)
        elif isinstance(event, ev.ServerLost):
            self.server_lost(event.t)
        elif isinstance(event, ev.BenchProgress) and event.kind == "started":
            self.own_load_started(event.t)
        elif isinstance(event, ev.BenchFinished):
            self.own_load_ended(self._now)
        elif isinstance(event, ev.ProfileProgress) and event.phase == "armed":
            self.own_load_started(event.t, "profile")
        elif isinstance(event, ev.ProfileFinished):
            self.own_load_ended(max(self._now, event.t), "profile")

    def own_load_started(self, t: float, what: str = "benchmark") -> None:
        """The session's own benchmark (or profile) started: the server's steps are not its
        usual ones."""
        self._own_load.append((what, [t, None]))
        self._update(max(self._now, t))

    def own_load_ended(self, t: float, what: str = "benchmark") -> None:
        """The session's own benchmark (or profile) ended at ``t``."""
        for kind, span in self._own_load:
            if kind == what and span[1] is None:
                span[1] = t
        if self._mark_after_own:
            self._mark_after_own = False
            self._mark_pending = t
        self._update(max(self._now, t))

    def _own_what(self) -> str:
        """What of the session's own is running or ran last: ``benchmark`` or ``profile``."""
        running = [what for what, (_, end) in self._own_load if end is None]
        if running:
            return running[-1]
        return self._own_load[-1][0] if self._own_load else "benchmark"

    def _own_load_in(self, t0: float, t1: float) -> float | None:
        """When the window ``(t0, t1]`` is clear of the session's own benchmarks: ``None`` if it
        already is, ``inf`` while one still runs, else the end of the last one in it."""
        clear: float | None = None
        for _, (start, end) in self._own_load:
            assert start is not None
            if start <= t1 and (end is None or end > t0):
                clear = max(clear or 0.0, end if end is not None else float("inf"))
        return clear

    def set_inventory(self, inventory: GpuInventory) -> None:
        """The GPUs' maximum SM clocks (for the clock deficit)."""
        self._max_clock = {
            g.index: float(g.max_sm_clock_mhz) for g in inventory.gpus if g.max_sm_clock_mhz
        }

    def set_server(self, info: ServerInfo | None, identity: ServerIdentity | None = None) -> None:
        """The server as detected (and its process, once identified): the launch configuration
        that the windows read from now on are judged under."""
        from specwatch.core.launch_config import server_launch_config

        self._server = info
        self._launch = server_launch_config(info, identity) if info is not None else None

    def server_ready(self, t: float, no_metrics: str = "") -> None:
        """The server answered: its warmup starts now (not for a server :meth:`seed` showed
        running already). ``no_metrics``: why it serves no token counters, so that no verdict
        can form until it is started again with them."""
        if not self._seeded:
            self._start_warmup(t)
        self._ready, self._seeded = True, False
        if no_metrics != self._no_metrics or self._away:
            self._no_metrics, self._away = no_metrics, False
            self._update(max(self._now, t))

    def server_lost(self, t: float) -> None:
        """The server stopped answering: the verdict says so until it answers again, rather
        than keep a judgement of readings from before."""
        if self._ready and not self._away:
            self._away = True
            self._update(max(self._now, t))

    def seed(self, windows: Iterable[MetricsWindow]) -> None:
        """Take the server's windows read before this session (the fleet screen's), oldest
        first: a reference can come from them, and its first ready event is no warmup."""
        for w in windows:
            self.add_window(w)
        self._seeded = self._ready

    def add_tick(self, tick: GpuTick) -> None:
        """One GPU tick: the slowest busy GPU's clock, the busy GPUs' lowest memory clock and
        their active reasons."""
        self._gpus.append(gpu_point(tick, self._max_clock))
        self._advance(tick.t)

    def add_window(self, w: MetricsWindow) -> None:
        """One metrics window: an interval of tok/s and load, then a new verdict.

        A request running is traffic even in a window where no token counter moved. A figure
        the window gives for whole requests that ended in it (``notes["request_end"]``: the
        server counts it only then) is not pooled as if it were the window's.
        """
        self._away = False  # a reading: it answers
        if w.restarted:
            self._start_warmup(w.t)
        if (w.requests_running or 0) > 0:
            self._last_traffic = w.t
        if w.dt > 0 and w.gen_tok_s is not None:
            # tokens per step, drafted or not (what tok/s scales with, and what a benchmark's
            # streams count), not the drafted steps' accept length
            accept = None if "accept_length" in _request_end(w) else w.step_tokens
            self._intervals.append(
                Interval(w.t, w.dt, w.gen_tok_s, w.requests_running, w.prompt_tok_s, accept)
            )
            if not self._ready:
                # Attached to a server that was already running: no ready event to wait for.
                self._ready = True
                self._start_warmup(w.t - w.dt)
            if w.gen_tok_s > 0:
                self._last_traffic = w.t
            self._track_warmup(w.t, w.gen_tok_s)
        self._advance(w.t)
        self._update(w.t)

    def mark(self, t: float) -> None:
        """Use the window ending at ``t`` as the reference (or the next one, if it is too thin).

        A window that holds the session's own benchmark is not a reference: the mark then takes
        the window that starts when the benchmark has ended.
        """
        self._fixed = False
        clear = self._own_load_in(t - REFERENCE_S, t)
        if clear is not None:
            self._mark_after_own = clear == float("inf")
            self._mark_pending = None if self._mark_after_own else clear
            self._update(t)
            return
        figures = self._figures(t - REFERENCE_S, t)
        if figures is not None:
            self.reference = Reference("marked", "marked", figures, t)
            self._mark_pending = None
        else:
            self._mark_pending = t
        self._update(t)

    def use_reference(self, reference: Reference) -> None:
        """Judge against ``reference`` from now on (a snapshot)."""
        self.reference = reference
        self._fixed = True
        self._mark_pending = None
        self._update(self._now)

    # --- output ------------------------------------------------------------------------------

    def state(self) -> LiveVerdictState:
        """The latest verdict (or why there is none yet)."""
        return self._state

    @property
    def now(self) -> float:
        """The time of the newest reading taken in (where a mark made now ends)."""
        return self._now

    # --- internals ---------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        self._now = max(self._now, t)
        horizon = self._now - KEEP_S
        while self._intervals and self._intervals[0].t < horizon:
            self._intervals.popleft()
        while self._gpus and self._gpus[0].t < horizon:
            self._gpus.popleft()
        while self._host and self._host[0][0] < horizon:
            self._host.popleft()

    def _start_warmup(self, t: float) -> None:
        self._warmup_t0 = t
        self._warmup_prev = None
        self._steady_t0 = None

    def _track_warmup(self, t: float, rate: float) -> None:
        t0 = self._warmup_t0
        if t0 is None:
            return
        if rate <= 0 and self._warmup_prev is None:
            self._warmup_t0 = t  # a warmup is timed from its first traffic, not across idling
            return
        if t - t0 > WARMUP_MAX_S:
            self._end_warmup(t)
            return
        if rate <= 0:
            return
        prev, self._warmup_prev = self._warmup_prev, rate
        if prev and abs(rate - prev) <= WARMUP_SETTLED * max(rate, prev):
            self._end_warmup(t)

    def _end_warmup(self, t: float) -> None:
        self._warmup_t0 = None
        self._steady_t0 = t

    def _figures(self, t0: float, t1: float) -> Figures | None:
        """The figures of ``(t0, t1]``; ``None`` with fewer than MIN_INTERVALS with traffic."""
        figures = span_figures(self._intervals, self._gpus, t0, t1)
        if figures is None:
            return None
        spans = [s for t, s in self._host if t0 < t <= t1]
        if spans:
            from specwatch.core.host import combine_spans

            figures = replace(figures, host=combine_spans(spans))
        return replace(figures, launch=self._launch) if self._launch is not None else figures

    def _settle_reference(self, t: float) -> str:
        """Fix a pending steady or marked reference when its window is complete; progress."""
        if self._fixed and self.reference is not None:
            return ""
        if self._mark_after_own:
            return f"reference from the mark: after your {self._own_what()} ends"
        if self._mark_pending is not None:
            t0 = self._mark_pending
            figures = self._figures(t0, t0 + REFERENCE_S) if t >= t0 + REFERENCE_S else None
            if figures is not None:
                self.reference = Reference("marked", "marked", figures, t0 + REFERENCE_S)
                self._mark_pending = None
                return ""
            return f"reference from the mark {min(t - t0, REFERENCE_S):.0f}/{REFERENCE_S:.0f} s"
        if self.reference is not None or self._steady_t0 is None:
            return ""
        t0 = self._steady_t0
        clear = self._own_load_in(t0, t0 + REFERENCE_S)
        if clear is not None:
            if clear != float("inf"):
                self._steady_t0 = clear
            return f"reference after your {self._own_what()} ends"
        if t >= t0 + REFERENCE_S:
            figures = self._figures(t0, t0 + REFERENCE_S)
            if figures is not None:
                self.reference = Reference("steady", "steady after warmup", figures, t)
                return ""
            self._steady_t0 = t  # too little traffic: try the next window
            return self._thin(t0, t0 + REFERENCE_S) or "waiting for steady traffic"
        return f"reference {t - t0:.0f}/{REFERENCE_S:.0f} s"

    def _thin(self, t0: float, t1: float) -> str:
        """Why ``(t0, t1]`` holds traffic yet too few readings to judge; empty if it holds no
        traffic. A monitor starved of CPU scrapes late: its intervals then span many seconds
        each, and "no traffic" would be false."""
        iv = [i for i in self._intervals if t0 < i.t <= t1]
        if len(_pool(iv)) >= MIN_INTERVALS or not any(i.tok_s > 0 for i in iv):
            return ""
        gap = sum(i.dt for i in iv) / len(iv)
        return (
            f"too few readings to judge: {len(iv)} in {t1 - t0:.0f} s, {gap:.0f} s apart "
            "(is specwatch short of CPU?)"
        )

    def _idle(self, t: float) -> str:
        """Why the server reads as idle at ``t`` (no token for :data:`IDLE_S`); empty if not."""
        if not self._intervals or self._own_load_in(t - IDLE_S, t) is not None:
            return ""
        if self._last_traffic is None:
            return "server idle: no tokens generated since watching began"
        if t - self._last_traffic >= IDLE_S:
            return f"server idle: no tokens generated in the last {IDLE_S:.0f} s"
        return ""

    def _update(self, t: float) -> None:
        progress = self._settle_reference(t)
        old = self._state
        idle = self._idle(t)
        if not self._ready and not self._intervals:
            new = WAITING
        elif self._no_metrics:  # else "waiting" for counters that will never come
            new = LiveVerdictState("waiting", f"none — {self._no_metrics}")
        elif self._away:
            new = LiveVerdictState("waiting", AWAY, self.reference)
        elif not self._intervals:  # ready, no rate yet: neither warming up nor idle is known
            new = LiveVerdictState("waiting", "reading the server's first metrics", self.reference)
        elif idle and (self.reference is None or self._warmup_t0 is not None):
            new = LiveVerdictState("idle", idle, self.reference)
        elif self._warmup_t0 is not None and self.reference is None:
            new = LiveVerdictState("warmup", "server warming up")
        elif self.reference is None or progress:
            new = LiveVerdictState("reference", progress or "collecting a reference")
        else:
            current = self._figures(t - CURRENT_S, t)
            own = self._own_load_in(t - CURRENT_S, t)
            if own is not None:
                what = self._own_what()
                if what == "profile":
                    detail = f"profiling the server: judged again {CURRENT_S:.0f} s after it ends"
                    new = LiveVerdictState("profiling", detail, self.reference, current)
                else:
                    detail = (
                        f"your benchmark is the load: judged again {CURRENT_S:.0f} s after it ends"
                    )
                    new = LiveVerdictState("benchmark", detail, self.reference, current)
            elif self._warmup_t0 is not None:
                new = LiveVerdictState("warmup", "server warming up", self.reference, current)
            elif current is None and (thin := self._thin(t - CURRENT_S, t)):
                new = LiveVerdictState("waiting", thin, self.reference)
            elif current is None:
                new = LiveVerdictState("idle", "no traffic to judge", self.reference)
            else:
                from specwatch.core.judge import judge

                judgement = judge(
                    self.reference.figures,
                    current,
                    reference_name="the reference",
                    current_name="now",
                )
                since = old.since if old.outcome == judgement.outcome else t
                new = LiveVerdictState("judged", "", self.reference, current, judgement, since)
        if new != old:
            self._state = new
            self.version += 1


__all__ = [
    "AWAY",
    "CURRENT_S",
    "IDLE_S",
    "MIN_INTERVALS",
    "POOL_S",
    "REFERENCE_S",
    "GpuPoint",
    "Interval",
    "LiveVerdict",
    "gpu_point",
    "span_figures",
]
