"""What the TUI shows, as plain data: bounded histories, marks and the latest readings; and the
inbox session events wait in until the app applies them to the model.

The app applies its session's events to this model (GPU ticks, metrics windows, server status,
benchmark events, the live verdict the session computed); the panes read it when they redraw.
It never imports textual, so it is tested directly, and snapshot tests and screenshots fill it
with deterministic data.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from specwatch.core import gpu as rules
from specwatch.core.energy import Energy, PowerLog
from specwatch.core.goodput import DEFAULT_SLO
from specwatch.core.session_figures import SessionSummary, SessionTotals
from specwatch.core.window_mean import HeldLatest, SteadyMean
from specwatch.core.windows import WINDOWS as WINDOWS
from specwatch.session.verdict_state import WAITING, LiveVerdictState
from specwatch.ui.renderables import TimeSeries
from specwatch.ui.timeline import DOWN_MARK_S as DOWN_MARK_S
from specwatch.ui.timeline import Mark, Timeline

if TYPE_CHECKING:
    # Annotations only: the samples' classes load with the first sample, after the first frame.
    from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.server import LatencyBucket, MetricsWindow, ServerInfo
    from specwatch.session.events import SessionEvent

HISTORY = 4000
"""Points kept per series: over an hour at the default 1 s rate."""
ADVICE_WINDOWS = 1800
"""Windows kept for the draft advisor (``a``): half an hour at one scrape a second."""
_H = TypeVar("_H")
HELD = ("gen_tok_s", "accept_length", "draft_acceptance_rate")
"""The window readings that are held (dimmed, with their age) when a window lacks them."""
STEADY = ("step_latency_s", "step_tokens", "prompt_tok_s", "requests_per_s")
"""The window readings the verify and load panes show as a steady mean
(``specwatch.core.window_mean``)."""
NVML_SMOOTHING = 0.2
"""Weight of the newest tick in the smoothed NVML cost."""
SPREAD_MAX = 600
"""The most intervals one late read's rate is drawn over."""


# --- checks: a malformed window or tick is refused, never drawn ------------------------------

NUMBER_TYPES = frozenset({"float", "int", "float | None", "int | None"})
"""The annotations of the samples' number fields (with postponed annotations, as text)."""


@functools.cache
def number_fields(cls: type) -> tuple[str, ...]:
    """The fields of the dataclass ``cls`` that hold a number (or ``None``), in order."""
    return tuple(f.name for f in dataclasses.fields(cls) if str(f.type) in NUMBER_TYPES)


def is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_window(w: MetricsWindow) -> None:
    """Refuse a window whose numbers are not numbers (a bad sample is skipped, never drawn).

    Raises:
        ValueError: Naming the first bad field.
    """
    from specwatch.core.server import MetricsWindow  # loaded by then: the first frame is not

    if not isinstance(w, MetricsWindow):
        raise ValueError(f"not a metrics window: {type(w).__name__}")
    for name in number_fields(MetricsWindow):
        v = getattr(w, name)
        if v is not None and not is_number(v):
            raise ValueError(f"metrics window {name}={v!r}")
    for reason, n in w.finished_by_reason.items():
        if not isinstance(reason, str) or not is_number(n):
            raise ValueError(f"metrics window finished_by_reason[{reason!r}]={n!r}")
    for key, buckets in w.latency_buckets.items():
        for b in buckets:
            if not _bucket_ok(b):
                raise ValueError(f"metrics window latency_buckets[{key!r}]={b!r}")
    ctx = w.largest_context
    if ctx is not None and not _bucket_ok(ctx):
        raise ValueError(f"metrics window largest_context={ctx!r}")
    pos = w.per_position_acceptance
    if pos is not None and not all(is_number(p) for p in pos):
        raise ValueError(f"metrics window per_position_acceptance={pos!r}")


def _bucket_ok(b: LatencyBucket) -> bool:
    """A quantile in ``[0, 1]`` and ``(low, high]`` with ``0 <= low <= high`` (``high`` may be
    ``inf``: the overflow bucket)."""
    return (
        isinstance(b.q, int | float)
        and 0.0 <= b.q <= 1.0
        and is_number(b.low)
        and b.low >= 0
        and isinstance(b.high, int | float)
        and b.high >= b.low
    )


def check_tick(tick: GpuTick) -> None:
    """Refuse a GPU tick whose samples are malformed.

    Raises:
        ValueError: Naming the first bad field.
    """
    from specwatch.core.gpu import GpuSample, GpuTick  # as above

    if not isinstance(tick, GpuTick) or not is_number(tick.t):
        raise ValueError("not a GPU tick")
    if not isinstance(tick.samples, tuple | list):
        raise ValueError(f"GPU tick samples={tick.samples!r}")
    for s in tick.samples:
        if not isinstance(s, GpuSample) or not isinstance(s.index, int):
            raise ValueError(f"not a GPU sample: {s!r}")
        for name in number_fields(GpuSample):
            v = getattr(s, name)
            if v is not None and not is_number(v):
                raise ValueError(f"GPU {s.index} {name}={v!r}")


# --- the model ------------------------------------------------------------------------------


@dataclass(slots=True)
class BenchState:
    """A benchmark started from the TUI, as its events report it."""

    phase: str = "starting"
    """``starting``, ``warmup``, ``running``, ``finished``, ``interrupted`` or ``error``."""
    index: int = 0
    total: int = 0
    message: str = ""
    last_tok_s: list[float] = field(default_factory=list)
    started_t: float = -math.inf
    ended_t: float = math.inf

    @property
    def active(self) -> bool:
        """Still going: starting, in its warmups or its measured runs."""
        return self.phase in ("starting", "warmup", "running")


@dataclass
class ProfileState:
    """A profile asked for from the TUI (``P``), as its events report it."""

    phase: str
    """One of the trigger's phases (asking, armed, capturing, writing, reading), or ``ended``."""
    words: str
    active: bool = True


straggler = rules.sample_straggler
"""Index of the GPU the pane marks as setting the pace: the rule ``compare`` applies too."""


class MonitorModel:
    """Everything the panes draw. Mutated on the UI thread only.

    Each section carries a version number that grows on change, so a pane redraws only when the
    data behind it moved.
    """

    def __init__(self, baseline_ms: float | None = None, baseline_source: str = "") -> None:
        self.inventory: GpuInventory | None = None
        self.tick: GpuTick | None = None
        self.sm_clock: dict[int, TimeSeries] = {}
        """Each GPU's SM clock over time (its trend spans the graph's window)."""
        self._last_busy: dict[int, GpuSample] = {}
        self.power = PowerLog()
        self.energy: Energy | None = None
        """Energy per token over the latest window (the GPU pane's last line)."""
        self.tok_s = TimeSeries(HISTORY)
        self.clock_pct = TimeSeries(HISTORY)
        self.hottest_c = TimeSeries(HISTORY)
        self.accept_length = TimeSeries(HISTORY)
        self.acceptance_rate = TimeSeries(HISTORY)
        self.running = TimeSeries(HISTORY)
        self.waiting = TimeSeries(HISTORY)
        """Requests running and waiting at each scrape: their peaks over the graph's window."""
        self.timeline = Timeline()
        self.held: HeldLatest[float] = HeldLatest()
        """The newest value of each of :data:`HELD`."""
        self.steady = {name: SteadyMean() for name in STEADY}
        self.latency: HeldLatest[tuple[LatencyBucket, ...]] = HeldLatest()
        """The load pane's percentile buckets, held while windows have none."""
        self.positions: HeldLatest[tuple[float, ...]] = HeldLatest()
        """Per-position acceptance, held like :data:`HELD` while windows have none."""
        self.window: MetricsWindow | None = None
        """Latest window with a real interval (``dt > 0``)."""
        self.last_scrape: MetricsWindow | None = None
        self.windows: deque[MetricsWindow] = deque(maxlen=ADVICE_WINDOWS)
        """The latest windows with a real interval, oldest first (the advisor's input)."""
        self.server: ServerInfo | None = None
        self.ready_t = -math.inf
        """When the server last answered ready (a window reaching back past it spans an
        outage, not a late read)."""
        self.commit: str | None = None
        """The server's code commit for the status line (``"0c1e570*"`` when dirty), if known."""
        self.server_argv: tuple[str, ...] = ()
        """The ready server's command line (redacted) where it runs here: the advisor's syntax."""
        self.session = SessionTotals()
        """Busy/idle time, requests, tokens and goodput since the start or the reset key (``z``)."""
        self.slo = DEFAULT_SLO
        """The goodput objectives (``--slo-ttft`` / ``--slo-tpot``)."""
        self.connection = "starting"
        self.connection_ok = False
        self.baseline_ms = baseline_ms
        self.baseline_source = baseline_source
        self.monitor_cpu_pct: float | None = None
        self.gpu_opening = "opening NVML…"
        """What the GPU pane says before the first inventory (the session's source says)."""
        self.nvml_ms: float | None = None
        """NVML milliseconds per tick, smoothed (so the status line does not flicker)."""
        self.paused = False
        self.show_overhead = True
        """Show the monitor's own CPU and NVML cost (off for reproducible screenshots)."""
        self.graph_window = "5m"
        """The token-rate graph's window (one of :data:`WINDOWS`); the GPU trends span it too."""
        self.interval_s = 1.0
        """The GPU sampling interval, shown in the status line."""
        self.metrics_interval_s = 1.0
        """The ``/metrics`` interval asked for: windows far longer say the monitor reads late."""
        self.bench: BenchState | None = None
        self.profile: ProfileState | None = None
        self.replay_label: str | None = None
        """``REPLAY`` and the recorded time while replaying a recording; ``None`` when live."""
        self.now = 0.0
        self.verdict: LiveVerdictState = WAITING
        """The live verdict as the session last gave it (the verdict line words it)."""
        self.verdict_version = 0
        self.gpu_version = 0
        self.rate_version = 0
        self.spec_version = 0
        self.status_version = 0

    def session_summary(self) -> SessionSummary:
        """The session figures now (the load pane's ``session`` and ``goodput`` lines)."""
        return self.session.summary(self.slo, self.now)

    def reset_session(self) -> None:
        """Count the session figures from now (the ``z`` key)."""
        self.session.reset(self.now)
        self.spec_version += 1

    @property
    def marks(self) -> deque[Mark]:
        """The time axis's marks, oldest first (:class:`Timeline`)."""
        return self.timeline.marks

    @property
    def bench_runs(self) -> int:
        """Measured benchmark runs this session (marks are numbered across benchmarks)."""
        return self.timeline.bench_runs

    # --- GPUs ---------------------------------------------------------------------------------

    def set_inventory(self, inventory: GpuInventory) -> None:
        """Record what the sampler found at start-up."""
        self.inventory = inventory
        self.gpu_version += 1
        self.status_version += 1

    def add_tick(self, tick: GpuTick) -> None:
        """Take one GPU tick into the histories (a short idle spell shows the last busy sample:
        ``rules.held_busy``).

        Raises:
            ValueError: The tick is malformed (nothing is changed).
        """
        check_tick(tick)
        self.power.add(tick)  # as read: an idle spell's held busy sample drew no such power
        for s in tick.samples:
            if rules.sample_busy(s):
                self._last_busy[s.index] = s
        held = tuple(rules.held_busy(s, self._last_busy.get(s.index)) for s in tick.samples)
        tick = replace(tick, samples=held)
        self.tick = tick
        self._advance(tick.t)
        pcts: list[float] = []
        temps: list[float] = []
        max_clock = self._max_clocks()
        for s in tick.samples:
            series = self.sm_clock.get(s.index)
            if series is None:
                series = self.sm_clock[s.index] = TimeSeries(HISTORY)
            series.append(tick.t, None if s.sm_clock_mhz is None else float(s.sm_clock_mhz))
            frac = rules.clock_fraction(s.sm_clock_mhz, max_clock.get(s.index))
            if frac is not None:
                pcts.append(100.0 * frac)
            if s.temp_c is not None:
                temps.append(float(s.temp_c))
        cost = tick.cost_ms
        if is_number(cost):
            prev = self.nvml_ms
            self.nvml_ms = cost if prev is None else prev + NVML_SMOOTHING * (cost - prev)
        self.clock_pct.append(tick.t, sum(pcts) / len(pcts) if pcts else None)
        self.hottest_c.append(tick.t, max(temps) if temps else None)
        self.gpu_version += 1
        self.rate_version += 1
        self.status_version += 1

    def _max_clocks(self) -> dict[int, int]:
        if self.inventory is None:
            return {}
        return {g.index: g.max_sm_clock_mhz for g in self.inventory.gpus if g.max_sm_clock_mhz}

    # --- server ---------------------------------------------------------------------------------

    def set_waiting(
        self, t: float, state: str, attempt: int, elapsed_s: float, detail: str
    ) -> None:
        """The server is not ready yet (refused, loading or erroring): a waiting mark
        (:meth:`Timeline.waiting`)."""
        self._advance(t)
        self.connection_ok = False
        self.connection = f"waiting: {state} (attempt {attempt}, {elapsed_s:.0f}s)"
        if detail:
            self.connection += f" {detail}"
        self.timeline.waiting(t, state, attempt, elapsed_s)
        self.status_version += 1
        self.rate_version += 1

    def set_ready(self, t: float, info: ServerInfo) -> None:
        """The server answered: close the loading mark and open a warmup mark."""
        self._advance(t)
        self.server = info
        self.ready_t = t
        self.commit = None  # the identity of this (maybe restarted) server follows
        self.server_argv = ()
        self.connection_ok = True
        self.connection = self._connected()
        self.timeline.ready(t)
        self.status_version += 1
        self.rate_version += 1
        self.spec_version += 1

    def _connected(self) -> str:
        # the whole refusal is in probe and the sources screen; the line keeps room for the rest
        keyless = self.server is not None and self.server.keyless
        return "connected · metrics only: API key missing or wrong" if keyless else "connected"

    def set_identity(self, identity: ServerIdentity) -> None:
        """The ready server's code identity arrived: show its commit beside the version."""
        from specwatch.sources.identity.process import commit_label  # after the first frame

        self.commit = commit_label(identity)
        self.server_argv = identity.cmdline
        if self.server is not None:
            from specwatch.core.launch_config import server_with_arguments

            self.server = server_with_arguments(self.server, identity)
        self.status_version += 1

    def set_lost(self, t: float, reason: str) -> None:
        """The server stopped answering."""
        self._advance(t)
        self.timeline.lost(t, self.connection_ok)
        self.connection_ok = False
        # "lost" only for a server that was there: a key rejected before it ever answered is not
        self.connection = f"{'lost' if self.server is not None else 'error'}: {reason}"
        self.status_version += 1
        self.rate_version += 1

    def add_window(self, w: MetricsWindow) -> None:
        """Take one metrics scrape into the histories (a first scrape has ``dt == 0``).

        Raises:
            ValueError: The window is malformed (nothing is changed).
        """
        check_window(w)
        self._advance(w.t)
        self.last_scrape = w
        self.session.add(w)
        if w.restarted:
            self.timeline.restarted(w.t)
        if w.dt > 0:
            self.window = w
            # The advice reads neither the latency CDF nor the latency buckets (the panes read
            # the newest window's): kept for 1,800 windows they would be most of the history.
            slim = w.latency_cdf or w.latency_buckets
            self.windows.append(replace(w, latency_cdf={}, latency_buckets={}) if slim else w)
            if w.restarted:
                self.held.clear()
                self.latency.clear()
                self.positions.clear()
            if w.per_position_acceptance:
                self.positions.add(w.t, {"per_position_acceptance": w.per_position_acceptance})
            self._add_rate(w, self._hold(w, "gen_tok_s"))
            self.accept_length.append(w.t, self._hold(w, "accept_length"))
            self.acceptance_rate.append(w.t, self._hold(w, "draft_acceptance_rate"))
            self.running.append(w.t, w.requests_running)
            self.waiting.append(w.t, w.requests_waiting)
            for name, steady in self.steady.items():
                if w.restarted:
                    steady.clear()
                steady.add(w.t, w.dt, getattr(w, name))
            self.latency.add(w.t, w.latency_buckets)
            self.timeline.rate(w.t, w.gen_tok_s)
            inv = self.inventory
            no_gpus = inv.reason if inv is not None and not inv.available else None
            spec = self.server.spec if self.server is not None else None
            self.energy = self.power.energy(w, no_gpus, spec)
            self.gpu_version += 1
        if "error" in w.notes and self.connection_ok:
            self.connection = f"scrape error: {w.notes['error']}"
        elif self.connection_ok:
            self.connection = self._connected()
        self.rate_version += 1
        self.spec_version += 1
        self.status_version += 1

    def late_read(self, w: MetricsWindow) -> bool:
        """Whether ``w`` is a late read (:meth:`MetricsWindow.late_read`) since the server was
        last ready."""
        return w.late_read(self.metrics_interval_s, self.ready_t)

    def _add_rate(self, w: MetricsWindow, value: float | None) -> None:
        """The window's tok/s; a late read's over every interval it spans, since its rate is
        the mean over all of them (drawn as one point, it left a comb of gaps the server never
        had; docs/live.md)."""
        if value is not None and self.late_read(w):
            step = self.metrics_interval_s
            for k in range(min(int(w.dt / step), SPREAD_MAX) - 1, 0, -1):
                self.tok_s.append(w.t - k * step, value)
        self.tok_s.append(w.t, value)

    def _hold(self, w: MetricsWindow, name: str) -> float | None:
        """The window's reading, else the last one while :attr:`held` keeps it."""
        v: float | None = getattr(w, name)
        if v is not None:
            self.held.add(w.t, {name: v})
            return v
        last = self.held.seen(w.t, name)
        return None if last is None else last[1]

    def peak(self, series: TimeSeries) -> float | None:
        """The highest reading of ``series`` over the graph's window (``None``: none known)."""
        known = [v for _, v in series.after(self.now - WINDOWS[self.graph_window]) if v is not None]
        return max(known) if known else None

    def reading(self, name: str) -> tuple[float | None, float | None]:
        """``(value, age)`` of a held reading: age ``None`` when the newest window measured it."""
        return self._aged(self.held, name)

    def per_position(self) -> tuple[tuple[float, ...] | None, float | None]:
        """``(per-position acceptance, age)``, held as :meth:`reading` holds a reading."""
        return self._aged(self.positions, "per_position_acceptance")

    def _aged(self, held: HeldLatest[_H], name: str) -> tuple[_H | None, float | None]:
        w = self.window
        last = None if w is None else held.seen(w.t, name)
        if w is None or last is None:
            return (None, None)
        return (last[1], None if w.t <= last[0] else self.now - last[0])

    # --- benchmark ------------------------------------------------------------------------------

    def bench_event(
        self, t: float, kind: str, index: int, total: int, message: str, tok_s: float | None
    ) -> None:
        """Follow a benchmark's events: progress, and a mark per measured run."""
        self._advance(t)
        b = self.bench
        if b is None or kind == "started":
            b = self.bench = BenchState()
        b.index, b.total, b.message = index, total, message
        self.timeline.bench(t, kind)
        if kind == "started":
            b.phase, b.started_t = "warmup", t
        elif kind == "warmup_done":
            b.phase = "running" if index >= total else "warmup"
        elif kind == "run_start":
            b.phase = "running"
        elif kind == "run_done" and tok_s is not None:
            b.last_tok_s.append(tok_s)
        elif kind in ("finished", "interrupted", "error"):
            b.phase, b.ended_t = kind, t
        self.rate_version += 1
        self.status_version += 1

    def bench_overlaps(self, w: MetricsWindow) -> bool:
        """Whether ``w`` overlaps the benchmark started here: the requests it saw finish may
        be the benchmark's own, each cut at its own ``--max-tokens``."""
        b = self.bench
        return b is not None and w.t >= b.started_t and w.t - w.dt <= b.ended_t

    def profile_event(self, t: float, phase: str, words: str) -> None:
        """Follow a profile's progress (``phase`` ``ended`` once it is over)."""
        self._advance(t)
        self.profile = ProfileState(phase, words, active=phase != "ended")
        self.timeline.profile(t, phase)
        self.rate_version += 1
        self.status_version += 1

    # --- misc -----------------------------------------------------------------------------------

    def set_verdict(self, state: LiveVerdictState) -> None:
        """The live verdict the session reached (its ``VerdictChanged`` event)."""
        self.verdict = state
        self.verdict_version += 1

    def set_monitor_cpu(self, pct: float | None) -> None:
        """The monitor's own CPU use, percent of one core."""
        if pct != self.monitor_cpu_pct:
            self.monitor_cpu_pct = pct
            self.status_version += 1

    def _advance(self, t: float) -> None:
        if t > self.now:
            self.now = t

    def marks_since(self, t0: float) -> Iterable[Mark]:
        """Marks that overlap ``(t0, now]``."""
        return self.timeline.since(t0, self.now)


class EventInbox:
    """Session events for the app in the order they happened; any thread puts, the app takes.

    ``deque.append`` and ``popleft`` are atomic, so no lock is needed.
    """

    def __init__(self) -> None:
        self._items: deque[SessionEvent | Callable[[], object]] = deque()

    def put(self, item: SessionEvent | Callable[[], object]) -> None:
        """Add ``item`` behind those waiting."""
        self._items.append(item)

    def take(self) -> list[SessionEvent | Callable[[], object]]:
        """Every waiting item, oldest first; the inbox is then empty."""
        out: list[SessionEvent | Callable[[], object]] = []
        pop = self._items.popleft
        while True:
            try:
                out.append(pop())
            except IndexError:
                return out

    def __len__(self) -> int:
        return len(self._items)
