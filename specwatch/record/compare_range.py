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
from typing import Any

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.gpu_summary import summarize_ticks
from specwatch.core.server import MetricsWindow, ServerInfo, SpecConfig
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
from specwatch.record.reader import Reader, RecordingError
from specwatch.record.store import local_iso
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
            wall0 = parse_time(spec.start, end_wall)
            wall1 = parse_time(spec.end, end_wall)
        except ValueError as e:
            raise RecordingError(f"{spec.path}@{spec.start}/{spec.end}: {e}") from None
        if wall1 <= wall0:
            raise RecordingError(f"{spec.path}: the range ends before it starts")
        return range_snapshot(reader, wall0, wall1, f"{spec.path.name}@{spec.start}/{spec.end}")


def range_snapshot(reader: Reader, wall0: float, wall1: float, label: str) -> Snapshot:
    """The snapshot of Unix seconds ``[wall0, wall1]`` of an open recording.

    Raises:
        RecordingError: No token rate recorded in the range.
    """
    t0, t1 = reader.session_t(wall0), reader.session_t(wall1)
    inventory: GpuInventory | None = None
    info: ServerInfo | None = None
    ticks: list[GpuTick] = []
    windows: list[MetricsWindow] = []
    for rec in reader.events(None, t1):
        e = rec.event
        if isinstance(e, ev.GpuInventoryChanged):
            inventory = e.inventory
        elif isinstance(e, ev.ServerReady) and e.server == 0:
            info = e.info
        elif rec.t >= t0 and isinstance(e, ev.GpuTicked):
            ticks.append(e.tick)
        elif (
            rec.t >= t0
            and isinstance(e, ev.MetricsScraped)
            and e.server == 0
            and e.window.dt > 0
            and e.window.gen_tok_s is not None
        ):
            windows.append(e.window)
    if not windows:
        raise RecordingError(f"{label}: no token rate recorded in this range")
    n = max(MIN_SLICES, min(MAX_SLICES, round((t1 - t0) / SLICE_S)))
    width = (t1 - t0) / n
    runs = []
    for i in range(n):
        lo, hi = t0 + i * width, t0 + (i + 1) * width
        w_in = [w for w in windows if lo <= w.t < hi or (i == n - 1 and w.t == hi)]
        k_in = [k for k in ticks if lo <= k.t < hi or (i == n - 1 and k.t == hi)]
        tok = _mean([w.gen_tok_s for w in w_in if w.gen_tok_s is not None])
        tok_s = tok if tok is not None and math.isfinite(tok) else None
        gpus = summarize_ticks(k_in, inventory)
        runs.append(
            RunResult(
                index=i,
                warmup=False,
                completion_tokens=0,
                prompt_tokens=None,
                wall_s=width,
                tok_s=tok_s,
                gpus=gpus,
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
        config=MappingProxyType(_load(windows, t1 - t0)),
        server=_server(info),
        gpu_environment=_environment(inventory),
        runs=tuple(runs),
        overall=Overall(
            runs=n,
            tok_s=_figure([r.tok_s for r in runs]),
            ttft_s=_figure([w.ttft_s for w in windows]),
            step_latency_s=_figure([w.step_latency_s for w in windows]),
            accept_length=_figure([w.accept_length for w in windows]),
            total_tokens=0,
            gpus=summarize_ticks(ticks, inventory),
        ),
        timeseries=TimeSeries(width, ()),
    )


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _figure(values: Sequence[float | None]) -> Summary:
    """Mean and spread only (a recording's slices are not independent runs: no interval)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Summary(0, None, None, None, None, None, None)
    m = sum(vals) / len(vals)
    std = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return Summary(len(vals), m, std, min(vals), max(vals), None, None)


def _load(windows: Sequence[MetricsWindow], seconds: float) -> dict[str, Any]:
    running = _mean([w.requests_running for w in windows if w.requests_running is not None])
    return {
        "concurrency": None if running is None else round(running, 1),
        "prompts_source": "recorded traffic (load as it was, not controlled)",
        "runs": None,
        "duration_s": round(seconds, 1),
    }


def _server(info: ServerInfo | None) -> SnapshotServer:
    if info is None:
        return SnapshotServer(
            dialect=None, version=None, model=None, speculative=SpecConfig(None), launch_args={}
        )
    return SnapshotServer(
        dialect=info.dialect.value,
        version=info.version,
        model=info.model,
        # Without topk, as recorded ranges have always been compared.
        speculative=dataclasses.replace(info.spec, topk=None),
        launch_args=dict(info.launch_args or {}),
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
