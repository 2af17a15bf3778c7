"""Reading Kineto Chrome traces (torch profiler, one file per rank) streaming, into the figures of
:mod:`specwatch.core.profile`.

ijson's C backend parses the file event by event, so memory holds the step spans and, for the
events inside a step, a few numbers each, never the document. Two passes: the step spans first
(they may come anywhere in the file), then launches and kernels attributed to the step whose CPU
span holds the launch. A replayed CUDA graph is one ``cudaGraphLaunch`` whose correlation id
every kernel it ran carries; an eager kernel correlates to its own ``cudaLaunchKernel``.
"""

from __future__ import annotations

import bisect
import gzip
import re
import zlib
from array import array
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import ijson

from specwatch.core.profile import (
    KernelTime,
    KindProfile,
    ProfileSummary,
    RankProfile,
    WallMs,
    summarise,
)
from specwatch.core.sanitize import sanitize_line

MAX_NAME = 160
"""Characters kept of a kernel or span name."""
MAX_STEPS = 100_000
MAX_PENDING = 2_000_000
"""Kernels kept while their launch is not yet seen (events out of order)."""
TOP_KERNELS = 5

GRAPH_LAUNCH = {"cudaGraphLaunch", "cudaGraphLaunch_v10000", "cuGraphLaunch"}
KERNEL_LAUNCH = {
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelExC_v11060",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
}
# Collective kernels by name: NCCL's (ncclKernel_*, ncclDevKernel_*), vLLM's custom all-reduce
# (csrc/custom_all_reduce.cuh: cross_device_reduce_1stage/2stage), SGLang/FlashInfer/TRT-LLM
# all-reduce fusions (allreduce_fusion_kernel*, oneShotAllReduce*, twoShotAllReduce*).
_COLLECTIVE = re.compile(
    r"nccl|cross_device_reduce|all_?reduce|all_?gather|reduce_?scatter|alltoall", re.IGNORECASE
)
_SGLANG_STEP = re.compile(r"^step\[([A-Z_]+)(?: bs=(\d+))?")
_VLLM_STEP = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
_RANK = re.compile(r"(?:TP-|rank)(\d+)")


class TraceError(Exception):
    """A trace that cannot be read; ``str()`` is one line naming the file."""


def _open(path: Path) -> IO[bytes]:
    f = path.open("rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        f.close()
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    return f


def _events(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with _open(path) as f:
            yield from ijson.items(f, "traceEvents.item", use_float=True)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path.name}: truncated or corrupt gzip ({exc})") from None
    except ijson.JSONError as exc:
        raise TraceError(f"{path.name}: not a JSON trace ({sanitize_line(str(exc), 80)})") from None
    except OSError as exc:
        raise TraceError(f"{path.name}: cannot read ({exc.strerror or exc})") from None


def step_kind(name: str, engine: str) -> str | None:
    """The step kind of a span name: SGLang ``step[VERIFY bs=4]`` → ``VERIFY``; vLLM
    ``execute_context_0(0)_generation_3(15)`` → ``VERIFY k=4`` (5 tokens a request), ``DECODE``
    (one), ``MIXED`` (prefill in the step); ``None`` for any other span."""
    m = _SGLANG_STEP.match(name)
    if m:
        return m.group(1)
    v = _VLLM_STEP.match(name)
    if v:
        ctx, gen, gen_tok = int(v.group(1)), int(v.group(3)), int(v.group(4))
        if ctx:
            return "MIXED"
        if gen == 0:
            return None
        per = gen_tok // gen
        return "DECODE" if per <= 1 else f"VERIFY k={per - 1}"
    return None


@dataclass(slots=True)
class _Step:
    kind: str
    ts: float
    end: float
    gpu_span: tuple[float, float] | None = None
    eager: int = 0
    graphs: int = 0
    launch_us: float = 0.0
    kernels: array[float] = field(default_factory=lambda: array("d"))
    """Start and end of each kernel, flat: 16 bytes a kernel."""
    graph_kernel_us: float = 0.0
    kernel_us: float = 0.0
    collective_us: float = 0.0


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _union(flat: array[float]) -> float:
    total = 0.0
    end = -1e300
    for s, e in sorted(zip(flat[::2], flat[1::2], strict=True)):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def read_rank(path: Path, *, engine: str) -> RankProfile:
    """One rank's trace.

    Raises:
        TraceError: Truncated or corrupt gzip, not JSON, unreadable: one line.
    """
    steps: list[_Step] = []
    twins: list[tuple[str, float, float]] = []
    events = 0
    unclosed = 0
    for e in _events(path):
        events += 1
        cat = e.get("cat")
        if cat not in ("user_annotation", "gpu_user_annotation") or e.get("ph") != "X":
            continue
        name = e.get("name")
        if not isinstance(name, str):
            continue
        kind = step_kind(name[:MAX_NAME], engine)
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if kind is None or ts is None:
            continue
        if dur is None or dur < 0:
            unclosed += 1
            continue
        if cat == "gpu_user_annotation":
            twins.append((kind, ts, ts + dur))
        elif len(steps) < MAX_STEPS:
            steps.append(_Step(kind, ts, ts + dur))
    steps.sort(key=lambda s: s.ts)
    starts = [s.ts for s in steps]
    for kind, ts, end in twins:
        # the GPU twin of a step starts after its CPU span does
        i = bisect.bisect_right(starts, ts) - 1
        for j in (i, i + 1):
            if 0 <= j < len(steps) and steps[j].kind == kind and steps[j].gpu_span is None:
                steps[j].gpu_span = (ts, end)
                break

    def step_at(ts: float) -> _Step | None:
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and ts <= steps[i].end:
            return steps[i]
        return None

    launch_of: dict[int, tuple[_Step, bool]] = {}
    pending: list[tuple[int, float, float, str, bool, bool]] = []
    kernel_total = 0.0
    collective_total = 0.0
    gpu = False
    top: dict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))

    def take(
        step: _Step, graph: bool, ts: float, dur: float, name: str, graph_id: bool, coll: bool
    ) -> None:
        step.kernels.extend((ts, ts + dur))
        step.kernel_us += dur
        if graph or graph_id:
            step.graph_kernel_us += dur
        if coll:
            step.collective_us += dur
        top[step.kind][name] += dur

    if steps:
        for e in _events(path):
            cat = e.get("cat")
            if cat in ("cuda_runtime", "cuda_driver"):
                name = e.get("name")
                ts, dur = _num(e.get("ts")), _num(e.get("dur")) or 0.0
                corr = (e.get("args") or {}).get("correlation")
                if ts is None or not isinstance(corr, int):
                    continue
                graph = name in GRAPH_LAUNCH
                if not graph and name not in KERNEL_LAUNCH:
                    continue
                step = step_at(ts)
                if step is None:
                    continue
                if graph:
                    step.graphs += 1
                else:
                    step.eager += 1
                step.launch_us += dur
                launch_of[corr] = (step, graph)
            elif cat == "kernel":
                gpu = True
                ts, dur = _num(e.get("ts")), _num(e.get("dur")) or 0.0
                args = e.get("args") or {}
                corr = args.get("correlation")
                raw = e.get("name")
                name = sanitize_line(raw if isinstance(raw, str) else "?", MAX_NAME)
                if ts is None:
                    continue
                kernel_total += dur
                coll = _COLLECTIVE.search(name) is not None
                if coll:
                    collective_total += dur
                graph_id = bool(args.get("graph id"))
                if not isinstance(corr, int):
                    continue
                hit = launch_of.get(corr)
                if hit is not None:
                    take(hit[0], hit[1], ts, dur, name, graph_id, coll)
                    if not hit[1]:
                        del launch_of[corr]  # an eager launch runs one kernel
                elif len(pending) < MAX_PENDING:
                    pending.append((corr, ts, dur, name, graph_id, coll))
        for corr, ts, dur, name, graph_id, coll in pending:
            hit = launch_of.get(corr)
            if hit is not None:
                take(hit[0], hit[1], ts, dur, name, graph_id, coll)
    kinds = _kinds(steps, top, gpu)
    rank_m = _RANK.search(path.name)
    rank = int(rank_m.group(1)) if rank_m else 0
    return RankProfile(
        rank=rank,
        file=path.name[:MAX_NAME],
        kinds=kinds,
        kernel_ms=kernel_total / 1000.0,
        collective_ms=collective_total / 1000.0,
        gpu_activity=gpu,
        events=events,
        unclosed=unclosed,
    )


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _kinds(steps: Sequence[_Step], top: Any, gpu: bool) -> tuple[KindProfile, ...]:
    by_kind: dict[str, list[_Step]] = defaultdict(list)
    for s in steps:
        by_kind[s.kind].append(s)
    out: list[KindProfile] = []
    for kind, group in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        walls: list[float] = []
        busy: list[float] = []
        idle: list[float] = []
        for s in group:
            if s.kernels:
                first = min(s.kernels[::2])
                last = max(s.kernels[1::2])
                extent = last - first
                b = _union(s.kernels)
                busy.append(b)
                idle.append(max(0.0, extent - b))
                walls.append(extent)
            elif s.gpu_span is not None:
                walls.append(s.gpu_span[1] - s.gpu_span[0])
            else:
                walls.append(s.end - s.ts)
        n = len(group)
        kernel_us = sum(s.kernel_us for s in group)
        ms = [w / 1000.0 for w in walls]
        has = gpu and kernel_us > 0
        tops = sorted(top.get(kind, {}).items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
        out.append(
            KindProfile(
                kind=kind,
                n=n,
                wall_ms=WallMs(sum(ms) / n, _pct(ms, 0.5), _pct(ms, 0.9)),
                gpu_busy_ms=sum(busy) / n / 1000.0 if has else None,
                graph_share=sum(s.graph_kernel_us for s in group) / kernel_us if has else None,
                eager_launches=sum(s.eager for s in group) / n if gpu else None,
                graph_launches=sum(s.graphs for s in group) / n if gpu else None,
                launch_ms=sum(s.launch_us for s in group) / n / 1000.0 if gpu else None,
                gpu_idle_ms=sum(idle) / n / 1000.0 if has else None,
                collective_share=sum(s.collective_us for s in group) / kernel_us if has else None,
                top_kernels=tuple(KernelTime(name, us / 1000.0) for name, us in tops),
            )
        )
    return tuple(out)


def read_profile(paths: Sequence[Path], *, engine: str) -> ProfileSummary:
    """Every rank's trace; a rank that cannot be read is a problem line, not an error.

    Raises:
        TraceError: No rank could be read.
    """
    ranks: list[RankProfile] = []
    problems: list[str] = []
    for path in paths:
        try:
            rank = read_rank(path, engine=engine)
        except TraceError as exc:
            problems.append(str(exc))
            continue
        if rank.unclosed:
            problems.append(f"{path.name}: {rank.unclosed} step spans without an end, left out")
        ranks.append(rank)
    if not ranks:
        raise TraceError("; ".join(problems) if problems else "no trace files to read")
    seen = {r.rank for r in ranks}
    if len(seen) > 1 or len(paths) > 1:
        missing = sorted(set(range(max(seen) + 1)) - seen)
        if missing:
            problems.append(f"no trace for rank {', '.join(map(str, missing[:8]))}")
    return summarise(ranks, problems)
