"""A time range of a recording as the :class:`~specwatch.core.snapshot_records.Snapshot` that
``compare`` reads, so ``specwatch compare FILE@14:00/14:05 B.json`` applies the same rule.

The range is cut into equal slices that stand in for benchmark runs (each slice's tok/s is the
mean of its ``/metrics`` windows, its GPU summary the GPU ticks inside it), so the noise test has
several samples per side. The load was whatever the server served: it is reported as it was
(mean running requests as ``concurrency``, ``prompts_source`` "recorded traffic"), not controlled.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from specwatch.core.gpu import GpuInventory, GpuTick, sample_busy
from specwatch.core.gpu_summary import TickSummary
from specwatch.core.host import HostSpan, combine_spans
from specwatch.core.identity import ServerIdentity
from specwatch.core.server import ServerInfo, SpecConfig
from specwatch.core.snapshot_records import (
    Overall,
    RunResult,
    Snapshot,
    SnapshotEnvironment,
    SnapshotServer,
    TimeSeries,
    Tool,
)
from specwatch.core.stats import Summary
from specwatch.record.reader import Reader, RecordedEvent, RecordingError
from specwatch.record.store import WALL_LIMIT, local_iso
from specwatch.record.timespec import parse_time
from specwatch.session import events as ev

SLICE_S = 30.0
"""Target seconds per slice."""
MIN_SLICES, MAX_SLICES = 3, 20
RECORDING_SUFFIXES = (".sqlite", ".db", ".specwatch", ".rec")
"""File names that mean a recording (``advise`` tells one from a server address)."""


@dataclass(frozen=True, slots=True)
class RangeSpec:
    """``FILE@FROM/TO`` split into its parts."""

    path: Path
    start: str
    end: str


def parse_range_spec(text: str) -> RangeSpec | None:
    """The parts of ``FILE@FROM/TO``; ``None`` when ``text`` is not one (a snapshot path)."""
    path, at, span = text.rpartition("@")
    if not at or "/" not in span or not path:
        return None
    start, _, end = span.partition("/")
    if not start or not end:
        return None
    return RangeSpec(Path(path), start, end)


def load_range(spec: RangeSpec) -> Snapshot:
    """The snapshot of one recording range.

    Raises:
        RecordingError: Unreadable file, bad times, or no token rate in the range (one line).
    """
    with Reader(spec.path) as reader:
        span = reader.span()
        if span is None:
            raise RecordingError(f"{spec.path}: the recording is empty")
        end_wall = reader.wall(span[1])
        try:
            start_wall = reader.wall(span[0])
            wall0 = parse_time(spec.start, end_wall, start_wall=start_wall)
            wall1 = parse_time(spec.end, end_wall, start_wall=start_wall)
        except ValueError as e:
            raise RecordingError(f"{spec.path}@{spec.start}/{spec.end}: {e}") from None
        if wall1 <= wall0:
            raise RecordingError(f"{spec.path}: the range ends before it starts")
        if not -WALL_LIMIT <= wall0 < wall1 <= WALL_LIMIT:
            raise RecordingError(f"{spec.path}@{spec.start}/{spec.end}: no clock shows that time")
        return range_snapshot(reader, wall0, wall1, f"{spec.path.name}@{spec.start}/{spec.end}")


def range_snapshot(reader: Reader, wall0: float, wall1: float, label: str) -> Snapshot:
    """The snapshot of Unix seconds ``[wall0, wall1]`` of an open recording.

    Only the range's rows are read (and the state in force when it starts); its figures are
    taken as they are read, so neither time nor memory grows with the file or the range.

    Raises:
        RecordingError: No token rate recorded in the range.
    """
    t0, t1 = reader.session_t(wall0), reader.session_t(wall1)
    n = max(MIN_SLICES, min(MAX_SLICES, round((t1 - t0) / SLICE_S)))
    width = (t1 - t0) / n
    inventory_row = reader.latest_before("GpuInventoryChanged", t0)
    ready_row = reader.latest_before("ServerReady", t0, server=0)
    changed = _of(inventory_row, ev.GpuInventoryChanged)
    ready = _of(ready_row, ev.ServerReady)
    identified = _of(reader.latest_before("ServerIdentified", t0, server=0), ev.ServerIdentified)
    inventory = changed.inventory if changed is not None else None
    info = ready.info if ready is not None else None
    identity = identified.identity if identified is not None else None
    slice_tok = [_Running() for _ in range(n)]
    slice_gpus = [TickSummary() for _ in range(n)]
    all_gpus = TickSummary()
    slice_host: list[list[HostSpan]] = [[] for _ in range(n)]
    ttft, step, accept, per_step = _Running(), _Running(), _Running(), _Running()
    running = _Running()
    windows = 0
    for rec in reader.events(t0, t1):
        e = rec.event
        if isinstance(e, ev.GpuInventoryChanged):
            inventory = e.inventory
        elif isinstance(e, ev.ServerReady) and e.server == 0:
            info = e.info
        elif isinstance(e, ev.HostSampled):
            i = _slice_of(e.t, t0, width, n)
            if i is not None:
                slice_host[i].append(e.span)
        elif isinstance(e, ev.ServerIdentified) and e.server == 0:
            identity = e.identity
        elif isinstance(e, ev.GpuTicked):
            tick = _busy_part(e.tick)
            all_gpus.add(tick)
            i = _slice_of(tick.t, t0, width, n)
            if i is not None:
                slice_gpus[i].add(tick)
        elif (
            isinstance(e, ev.MetricsScraped)
            and e.server == 0
            and e.window.dt > 0
            and e.window.gen_tok_s is not None
        ):
            w = e.window
            windows += 1
            i = _slice_of(w.t, t0, width, n)
            if i is not None:
                slice_tok[i].add(w.gen_tok_s)
            ttft.add(w.ttft_s)
            step.add(w.step_latency_s)
            accept.add(w.accept_length)
            per_step.add(w.step_tokens)
            running.add(w.requests_running)
    if not windows:
        raise RecordingError(f"{label}: no token rate recorded in this range")
    runs = []
    for i in range(n):
        tok = slice_tok[i].mean()
        runs.append(
            RunResult(
                index=i,
                warmup=False,
                completion_tokens=0,
                prompt_tokens=None,
                wall_s=width,
                tok_s=tok if tok is not None and math.isfinite(tok) else None,
                gpus=slice_gpus[i].result(inventory),
                host_cpu=combine_spans(slice_host[i]),
            )
        )
    return Snapshot(
        schema_version=0,
        tool=Tool("specwatch", "recording"),
        created=local_iso(wall0),
        host="",
        command=(),
        label=label,
        interrupted=False,
        error=None,
        config=MappingProxyType(_load(running.mean(), t1 - t0)),
        server=_server(info, identity),
        gpu_environment=_environment(inventory),
        runs=tuple(runs),
        overall=Overall(
            runs=n,
            tok_s=_figure([r.tok_s for r in runs]),
            ttft_s=ttft.figure(),
            step_latency_s=step.figure(),
            tokens_per_step=per_step.figure(),
            accept_length=accept.figure(),
            total_tokens=0,
            gpus=all_gpus.result(inventory),
        ),
        timeseries=TimeSeries(width, ()),
        host_cpu=combine_spans([s for spans in slice_host for s in spans]),
    )


_E = TypeVar("_E")


def _busy_part(tick: GpuTick) -> GpuTick:
    """The tick's busy GPUs (and lost ones, to be counted): a benchmark's runs keep the GPUs
    busy, a recording's range holds the pauses between requests too, and an idle board's low
    clock is no part of what a decode runs at (issue 21: "SM clock (mean)" fell with idle
    samples)."""
    kept = tuple(s for s in tick.samples if s.lost or sample_busy(s))
    return tick if len(kept) == len(tick.samples) else dataclasses.replace(tick, samples=kept)


def _of(row: RecordedEvent | None, kind: type[_E]) -> _E | None:
    return row.event if row is not None and isinstance(row.event, kind) else None


def _slice_of(t: float, t0: float, width: float, n: int) -> int | None:
    """The slice ``[lo, hi)`` holding ``t`` (the last one also holds its end), else ``None``."""
    if not math.isfinite(t) or width <= 0:
        return None
    i = min(n - 1, max(0, int((t - t0) / width)))
    # the division can land one off an edge: settle on the edges as the slices compute them
    if i > 0 and t < t0 + i * width:
        i -= 1
    elif i < n - 1 and t >= t0 + (i + 1) * width:
        i += 1
    lo, hi = t0 + i * width, t0 + (i + 1) * width
    return i if lo <= t < hi or (i == n - 1 and t == hi) else None


class _Running:
    """Count, sum (exact: ``math.fsum``'s partials, and plain), spread (Welford), least and
    most of a stream of numbers."""

    def __init__(self) -> None:
        self.n = 0
        self._partials: list[float] = []
        self._mean = self._m2 = self._plain = 0.0
        self.low = self.high = math.nan

    def add(self, value: float | None) -> None:
        if value is None or not math.isfinite(value):
            return
        self.n += 1
        x, kept = value, 0
        for y in self._partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                self._partials[kept] = lo
                kept += 1
            x = hi
        self._partials[kept:] = [x]
        self._plain += value
        delta = value - self._mean
        self._mean += delta / self.n
        self._m2 += delta * (value - self._mean)
        self.low = value if self.n == 1 else min(self.low, value)
        self.high = value if self.n == 1 else max(self.high, value)

    def mean(self) -> float | None:
        if not self.n:
            return None
        try:
            return math.fsum(self._partials) / self.n
        except OverflowError:
            return math.inf

    def figure(self) -> Summary:
        """Mean and spread only (a recording's slices are not independent runs: no interval)."""
        if not self.n:
            return Summary(0, None, None, None, None, None, None)
        std = math.sqrt(self._m2 / (self.n - 1)) if self.n > 1 else 0.0
        # the plain sum's mean, as the figures of benchmark runs are taken
        return Summary(self.n, self._plain / self.n, std, self.low, self.high, None, None)


def _figure(values: Sequence[float | None]) -> Summary:
    """Mean and spread only (a recording's slices are not independent runs: no interval)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Summary(0, None, None, None, None, None, None)
    m = sum(vals) / len(vals)
    std = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return Summary(len(vals), m, std, min(vals), max(vals), None, None)


def _load(running: float | None, seconds: float) -> dict[str, Any]:
    return {
        "concurrency": None if running is None else round(running, 1),
        "prompts_source": "recorded traffic (load as it was, not controlled)",
        "runs": None,
        "duration_s": round(seconds, 1),
    }


def _server(info: ServerInfo | None, identity: ServerIdentity | None) -> SnapshotServer:
    """The server as recorded; its process (command line, code) as last identified."""
    process = identity if identity is not None and identity.pid is not None else None
    note = None if process is not None else "not recorded in this range"
    if info is None:
        return SnapshotServer(
            dialect=None,
            version=None,
            model=None,
            speculative=SpecConfig(None),
            launch_args={},
            process=process,
            process_note=note,
        )
    return SnapshotServer(
        dialect=info.dialect.value,
        version=info.version,
        model=info.model,
        # Without topk, as recorded ranges have always been compared.
        speculative=dataclasses.replace(info.spec, topk=None),
        launch_args=dict(info.launch_args or {}),
        process=process,
        process_note=note,
    )


def _environment(inventory: GpuInventory | None) -> SnapshotEnvironment:
    if inventory is None:
        return SnapshotEnvironment(available=False, gpus=())
    return SnapshotEnvironment(
        available=inventory.available,
        driver_version=inventory.system.driver_version,
        cuda_driver_version=inventory.system.cuda_driver_version,
        gpus=inventory.gpus,
    )


__all__ = ["RangeSpec", "load_range", "parse_range_spec", "range_snapshot"]
