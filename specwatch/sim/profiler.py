"""The simulated servers' profilers: ``/start_profile`` and ``/stop_profile`` as SGLang and vLLM
answer them, and Kineto Chrome traces of the simulated steps, one file per TP rank.

A step is written as the torch profiler writes one: its CPU span (``user_annotation``), its GPU
twin (``gpu_user_annotation``, SGLang), runtime launch events and kernels sharing a correlation
id. A step in a CUDA graph is one ``cudaGraphLaunch`` whose kernels all carry its correlation
and whose CPU span ends right after the launch; an eager step launches every kernel itself, and
the GPU idles between kernels while the CPU launches. With TP > 1 every step ends in an NCCL
all-reduce, inside which the other ranks wait for the slowest.
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import orjson
from aiohttp import web

from specwatch.core.server import Dialect

if TYPE_CHECKING:
    from specwatch.sim.config import SimConfig
    from specwatch.sim.world import SimWorld

NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
KERNELS_PER_STEP = {"VERIFY": 600, "DRAFT": 120, "DECODE": 600, "EXTEND": 600}
EAGER_LAUNCH_US = 4.0
"""Host time of one ``cudaLaunchKernel``."""
EAGER_BUSY = 0.6
"""Share of an eager step's GPU extent some kernel runs (the rest waits for launches)."""
GRAPH_BUSY = 0.97
COLLECTIVE_SHARE = 0.15
VLLM_CONFLICT = (
    "A profiling session is already active. Call /stop_profile before starting another session."
)


@dataclass(frozen=True, slots=True)
class SimStep:
    """One profiled engine step."""

    kind: str
    """``VERIFY``, ``DRAFT``, ``DECODE`` (vLLM: the step's kind follows its tokens)."""
    batch: int
    tokens: int
    """Tokens the step computes (vLLM's ``generation_<batch>(<tokens>)``)."""
    wall_ms: float
    graph: bool


def step_name(engine: str, step: SimStep) -> str:
    """The span name each engine gives a step."""
    if engine == "vllm":
        return f"execute_context_0(0)_generation_{step.batch}({step.tokens})"
    return f"step[{step.kind} bs={step.batch}]"


def _events(
    engine: str, rank: int, tp: int, steps: Iterable[SimStep], slow_rank: int, slow_factor: float
) -> Iterator[list[dict[str, Any]]]:
    """Each step's events."""
    corr = 1
    t = 1_000.0
    pid, tid, gpu_pid, stream = 100 + rank, 1, rank, 7
    for step in steps:
        events: list[dict[str, Any]] = []
        wall_us = step.wall_ms * 1000.0
        n = KERNELS_PER_STEP.get(step.kind, 300)
        collective_us = wall_us * COLLECTIVE_SHARE if tp > 1 else 0.0
        compute_us = wall_us - collective_us
        # the slowest rank's kernels fill the step; the others' are shorter and wait in NCCL
        own = 1.0 if slow_rank < 0 or rank == slow_rank else 1.0 / slow_factor
        busy = GRAPH_BUSY if step.graph else EAGER_BUSY
        kernel_us = compute_us * own * busy / n
        gap_us = compute_us * own / n
        name = step_name(engine, step)
        gpu_start = t + 20.0
        kernels: list[tuple[float, float, int, str]] = []
        if step.graph:
            cpu_dur = 60.0
            events.append(_runtime("cudaGraphLaunch", t + 10.0, 15.0, corr, pid, tid))
            g = gpu_start
            for i in range(n):
                kernels.append((g, kernel_us, corr, f"sim_kernel_{step.kind.lower()}_{i % 7}"))
                g += gap_us
            end_compute = g
            coll_corr = corr
            corr += 1
        else:
            cpu_dur = wall_us
            g = gpu_start
            for i in range(n):
                launch = t + i * gap_us
                events.append(_runtime("cudaLaunchKernel", launch, EAGER_LAUNCH_US, corr, pid, tid))
                start = max(g, launch + EAGER_LAUNCH_US + 2.0)
                kernels.append((start, kernel_us, corr, f"sim_kernel_{step.kind.lower()}_{i % 7}"))
                g = start + kernel_us
                corr += 1
            end_compute = max(g, t + compute_us * own)
            coll_corr = corr
            if tp > 1:
                events.append(
                    _runtime(
                        "cudaLaunchKernel", t + compute_us - 5.0, EAGER_LAUNCH_US, corr, pid, tid
                    )
                )
                corr += 1
        step_end = gpu_start + wall_us
        if tp > 1:
            kernels.append((end_compute, max(1.0, step_end - end_compute), coll_corr, NCCL_KERNEL))
        events.append(_span("user_annotation", name, t, cpu_dur, pid, tid))
        if engine == "sglang":
            events.append(_span("gpu_user_annotation", name, gpu_start, wall_us, gpu_pid, stream))
        for ts, dur, c, kname in kernels:
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": kname,
                    "pid": gpu_pid,
                    "tid": stream,
                    "ts": round(ts, 3),
                    "dur": round(dur, 3),
                    "args": {"correlation": c, "device": rank, "stream": stream},
                }
            )
        t = step_end + 200.0
        yield events


def _runtime(name: str, ts: float, dur: float, corr: int, pid: int, tid: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": round(ts, 3),
        "dur": dur,
        "args": {"correlation": corr},
    }


def _span(cat: str, name: str, ts: float, dur: float, pid: int, tid: int) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def write_trace(
    path: Path,
    *,
    engine: str,
    rank: int,
    tp: int,
    steps: Iterable[SimStep],
    slow_rank: int = -1,
    slow_factor: float = 1.0,
    gz: bool | None = None,
) -> None:
    """Write one rank's trace (gzipped when ``gz``, or by default when the name ends in
    ``.gz``), step by step, and put it in place when whole."""
    head = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": tp}}
    tmp = path.with_name(path.name + ".part")
    raw = tmp.open("wb")
    out: IO[bytes] = raw
    if path.name.endswith(".gz") if gz is None else gz:
        out = cast("IO[bytes]", gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1))
    try:
        out.write(orjson.dumps(head)[:-1] + b', "traceEvents": [')
        first = True
        for events in _events(engine, rank, tp, steps, slow_rank, slow_factor):
            for e in events:
                out.write((b"" if first else b",") + orjson.dumps(e))
                first = False
        out.write(b"]}")
    finally:
        if out is not raw:
            out.close()
        raw.close()
    tmp.rename(path)


def trace_names(engine: str, prefix: str, tp: int) -> list[str]:
    """The file names each engine gives its rank traces."""
    if engine == "vllm":
        ns = time.time_ns()
        return [f"{prefix}_rank{r}.{ns}.pt.trace.json.gz" for r in range(tp)]
    stamp = int(time.time())
    return [f"{prefix}-{stamp}-TP-{r}-DECODE.trace.json.gz" for r in range(tp)]


class SimProfiler:
    """``/start_profile`` and ``/stop_profile`` of one simulated server."""

    def __init__(self, cfg: SimConfig, world: SimWorld) -> None:
        self.world = world
        self.engine = "vllm" if cfg.dialect is Dialect.VLLM else "sglang"
        self.active = False
        self.task: asyncio.Task[None] | None = None
        self.steps: list[SimStep] = []
        self.target: tuple[Path, str] | None = None
        self.written = False

    @property
    def cfg(self) -> SimConfig:
        """The engine's configuration now (a demo scenario changes it as it runs)."""
        return self.world.engine.config

    def mount(self, app: web.Application) -> None:
        """SGLang: always; vLLM: only when simulated with a profiler directory."""
        if self.engine == "vllm" and not self.cfg.profiler_dir:
            return
        app.router.add_post("/start_profile", self.start)
        if self.engine == "vllm":
            app.router.add_post("/stop_profile", self.stop)

    def _step(self, batch: int) -> SimStep:
        cfg = self.cfg
        if not cfg.spec_enabled:
            return SimStep(
                "DECODE", batch, batch, cfg.decode_step_ms(batch), cfg.cuda_graph_at(batch)
            )
        k = cfg.drafts_per_step
        return SimStep(
            "VERIFY", batch, batch * (k + 1), cfg.decode_step_ms(batch), cfg.cuda_graph_at(batch)
        )

    async def _capture(self, n: int) -> None:
        while len(self.steps) < n:
            running, _ = self.world.running_snapshot()
            batch = len(running)
            if batch == 0:
                await asyncio.sleep(0.02)
                continue
            step = self._step(batch)
            self.steps.append(step)
            if self.engine == "sglang" and self.cfg.spec_enabled:
                draft_ms = max(1.0, self.cfg.plain_step_ms * 0.3)
                self.steps.append(SimStep("DRAFT", batch, batch, draft_ms, True))
            await asyncio.sleep(step.wall_ms / 1000.0)
        await self._write()

    async def _write(self) -> None:
        if self.target is None or self.written:
            return
        directory, prefix = self.target
        self.written = True
        tp = max(1, self.cfg.tp_size)
        steps = list(self.steps)
        for rank, name in enumerate(trace_names(self.engine, prefix, tp)):
            await asyncio.to_thread(
                write_trace,
                directory / name,
                engine=self.engine,
                rank=rank,
                tp=tp,
                steps=steps,
                slow_rank=self.cfg.slow_rank,
                slow_factor=1.25 if self.cfg.slow_rank >= 0 else 1.0,
            )
        if self.engine == "sglang":
            self.active = False

    async def start(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if self.active:
            if self.engine == "vllm":
                error = {"message": VLLM_CONFLICT, "type": "Conflict", "param": None, "code": 409}
                return web.json_response({"error": error}, status=409)
            return web.Response(
                status=400, text="Profiling is already in progress. Call /stop_profile first.\n"
            )
        if self.engine == "vllm":
            directory = Path(str(self.cfg.profiler_dir))
            prefix = str(body.get("profile_prefix") or "trace")
            n = int(body.get("max_iterations") or 0) or 10**9
        else:
            directory = Path(str(body.get("output_dir") or "/tmp"))
            prefix = str(body.get("profile_prefix") or "sglang")
            n = int(body.get("num_steps") or 5)
        self.active = True
        self.written = False
        self.steps = []
        self.target = (directory, prefix)
        self.task = asyncio.ensure_future(self._capture(n))
        return web.Response(status=200, text="Start profiling.\n")

    async def stop(self, request: web.Request) -> web.StreamResponse:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.active:
            await self._write()
        self.active = False
        return web.Response(status=200)
