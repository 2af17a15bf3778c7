"""The host's CPU as a cause: readings of its counters, the figures over a span between two
readings, and the rule that calls the server short of CPU.

A :class:`HostReading` holds cumulative counters (``/proc/stat`` CPU time, the server's
scheduler run and wait time, every process's CPU time on a scan) read by
:mod:`specwatch.sources.host`; :func:`host_span` turns two readings into a :class:`HostSpan`
(shares and cores over the interval), :func:`combine_spans` pools spans (the runs of a
benchmark, the intervals of a live window).

The rule (:func:`contention`, :func:`host_contention`): a span is **contended** when the server
is on this host and

1. its threads waited for a CPU at least :data:`SERVER_WAIT_MIN` of the time they were runnable
   (``/proc/[pid]/task/*/schedstat``: run-queue wait against run time), or
2. more tasks were runnable than there are cores: the mean run queue (``procs_running`` less the
   reader itself) above the cores by :data:`RUN_QUEUE_OVER` per core, or
3. the hypervisor took at least :data:`STEAL_MIN` of the CPU time (steal).

A comparison names host CPU contention when the slower side is contended by a condition and
the faster side's same figure is lower by at least that condition's margin
(:data:`SERVER_WAIT_MARGIN`, :data:`RUN_QUEUE_MARGIN`, :data:`STEAL_MARGIN`): a host that was
equally busy on both sides explains nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SERVER_WAIT_MIN = 0.20
"""Share of its runnable time the server's threads spent waiting for a CPU that counts."""
SERVER_WAIT_MARGIN = 0.15
"""…and by how much more than on the faster side."""
RUN_QUEUE_OVER = 0.25
"""Runnable tasks beyond the cores, per core, that count (2.5 runnable on 2 cores does)."""
RUN_QUEUE_MARGIN = 0.5
"""…and by how many more per core than on the faster side."""
STEAL_MIN = 0.05
"""Share of the CPU time the hypervisor took (steal) that counts."""
STEAL_MARGIN = 0.05
"""…and by how much more than on the faster side."""
TOP_COMPETITORS = 3
"""How many of the other processes a span names."""
NAME_LIMIT = 32
"""Longest process name kept."""


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """All cores' time from ``/proc/stat``'s ``cpu`` line, in clock ticks."""

    busy: int
    """user, nice, system, irq and softirq."""
    idle: int
    """idle and iowait."""
    steal: int
    """Time the hypervisor ran something else while this guest wanted the CPU."""

    @property
    def total(self) -> int:
        """Every tick accounted."""
        return self.busy + self.idle + self.steal


@dataclass(frozen=True, slots=True)
class ProcessCpu:
    """One process's CPU time so far (``/proc/[pid]/stat`` utime + stime)."""

    pid: int
    name: str
    """Sanitised and bounded to :data:`NAME_LIMIT`."""
    ticks: int


@dataclass(frozen=True, slots=True)
class ServerCpu:
    """The server's processes' scheduler time so far, every thread summed."""

    run_ns: int
    """Time on a CPU."""
    wait_ns: int | None
    """Time runnable but waiting for a CPU (``None``: no schedstat on this kernel)."""
    threads: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HostReading:
    """The host's counters at one moment; a field that could not be read is ``None`` with the
    reason in ``missing``."""

    t: float
    """Monotonic seconds."""
    cores: int | None
    clock_ticks: int = 100
    """``SC_CLK_TCK``: ticks per second of the CPU times."""
    cpu: CpuTimes | None = None
    procs_running: int | None = None
    """Runnable tasks now, the reader included."""
    load1: float | None = None
    """The one-minute load average."""
    freq_mhz: float | None = None
    """Mean current frequency of the cores read."""
    governor: str | None = None
    server: ServerCpu | None = None
    """``None``: no server process on this host known, or not readable."""
    processes: tuple[ProcessCpu, ...] | None = None
    """Every process, on a scan; ``None`` between scans."""
    missing: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Competitor:
    """A process that took CPU beside the server."""

    name: str
    pid: int
    cores: float
    """Mean cores it used over the span."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSpan:
    """The host over a span: a benchmark run, a live interval, a whole benchmark."""

    duration_s: float
    server_local: bool = False
    """Whether the server runs on this host (its figures and the rule apply only then)."""
    cores: int | None = None
    busy_ratio: float | None = None
    """Share of all cores' time busy (steal excluded)."""
    steal_ratio: float | None = None
    load_per_core: float | None = None
    """The one-minute load average over the cores, at the span's end."""
    run_queue: float | None = None
    """Mean runnable tasks, the reader itself not counted."""
    freq_mhz: float | None = None
    governor: str | None = None
    server_cpu_cores: float | None = None
    """Cores the server's processes used (run time over the span)."""
    server_wait_ratio: float | None = None
    """Share of its runnable time the server's threads waited for a CPU."""
    others_cores: float | None = None
    """Busy cores less the server's."""
    competitors: tuple[Competitor, ...] = ()
    """The other processes that used most CPU, most first (at most :data:`TOP_COMPETITORS`)."""
    missing: Mapping[str, str] = field(default_factory=dict)

    @property
    def run_queue_per_core(self) -> float | None:
        """Runnable tasks per core."""
        if self.run_queue is None or not self.cores:
            return None
        return self.run_queue / self.cores


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def competitors_between(
    a: Sequence[ProcessCpu],
    b: Sequence[ProcessCpu],
    seconds: float,
    clock_ticks: int,
    exclude: frozenset[int] = frozenset(),
) -> tuple[Competitor, ...]:
    """The processes in both scans that used most CPU between them, ``exclude`` left out."""
    if seconds <= 0 or clock_ticks <= 0:
        return ()
    before = {p.pid: p for p in a}
    used: list[Competitor] = []
    for p in b:
        old = before.get(p.pid)
        if old is None or p.pid in exclude or p.ticks <= old.ticks:
            continue
        used.append(Competitor(p.name, p.pid, (p.ticks - old.ticks) / clock_ticks / seconds))
    used.sort(key=lambda c: (-c.cores, c.pid))
    return tuple(used[:TOP_COMPETITORS])


def host_span(
    a: HostReading,
    b: HostReading,
    *,
    server_local: bool = False,
    run_queue: Sequence[int] = (),
    competitors: tuple[Competitor, ...] = (),
) -> HostSpan:
    """The figures between readings ``a`` and ``b``.

    Args:
        a: The earlier reading.
        b: The later one.
        server_local: Whether the server runs on this host.
        run_queue: ``procs_running`` readings inside the span (``b``'s when empty).
        competitors: The other processes' CPU between the span's scans.
    """
    seconds = max(0.0, b.t - a.t)
    missing = dict(b.missing)
    busy = steal = None
    others = None
    if a.cpu is not None and b.cpu is not None and b.cpu.total > a.cpu.total:
        total = b.cpu.total - a.cpu.total
        busy = (b.cpu.busy - a.cpu.busy) / total
        steal = (b.cpu.steal - a.cpu.steal) / total
    server_cores = wait = None
    if a.server is not None and b.server is not None and seconds > 0:
        run = max(0, b.server.run_ns - a.server.run_ns)
        server_cores = run / 1e9 / seconds
        if a.server.wait_ns is not None and b.server.wait_ns is not None:
            waited = max(0, b.server.wait_ns - a.server.wait_ns)
            wait = _ratio(waited, run + waited)
    elif server_local:
        missing.setdefault("server_cpu_cores", "n/a: the server's processes are not readable")
    if busy is not None and b.cores and server_cores is not None:
        others = max(0.0, busy * b.cores - server_cores)
    queue = [q for q in run_queue] or ([b.procs_running] if b.procs_running is not None else [])
    return HostSpan(
        duration_s=seconds,
        server_local=server_local,
        cores=b.cores,
        busy_ratio=busy,
        steal_ratio=steal,
        load_per_core=b.load1 / b.cores if b.load1 is not None and b.cores else None,
        run_queue=max(0.0, sum(queue) / len(queue) - 1) if queue else None,
        freq_mhz=b.freq_mhz,
        governor=b.governor,
        server_cpu_cores=server_cores,
        server_wait_ratio=wait,
        others_cores=others,
        competitors=competitors,
        missing=missing,
    )


def _weighted(spans: Sequence[HostSpan], name: str) -> float | None:
    pairs: list[tuple[float, float]] = [
        (v, s.duration_s) for s in spans if (v := getattr(s, name)) is not None
    ]
    weight = sum(w for _, w in pairs)
    if not pairs:
        return None
    if weight <= 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * w for v, w in pairs) / weight


def combine_spans(spans: Sequence[HostSpan]) -> HostSpan | None:
    """The spans pooled, each figure weighted by the span's duration; ``None`` for none."""
    if not spans:
        return None
    last = spans[-1]
    names: dict[int, str] = {}
    used: dict[int, float] = {}
    scanned = sum(s.duration_s for s in spans if s.competitors)
    for s in spans:
        for c in s.competitors:
            names[c.pid] = c.name
            used[c.pid] = used.get(c.pid, 0.0) + c.cores * s.duration_s
    top = sorted(used, key=lambda pid: (-used[pid], pid))[:TOP_COMPETITORS]
    return HostSpan(
        duration_s=sum(s.duration_s for s in spans),
        server_local=any(s.server_local for s in spans),
        cores=last.cores,
        busy_ratio=_weighted(spans, "busy_ratio"),
        steal_ratio=_weighted(spans, "steal_ratio"),
        load_per_core=_weighted(spans, "load_per_core"),
        run_queue=_weighted(spans, "run_queue"),
        freq_mhz=_weighted(spans, "freq_mhz"),
        governor=last.governor,
        server_cpu_cores=_weighted(spans, "server_cpu_cores"),
        server_wait_ratio=_weighted(spans, "server_wait_ratio"),
        others_cores=_weighted(spans, "others_cores"),
        competitors=tuple(
            Competitor(names[pid], pid, used[pid] / scanned if scanned > 0 else 0.0) for pid in top
        ),
        missing=last.missing,
    )


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One condition of the rule met on a span."""

    figure: str
    """``"server_wait_ratio"``, ``"run_queue_per_core"`` or ``"steal_ratio"``."""
    value: float
    margin: float
    """How much lower the other side's figure must be."""
    words: str


def contention(span: HostSpan | None) -> tuple[Shortfall, ...]:
    """The conditions of the rule (module docstring) the span meets; empty when none, when the
    server is not on this host or nothing was read."""
    if span is None or not span.server_local:
        return ()
    out: list[Shortfall] = []
    wait = span.server_wait_ratio
    if wait is not None and wait >= SERVER_WAIT_MIN:
        out.append(
            Shortfall(
                "server_wait_ratio",
                wait,
                SERVER_WAIT_MARGIN,
                f"the server's threads waited for a CPU {wait:.0%} of their runnable time",
            )
        )
    queue = span.run_queue_per_core
    if queue is not None and queue >= 1.0 + RUN_QUEUE_OVER:
        out.append(
            Shortfall(
                "run_queue_per_core",
                queue,
                RUN_QUEUE_MARGIN,
                f"run queue {span.run_queue:.1f} on {span.cores} cores",
            )
        )
    steal = span.steal_ratio
    if steal is not None and steal >= STEAL_MIN:
        out.append(Shortfall("steal_ratio", steal, STEAL_MARGIN, f"CPU steal {steal:.0%}"))
    return tuple(out)


def _figure(span: HostSpan | None, name: str) -> float | None:
    if span is None:
        return None
    value: float | None = getattr(span, name)
    return value


def host_contention(
    slower: HostSpan | None,
    faster: HostSpan | None,
    *,
    slower_name: str = "the slower side",
    faster_name: str = "the faster side",
) -> str | None:
    """Why the slower side was short of CPU and the faster was not; ``None`` when the rule does
    not name host CPU contention (module docstring)."""
    met: list[str] = []
    for s in contention(slower):
        other = _figure(faster, s.figure)
        if other is None or s.value - other < s.margin:
            continue
        shown = f"{other:.0%}" if s.figure != "run_queue_per_core" else f"{other:.2f} per core"
        met.append(f"{s.words} ({shown} in {faster_name})")
    if not met:
        return None
    words = f"host CPU contention in {slower_name}: {'; '.join(met)}"
    if slower is not None and slower.competitors:
        named = ", ".join(f"{c.name} {c.cores:.1f} cores" for c in slower.competitors)
        words += f"; beside it: {named}"
    return words


def span_words(span: HostSpan) -> str:
    """One line of what a span says (``load 1.4/core, steal 0%, server 1.9 cores, waited 12%``)."""
    parts: list[str] = []
    if span.run_queue is not None and span.cores:
        parts.append(f"run queue {span.run_queue:.1f} on {span.cores} cores")
    if span.busy_ratio is not None:
        parts.append(f"busy {span.busy_ratio:.0%}")
    if span.steal_ratio is not None:
        parts.append(f"steal {span.steal_ratio:.0%}")
    if span.server_cpu_cores is not None:
        parts.append(f"server {span.server_cpu_cores:.1f} cores")
    if span.server_wait_ratio is not None:
        parts.append(f"server waited {span.server_wait_ratio:.0%}")
    if span.freq_mhz is not None:
        parts.append(f"{span.freq_mhz:.0f} MHz")
    return ", ".join(parts) or "no host readings"


__all__ = [
    "NAME_LIMIT",
    "RUN_QUEUE_MARGIN",
    "RUN_QUEUE_OVER",
    "SERVER_WAIT_MARGIN",
    "SERVER_WAIT_MIN",
    "STEAL_MARGIN",
    "STEAL_MIN",
    "TOP_COMPETITORS",
    "Competitor",
    "CpuTimes",
    "HostReading",
    "HostSpan",
    "ProcessCpu",
    "ServerCpu",
    "Shortfall",
    "combine_spans",
    "competitors_between",
    "contention",
    "host_contention",
    "host_span",
    "span_words",
]
