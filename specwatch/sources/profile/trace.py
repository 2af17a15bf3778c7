"""Reading Kineto Chrome traces (torch profiler, one file per rank) streaming, into the figures of
:mod:`specwatch.core.profile`.

ijson's C backend parses the file event by event, so memory holds the step spans and, for the
events inside a step, a few numbers each, never the document. Two passes: the step spans first
(they may come anywhere in the file), then launches, kernels and copies attributed to the step
whose CPU span holds the launch. A replayed CUDA graph is one ``cudaGraphLaunch`` whose
correlation id every kernel it ran carries; an eager kernel correlates to its own
``cudaLaunchKernel``.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from specwatch.core.profile import (
    KernelTime,
    KindProfile,
    ProfileSummary,
    RankProfile,
    WallMs,
    summarise,
)
from specwatch.core.sanitize import sanitize_line
from specwatch.sources.profile.trace_events import MAX_BYTES, MAX_NAME, TraceError, events

__all__ = ["MAX_BYTES", "TraceError", "launch_kind", "read_profile", "read_rank", "step_label"]

MAX_RAW = 400
"""Characters of a raw name looked at (the rest only lengthens what is cut)."""
MAX_NAMES = 20_000
"""Distinct kernel names kept; kernels past them count under :data:`OTHER_KERNELS`."""
OTHER_KERNELS = "(other kernels)"
MAX_STEPS = 100_000
MAX_KINDS = 32
MAX_LIVE = 2_000_000
"""Launches waiting for their kernels, and kernels waiting for their launch (out of order)."""
TOP_KERNELS = 5

# Kineto names a runtime event by its CUPTI callback (pytorch/kineto libkineto/src/
# cupti_strings.cpp: "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
# "cudaLaunchCooperativeKernel[MultiDevice]", "cudaGraphLaunch", "cudaGraphLaunch_ptsz") and a
# driver event (cat "cuda_driver", CuptiActivity.cpp) "cuLaunchKernel" or "cuLaunchKernelEx".
# Nsight Systems exports add the callback's version ("cudaLaunchKernel_v7000"); both are read.
_API_SUFFIX = re.compile(r"(?:_v\d+)?(?:_pt[sd]z)?(?:_v\d+)?$")
_EAGER_LAUNCH = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
    }
)
_GRAPH_LAUNCH = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
_COPY_CALL = ("cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset")
NOT_LAUNCH, EAGER, GRAPH, COPY = 0, 1, 2, 3
# Collective kernels, by the names torch-profiler kernel tables of real servers show:
# NCCL "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
# "ncclDevKernel_Generic_1" (NCCL 2.19+), older "ncclKernel_AllReduce_RING_LL_Sum_half";
# MSCCL on ROCm "mscclKernel_Sum_hip_bfloat16_Simple"; vLLM's custom all-reduce
# (vllm-project/vllm csrc/custom_all_reduce.cuh) "vllm::cross_device_reduce_1stage<...>" and
# "_2stage", SGLang's and aiter's copies ("sglang::cross_device_reduce_2stage<__half, 8>");
# FlashInfer's TRT-LLM fusion "flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_
# oneshot_lamport<...>" and "..._twoshot_sync", TensorRT-LLM's own (NVIDIA/TensorRT-LLM
# kernels/communicationKernels/allReduceFusionKernels.cu, ar_fusion::allreduce_fusion_kernel*);
# torch symmetric memory "two_shot_all_reduce_kernel_inplace", "multimem_all_reduce_kernel",
# "(anonymous namespace)::all_reduce_one_shot_push_kernel<__nv_bfloat16, 8u, true>".
_COLLECTIVE = re.compile(
    r"nccl|msccl|cross_device_reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all",
    re.IGNORECASE,
)
_SGLANG_STEP = re.compile(r"^step\[([A-Z_]{1,24})(?: bs=(\d{1,7}))?(?: toks=(\d{1,9}))?")
_VLLM_STEP = re.compile(
    r"^execute_context_(\d{1,7})\((\d{1,9})\)_generation_(\d{1,7})\((\d{1,9})\)"
)
_RANK = re.compile(r"(?:TP-|rank)(\d{1,5})")


@lru_cache(maxsize=512)
def _launch_kind(name: str) -> int:
    base = _API_SUFFIX.sub("", name[:80])
    if base in _EAGER_LAUNCH:
        return EAGER
    if base in _GRAPH_LAUNCH:
        return GRAPH
    if base.startswith(_COPY_CALL):
        return COPY
    return NOT_LAUNCH


def launch_kind(name: object) -> int:
    """:data:`EAGER`, :data:`GRAPH`, :data:`COPY` (a memcpy or memset call) or
    :data:`NOT_LAUNCH` for a runtime or driver event's name."""
    return _launch_kind(name) if isinstance(name, str) else NOT_LAUNCH


@dataclass(frozen=True, slots=True)
class StepLabel:
    """What a step span's name says: its kind, requests and tokens where the engine writes
    them."""

    kind: str
    batch: int | None = None
    tokens: int | None = None


def step_label(name: str, engine: str) -> StepLabel | None:
    """SGLang ``step[VERIFY bs=4]`` → ``VERIFY`` with batch 4; vLLM
    ``execute_context_0(0)_generation_3(15)`` → ``VERIFY k=4`` (5 tokens a request) with batch
    3 and 15 tokens, ``DECODE`` (one a request), ``MIXED`` (prefill in the step); ``None`` for
    any other span."""
    m = _SGLANG_STEP.match(name)
    if m:
        bs, toks = m.group(2), m.group(3)
        return StepLabel(m.group(1), int(bs) if bs else None, int(toks) if toks else None)
    v = _VLLM_STEP.match(name)
    if v:
        ctx, ctx_tok, gen, gen_tok = (int(g) for g in v.groups())
        if ctx:
            return StepLabel("MIXED", ctx + gen, ctx_tok + gen_tok)
        if gen == 0:
            return None
        per = gen_tok // gen
        return StepLabel("DECODE" if per <= 1 else f"VERIFY k={per - 1}", gen, gen_tok)
    return None


@dataclass(slots=True)
class _Step:
    kind: str
    ts: float
    dur: float
    batch: int | None = None
    tokens: int | None = None
    gpu_span: tuple[float, float] | None = None
    eager: int = 0
    graphs: int = 0
    launch_us: float = 0.0
    busy: array[float] = field(default_factory=lambda: array("d"))
    """Start and end of each kernel and copy, flat: 16 bytes each."""
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


@dataclass(slots=True)
class _Spans:
    steps: list[_Step]
    events: int = 0
    unclosed: int = 0
    dropped: int = 0
    """Step spans past :data:`MAX_STEPS` or :data:`MAX_KINDS`."""


def _spans(path: Path, engine: str, max_bytes: int) -> _Spans:
    """Pass one: the step spans, their GPU twins matched."""
    out = _Spans([])
    twins: list[tuple[str, float, float]] = []
    kinds: set[str] = set()
    for e in events(path, max_bytes, depth=True):
        out.events += 1
        cat = e.get("cat")
        if cat not in ("user_annotation", "gpu_user_annotation") or e.get("ph") != "X":
            continue
        name = e.get("name")
        if not isinstance(name, str):
            continue
        label = step_label(name[:MAX_NAME], engine)
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if label is None or ts is None:
            continue
        if dur is None or dur < 0:
            out.unclosed += 1
            continue
        twin = cat == "gpu_user_annotation"
        full = len(twins if twin else out.steps) >= MAX_STEPS
        if full or (label.kind not in kinds and len(kinds) >= MAX_KINDS):
            out.dropped += 1
            continue
        if twin:
            twins.append((label.kind, ts, ts + dur))
        else:
            kinds.add(label.kind)
            out.steps.append(_Step(label.kind, ts, dur, label.batch, label.tokens))
    out.steps.sort(key=lambda s: s.ts)
    starts = [s.ts for s in out.steps]
    for kind, ts, end in twins:
        # the GPU twin of a step starts after its CPU span does
        i = bisect.bisect_right(starts, ts) - 1
        for j in (i, i + 1):
            if 0 <= j < len(out.steps):
                step = out.steps[j]
                if step.kind == kind and step.gpu_span is None:
                    step.gpu_span = (ts, end)
                    break
    return out


class _Names:
    """Kernel names, sanitised once each and kept by index; past :data:`MAX_NAMES` distinct
    ones, one name for the rest."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.collective: list[bool] = []
        self.other = -1

    def __call__(self, raw: object) -> int:
        key = raw[:MAX_RAW] if isinstance(raw, str) else "?"
        i = self.index.get(key)
        if i is not None:
            return i
        if len(self.names) >= MAX_NAMES:
            if self.other < 0:
                self.other = self._add(OTHER_KERNELS, False)
            return self.other
        i = self._add(sanitize_line(key, MAX_NAME), bool(_COLLECTIVE.search(key)))
        self.index[key] = i
        return i

    def _add(self, name: str, collective: bool) -> int:
        self.names.append(name)
        self.collective.append(collective)
        return len(self.names) - 1


class _Join:
    """Pass two: launches inside the steps, and the kernels and copies that correlate to
    them, in whatever order they come."""

    def __init__(self, steps: list[_Step]) -> None:
        self.steps = steps
        self.starts = [s.ts for s in steps]
        self.names = _Names()
        self.launch_of: dict[int, int] = {}
        """Correlation id → step index * 4 + launch kind."""
        self.wait_corr: array[int] = array("q")
        self.wait_ts: array[float] = array("d")
        self.wait_dur: array[float] = array("d")
        self.wait_name: array[int] = array("l")
        """Name index, or -1 for a copy; kernels with a graph id as -2 - index."""
        self.top: dict[str, defaultdict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.kernel_us = 0.0
        self.collective_us = 0.0
        self.gpu = False
        self.lost = 0
        """Events past :data:`MAX_LIVE` left unmatched."""

    def step_at(self, ts: float) -> int:
        i = bisect.bisect_right(self.starts, ts) - 1
        return i if i >= 0 and ts <= self.steps[i].ts + self.steps[i].dur else -1

    def launch(self, e: dict[str, Any]) -> None:
        kind = launch_kind(e.get("name"))
        if kind == NOT_LAUNCH:
            return
        args = e.get("args")
        corr = args.get("correlation") if isinstance(args, dict) else None
        ts = _num(e.get("ts"))
        if ts is None or not isinstance(corr, int) or isinstance(corr, bool):
            return
        i = self.step_at(ts)
        if i < 0:
            return
        step = self.steps[i]
        if kind == GRAPH:
            step.graphs += 1
        elif kind == EAGER:
            step.eager += 1
        if kind != COPY:
            step.launch_us += max(0.0, _num(e.get("dur")) or 0.0)
        if len(self.launch_of) >= MAX_LIVE:
            self.lost += 1
            return
        self.launch_of[corr] = i * 4 + kind

    def device(self, e: dict[str, Any], copy: bool) -> None:
        ts, dur = _num(e.get("ts")), max(0.0, _num(e.get("dur")) or 0.0)
        if ts is None:
            return
        args = e.get("args")
        if not isinstance(args, dict):
            args = {}
        name = -1
        if not copy:
            self.gpu = True
            name = self.names(e.get("name"))
            self.kernel_us += dur
            if self.names.collective[name]:
                self.collective_us += dur
            if args.get("graph id"):
                name = -2 - name
        corr = args.get("correlation")
        if not isinstance(corr, int) or isinstance(corr, bool):
            return
        if corr in self.launch_of:
            self.take(corr, ts, dur, name)
        elif len(self.wait_corr) < MAX_LIVE:
            self.wait_corr.append(corr)
            self.wait_ts.append(ts)
            self.wait_dur.append(dur)
            self.wait_name.append(name)
        else:
            self.lost += 1

    def take(self, corr: int, ts: float, dur: float, name: int) -> None:
        packed = self.launch_of[corr]
        step, kind = self.steps[packed // 4], packed % 4
        step.busy.extend((ts, ts + dur))
        if name == -1:
            if kind == COPY:
                del self.launch_of[corr]
            return
        graph_id = name <= -2
        if graph_id:
            name = -2 - name
        step.kernel_us += dur
        if kind == GRAPH or graph_id:
            step.graph_kernel_us += dur
        if self.names.collective[name]:
            step.collective_us += dur
        self.top[step.kind][name] += dur
        if kind != GRAPH:
            del self.launch_of[corr]  # an eager launch runs one kernel

    def finish(self) -> None:
        for corr, ts, dur, name in zip(
            self.wait_corr, self.wait_ts, self.wait_dur, self.wait_name, strict=True
        ):
            if corr in self.launch_of:
                self.take(corr, ts, dur, name)


def read_rank(path: Path, *, engine: str, max_bytes: int = MAX_BYTES) -> RankProfile:
    """One rank's trace.

    Raises:
        TraceError: Truncated or corrupt gzip, not JSON, no events, too large or too deep,
            unreadable: one line naming the file.
    """
    spans = _spans(path, engine, max_bytes)
    if spans.events == 0:
        raise TraceError(
            f"{sanitize_line(path.name, MAX_NAME)}: no traceEvents (not a torch profiler trace)"
        )
    join = _Join(spans.steps)
    if spans.steps:
        for e in events(path, max_bytes):
            cat = e.get("cat")
            if cat in ("cuda_runtime", "cuda_driver"):
                join.launch(e)
            elif cat == "kernel":
                join.device(e, copy=False)
            elif cat in ("gpu_memcpy", "gpu_memset"):
                join.device(e, copy=True)
        join.finish()
    rank_m = _RANK.search(path.name)
    return RankProfile(
        rank=int(rank_m.group(1)) if rank_m else 0,
        file=sanitize_line(path.name, MAX_NAME),
        kinds=_kinds(spans.steps, join),
        kernel_ms=join.kernel_us / 1000.0,
        collective_ms=join.collective_us / 1000.0,
        gpu_activity=join.gpu,
        events=spans.events,
        unclosed=spans.unclosed,
        dropped=spans.dropped,
        unmatched=join.lost,
    )


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _median(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return int(_pct(known, 0.5)) if known else None


def _kinds(steps: Sequence[_Step], join: _Join) -> tuple[KindProfile, ...]:
    by_kind: dict[str, list[_Step]] = defaultdict(list)
    for s in steps:
        by_kind[s.kind].append(s)
    gpu = join.gpu
    out: list[KindProfile] = []
    for kind, group in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        walls: list[float] = []
        busy: list[float] = []
        idle: list[float] = []
        for s in group:
            if s.busy:
                extent = max(s.busy[1::2]) - min(s.busy[::2])
                b = _union(s.busy)
                busy.append(b)
                idle.append(max(0.0, extent - b))
                walls.append(extent)
            elif s.gpu_span is not None:
                walls.append(s.gpu_span[1] - s.gpu_span[0])
            else:
                walls.append(s.dur)
        n = len(group)
        kernel_us = sum(s.kernel_us for s in group)
        ms = [w / 1000.0 for w in walls]
        has = gpu and kernel_us > 0
        tops = sorted(join.top.get(kind, {}).items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
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
                top_kernels=tuple(KernelTime(join.names.names[i], us / 1000.0) for i, us in tops),
                batch=_median([s.batch for s in group]),
                tokens=_median([s.tokens for s in group]),
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
        name = rank.file
        if rank.unclosed:
            problems.append(f"{name}: {rank.unclosed} step spans without an end, left out")
        if rank.dropped:
            problems.append(
                f"{name}: {rank.dropped} step spans past {MAX_STEPS:,} steps or {MAX_KINDS}"
                " kinds, left out"
            )
        if rank.unmatched:
            problems.append(
                f"{name}: {rank.unmatched:,} launches or kernels past the reader's bound"
                f" ({MAX_LIVE:,} waiting for their match), left out"
            )
        ranks.append(rank)
    if not ranks:
        raise TraceError("; ".join(problems) if problems else "no trace files to read")
    seen = {r.rank for r in ranks}
    if len(paths) > 1:
        named = {int(m.group(1)) for p in paths if (m := _RANK.search(p.name))}
        missing = sorted(set(range(max(seen | named) + 1)) - seen)
        if missing:
            problems.append(f"no trace for rank {', '.join(map(str, missing[:8]))}")
    return summarise(ranks, problems)
