"""A time range of a recording as the :class:`~specwatch.core.snapshot_records.Snapshot` that
``compare`` reads, so ``specwatch compare FILE@14:00/14:05 B.json`` applies the same rule.

The range is cut into equal slices that stand in for benchmark runs (each slice's tok/s is the
mean of its ``/metrics`` windows, its GPU summary the GPU ticks inside it), so the noise test has
several samples per side. The load was whatever the server served: it is reported as it was
(mean running requests as ``concurrency``, ``prompts_source`` "recorded traffic"), not controlled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.gpu_summary import summarize_ticks
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.core.snapshot_records import (
    Figure,
    Snapshot,
    SnapshotEnvironment,
    SnapshotRun,
    SnapshotServer,
)
from specwatch.record.reader import Reader, RecordingError
from specwatch.record.store import local_iso
from specwatch.record.timespec import parse_time
from specwatch.session import events as ev

SLICE_S = 30.0
"""Target seconds per slice."""
MIN_SLICES, MAX_SLICES = 3, 20
RECORDING_SUFFIXES = (".sqlite", ".db", ".specwatch", ".rec")


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
        runs.append(SnapshotRun(i, tok_s, width, summarize_ticks(k_in, inventory)))
    return Snapshot(
        schema_version=0,
        created=local_iso(wall0),
        label=label,
        interrupted=False,
        config=MappingProxyType(_load(windows, t1 - t0)),
        server=_server(info),
        environment=_environment(inventory),
        runs=tuple(runs),
        overall=MappingProxyType(_overall(windows, [r.tok_s for r in runs])),
        overall_gpus=summarize_ticks(ticks, inventory),
    )


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _figure(values: Sequence[float | None]) -> Figure:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Figure(None, None)
    m = sum(vals) / len(vals)
    std = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return Figure(m, std)


def _overall(
    windows: Sequence[MetricsWindow], run_tok_s: Sequence[float | None]
) -> dict[str, Figure]:
    return {
        "tok_s": _figure(run_tok_s),
        "ttft_s": _figure([w.ttft_s for w in windows]),
        "step_latency_s": _figure([w.step_latency_s for w in windows]),
        "accept_length": _figure([w.accept_length for w in windows]),
    }


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
        return SnapshotServer(None, None, None, MappingProxyType({}), MappingProxyType({}))
    spec = info.spec
    speculative = {
        "enabled": spec.enabled,
        "algorithm": spec.algorithm,
        "num_steps": spec.num_steps,
        "num_draft_tokens": spec.num_draft_tokens,
        "draft_model": spec.draft_model,
    }
    return SnapshotServer(
        info.dialect.value,
        info.version,
        info.model,
        MappingProxyType(speculative),
        MappingProxyType(dict(info.launch_args or {})),
    )


def _environment(inventory: GpuInventory | None) -> SnapshotEnvironment:
    if inventory is None:
        return SnapshotEnvironment(None, None, ())
    from specwatch.core.values import to_jsonable

    return SnapshotEnvironment(
        inventory.system.driver_version,
        inventory.system.cuda_driver_version,
        tuple(MappingProxyType(to_jsonable(g)) for g in inventory.gpus),
    )


__all__ = ["RangeSpec", "load_range", "parse_range_spec", "range_snapshot"]
