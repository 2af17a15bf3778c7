"""The benchmark runner: warmup requests, then N measured runs of one streamed completion each.

Each run records what the client saw (tokens, wall time, TTFT, step gaps), what the server's own
counters say happened in that interval (deltas of two ``/metrics`` scrapes, as ``vllm bench
serve`` does), and what the GPUs did meanwhile (a summary of the sampler's ticks inside the run).
That last part is what lets ``specwatch compare`` tell a code regression from hot GPUs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specwatch.bench.prompts import load_prompts
from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick
from specwatch.core.reasons import IDLE_BIT
from specwatch.core.server import ChunkArrival, ServerInfo, StreamResult
from specwatch.core.stats import Summary, summarize

if TYPE_CHECKING:
    from specwatch.core.gpu_summary import GpuRunSummary
    from specwatch.sources.client import ServerClient
    from specwatch.sources.metrics import MetricsWatcher
    from specwatch.sources.nvml import GpuSampler

EVENT_KINDS = ("warmup_done", "run_start", "run_done", "finished", "interrupted", "error")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to run."""

    runs: int = 5
    warmup: int = 2
    max_tokens: int = 2048
    concurrency: int = 1
    """Streams per run; a run's tok/s is then the sum of their tokens over the run's wall time."""
    label: str | None = None
    prompts_file: str | None = None
    seed: int = 0
    temperature: float = 0.0
    ignore_eos: bool = True
    """Ask the server not to stop early where it supports it; otherwise real counts are kept."""
    warmup_max_tokens: int = 64
    """Warmup only needs to trigger graph capture and caches, not to heat the GPUs."""
    series_interval_s: float = 1.0
    """Bucket width of the token-rate and GPU time series."""
    gpu_interval_s: float = 0.5
    """Sampling period used when the runner drives a sampler that is not already running."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """One warmup or measured run (``concurrency`` streams started together)."""

    index: int
    """1-based within its phase."""
    warmup: bool
    prompt_index: int
    """Index of the first stream's prompt in the prompt list."""
    streams: int
    completion_tokens: int
    """All streams together."""
    prompt_tokens: int | None
    wall_s: float
    """First request sent to last byte of the last stream."""
    tok_s: float | None
    """completion_tokens / wall_s: the story's figure (TTFT included)."""
    decode_tok_s: float | None
    """Per-stream decode speed without TTFT (mean over streams)."""
    ttft_s: float | None
    steps: int | None
    step_latency_mean_s: float | None
    step_latency_p50_s: float | None
    step_latency_p90_s: float | None
    step_latency_p99_s: float | None
    tokens_per_step: float | None
    accept_length: float | None
    """The server's per-request figure where reported, else tokens per step."""
    draft_acceptance_rate: float | None
    counts_exact: bool
    count_source: str
    finish_reason: str | None
    t_start: float
    """Seconds since the benchmark started."""
    t_end: float
    server_counters: Mapping[str, float] = field(default_factory=dict)
    """Deltas of the server's raw counters over the run (empty without ``/metrics``)."""
    server_accept_length: float | None = None
    """Tokens per verify step from the counter deltas, where the server exposes them."""
    server_stats: Mapping[str, Any] = field(default_factory=dict)
    """The server's own per-request numbers (first stream), e.g. llama.cpp ``timings``."""
    gpus: tuple[GpuRunSummary, ...] = ()
    error: str | None = None
    notes: Mapping[str, str] = field(default_factory=dict)

    def progress_line(self, total: int) -> str:
        """``Run 1/5: 2048 tokens in 24.85s = 82.4 tok/s (prompt: 32 toks)``, as in the story."""
        if self.warmup:
            return f"Warmup {self.index}/{total} done ({self.completion_tokens} tokens)"
        rate = f"{self.tok_s:.1f}" if self.tok_s is not None else "?"
        extra = f"{self.streams} streams, " if self.streams > 1 else ""
        prompt = self.prompt_tokens if self.prompt_tokens is not None else "?"
        return (
            f"Run {self.index}/{total}: {self.completion_tokens} tokens in {self.wall_s:.2f}s"
            f" = {rate} tok/s ({extra}prompt: {prompt} toks)"
        )


@dataclass(frozen=True, slots=True)
class Overall:
    """Statistics over the measured runs."""

    runs: int
    tok_s: Summary
    decode_tok_s: Summary
    ttft_s: Summary
    step_latency_s: Summary
    tokens_per_step: Summary
    accept_length: Summary
    completion_tokens: Summary
    total_tokens: int


@dataclass(frozen=True, slots=True)
class SeriesGpu:
    """One GPU in one bucket of the time series (its last tick in the bucket)."""

    index: int
    sm_clock_mhz: int | None
    temp_c: int | None
    hbm_temp_c: int | None
    power_w: float | None
    reasons: int | None


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One bucket of the time series."""

    t: float
    """Bucket start, seconds since the benchmark started."""
    tok_s: float
    """Tokens that arrived in the bucket (all streams) per second."""
    phase: str
    """``"warmup"``, ``"run"`` or ``"idle"`` (between requests)."""
    run: int | None
    gpus: tuple[SeriesGpu, ...] = ()


@dataclass(frozen=True, slots=True)
class BenchEvent:
    """Progress, for a command line or a TUI."""

    kind: str
    """One of ``EVENT_KINDS``."""
    index: int
    total: int
    t: float
    """Seconds since the benchmark started."""
    message: str
    run: RunResult | None = None


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything a benchmark measured; finished runs are kept when it was interrupted."""

    config: BenchConfig
    server: ServerInfo
    inventory: GpuInventory | None
    prompts_source: str
    started_at: float
    """Unix seconds."""
    duration_s: float
    warmups: tuple[RunResult, ...]
    runs: tuple[RunResult, ...]
    overall: Overall
    gpus: tuple[GpuRunSummary, ...]
    """Per GPU over all measured runs."""
    series: tuple[SeriesPoint, ...]
    interrupted: bool
    error: str | None

    @property
    def ok(self) -> bool:
        """All runs finished without error or interruption."""
        return not self.interrupted and self.error is None and len(self.runs) == self.config.runs


# --- pure helpers ---------------------------------------------------------------------------


def _mean_opt(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return math.fsum(vals) / len(vals) if vals else None


def overall_of(runs: Sequence[RunResult]) -> Overall:
    """Statistics over measured runs."""

    def col(get: Callable[[RunResult], float | None]) -> Summary:
        return summarize([v for r in runs if (v := get(r)) is not None and math.isfinite(v)])

    return Overall(
        runs=len(runs),
        tok_s=col(lambda r: r.tok_s),
        decode_tok_s=col(lambda r: r.decode_tok_s),
        ttft_s=col(lambda r: r.ttft_s),
        step_latency_s=col(lambda r: r.step_latency_mean_s),
        tokens_per_step=col(lambda r: r.tokens_per_step),
        accept_length=col(lambda r: r.accept_length),
        completion_tokens=col(lambda r: float(r.completion_tokens)),
        total_tokens=sum(r.completion_tokens for r in runs),
    )


def counter_deltas(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """``after − before`` for counters present in both (a decrease means a restart: dropped)."""
    return {k: after[k] - before[k] for k in sorted(after) if k in before and after[k] >= before[k]}


def combine_streams(
    results: Sequence[StreamResult],
    *,
    index: int,
    warmup: bool,
    prompt_index: int,
    t_start: float,
    t_end: float,
    wall_s: float,
) -> RunResult:
    """One RunResult from the streams of a run (one stream: its own figures)."""
    tokens = sum(r.completion_tokens for r in results)
    prompts = [r.prompt_tokens for r in results]
    errors = [r.error for r in results if r.error]
    steps = [r.steps for r in results if r.steps is not None]
    first = results[0]
    return RunResult(
        index=index,
        warmup=warmup,
        prompt_index=prompt_index,
        streams=len(results),
        completion_tokens=tokens,
        prompt_tokens=None if any(p is None for p in prompts) else sum(p or 0 for p in prompts),
        wall_s=wall_s,
        tok_s=tokens / wall_s if wall_s > 0 and tokens > 0 else None,
        decode_tok_s=_mean_opt([r.decode_tok_s for r in results]),
        ttft_s=_mean_opt([r.ttft_s for r in results]),
        steps=sum(steps) if steps else None,
        step_latency_mean_s=_mean_opt([r.step_latency_mean_s for r in results]),
        step_latency_p50_s=_mean_opt([r.step_latency_p50_s for r in results]),
        step_latency_p90_s=_mean_opt([r.step_latency_p90_s for r in results]),
        step_latency_p99_s=_mean_opt([r.step_latency_p99_s for r in results]),
        tokens_per_step=_mean_opt([r.tokens_per_step for r in results]),
        accept_length=_mean_opt([r.accept_length for r in results]),
        draft_acceptance_rate=_mean_opt([r.draft_acceptance_rate for r in results]),
        counts_exact=all(r.counts_exact for r in results),
        count_source=first.count_source,
        finish_reason=first.finish_reason,
        t_start=t_start,
        t_end=t_end,
        server_stats=dict(first.server_stats),
        error="; ".join(errors) if errors else None,
        notes=dict(first.notes),
    )


def build_series(
    arrivals: Sequence[tuple[float, int]],
    ticks: Sequence[GpuTick],
    phases: Sequence[tuple[float, float, str, int]],
    t0: float,
    duration_s: float,
    interval_s: float = 1.0,
) -> tuple[SeriesPoint, ...]:
    """Bucket token arrivals and GPU ticks into a regular time series.

    Args:
        arrivals: ``(t, tokens)`` on the runner's clock: ``tokens`` arrived at ``t``.
        ticks: GPU ticks on the same clock.
        phases: ``(t_start, t_end, "warmup"|"run", index)`` relative to ``t0``.
        t0: The benchmark's start on the runner's clock.
        duration_s: Length of the benchmark.
        interval_s: Bucket width.
    """
    n = max(1, math.ceil(duration_s / interval_s - 1e-9))
    tokens = [0] * n
    for t, k in arrivals:
        i = int((t - t0) // interval_s)
        if 0 <= i < n:
            tokens[i] += k
        elif i >= n:
            tokens[-1] += k
    last: list[dict[int, SeriesGpu]] = [{} for _ in range(n)]
    for tick in ticks:
        i = int((tick.t - t0) // interval_s)
        if not 0 <= i < n:
            continue
        for s in tick.samples:
            last[i][s.index] = SeriesGpu(
                s.index, s.sm_clock_mhz, s.temp_c, s.hbm_temp_c, s.power_w, s.clock_event_reasons
            )
    points: list[SeriesPoint] = []
    for i in range(n):
        b0, b1 = i * interval_s, (i + 1) * interval_s
        # The phase that covers most of the bucket names it.
        best: tuple[str, int | None] = ("idle", None)
        best_cover = 0.0
        for p0, p1, kind, idx in phases:
            cover = min(b1, p1) - max(b0, p0)
            if cover > best_cover:
                best, best_cover = (kind, idx), cover
        width = min(interval_s, max(duration_s - b0, 1e-9))
        points.append(
            SeriesPoint(
                t=round(b0, 6),
                tok_s=tokens[i] / width,
                phase=best[0],
                run=best[1],
                gpus=tuple(last[i][k] for k in sorted(last[i])),
            )
        )
    return tuple(points)


def busy_view(ticks: Sequence[GpuTick]) -> list[GpuTick]:
    """The ticks without the idle samples of GPUs that worked at some point in them.

    A run's window starts when the request is sent and ends at its last byte, so a tick can
    land before prefill or after the last step, with the GPU idle at its idle clock; averaged
    in, that would drag the run's SM clock toward the idle clock, and the "GPU or code?" answer
    rests on the clock the GPUs held while decoding. A GPU idle in every tick (not in the
    server's tensor-parallel group) keeps all its samples, so it still shows as idle.
    """

    def idle(s: GpuSample) -> bool:
        return s.clock_event_reasons is not None and bool(s.clock_event_reasons & IDLE_BIT)

    worked = {s.index for k in ticks for s in k.samples if not s.lost and not idle(s)}
    out: list[GpuTick] = []
    for k in ticks:
        keep = tuple(s for s in k.samples if s.index not in worked or not idle(s))
        if keep:
            out.append(k if len(keep) == len(k.samples) else dataclasses.replace(k, samples=keep))
    return out


# --- GPU recording ----------------------------------------------------------------------------


class _GpuRecorder:
    """GPU ticks over the benchmark, from the sampler's history.

    A sampler that is already running (the TUI's) is only read; an idle one is driven here
    every ``interval_s``. Either way one extra tick is taken as each run starts decoding, so a
    run shorter than the sampling period still gets a reading under load.
    """

    def __init__(self, sampler: GpuSampler | None, interval_s: float) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self.inventory: GpuInventory | None = None

    @property
    def active(self) -> bool:
        return self.sampler is not None and self.inventory is not None and self.inventory.available

    async def start(self) -> None:
        s = self.sampler
        if s is None:
            return
        self.inventory = s.inventory or await asyncio.to_thread(s.open)
        if self.active and not s.running:
            self._task = asyncio.create_task(self._loop(s))

    async def _loop(self, s: GpuSampler) -> None:
        while True:
            started = time.monotonic()
            await asyncio.to_thread(s.sample)
            # The next tick is scheduled only after this one finished: ticks never pile up.
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    async def sample_now(self) -> None:
        if self.active and self.sampler is not None:
            await asyncio.to_thread(self.sampler.sample)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def ticks(self, t0: float, t1: float) -> list[GpuTick]:
        if not self.active or self.sampler is None:
            return []
        return sorted((k for k in self.sampler.ticks_since(t0) if k.t <= t1), key=lambda k: k.t)

    def summarize(self, ticks: Sequence[GpuTick], tokens: int | None) -> tuple[GpuRunSummary, ...]:
        if not ticks or self.inventory is None:
            return ()
        from specwatch.core.gpu_summary import summarize_ticks

        # The sampler refreshes slow static fields; its latest inventory names them best.
        inventory = (self.sampler.inventory if self.sampler else None) or self.inventory
        return summarize_ticks(busy_view(ticks), inventory, tokens)


# --- the runner -----------------------------------------------------------------------------


async def run_benchmark(
    client: ServerClient,
    info: ServerInfo,
    config: BenchConfig,
    sampler: GpuSampler | None = None,
    on_event: Callable[[BenchEvent], None] | None = None,
    cancel: asyncio.Event | None = None,
    *,
    prompts: Sequence[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    metrics: MetricsWatcher | None = None,
) -> BenchResult:
    """Run warmups then measured runs; never raises for server faults (``error`` is set).

    Cancellation (``cancel`` set, or this task cancelled, e.g. by Ctrl-C) stops the run in
    flight and returns the finished runs with ``interrupted=True``.

    Args:
        client: An open client for the server.
        info: The detected server.
        config: What to run.
        sampler: GPU sampler; its ticks inside each run become the run's GPU summary. When it
            is not running, the runner samples it every ``config.gpu_interval_s`` itself.
        on_event: Called on the event loop for progress.
        cancel: Set to stop early, keeping finished runs.
        prompts: Overrides ``config.prompts_file`` and the built-in set.
        clock: Monotonic clock shared with the sampler (``time.monotonic`` for both by default).
        metrics: A watcher to read counters with; one is made when ``info`` has ``/metrics``.

    Returns:
        The measured runs, statistics, time series and how the benchmark ended.
    """
    from specwatch.sources.dialects import dialect_for
    from specwatch.sources.stream import stream_completion

    started_at = time.time()
    t0 = clock()
    prompt_list = list(prompts) if prompts else load_prompts(config.prompts_file, config.seed)
    if prompts:
        prompts_source = "given"
    elif config.prompts_file:
        prompts_source = str(config.prompts_file)
    else:
        prompts_source = f"builtin (seed {config.seed})"
    if metrics is None and info.metrics_enabled:
        from specwatch.sources.metrics import MetricsWatcher

        metrics = MetricsWatcher(client, info)

    recorder = _GpuRecorder(sampler, config.gpu_interval_s)
    arrivals: list[tuple[float, int]] = []
    phases: list[tuple[float, float, str, int]] = []
    warmups: list[RunResult] = []
    runs: list[RunResult] = []
    interrupted = False
    error: str | None = None
    next_prompt = 0

    def emit(kind: str, index: int, total: int, message: str, run: RunResult | None = None) -> None:
        if on_event is not None:
            on_event(BenchEvent(kind, index, total, clock() - t0, message, run))

    async def one_run(index: int, warmup: bool, max_tokens: int) -> RunResult | None:
        """One run; ``None`` when cancelled before it finished."""
        nonlocal next_prompt
        n = max(1, config.concurrency)
        first_prompt = next_prompt % len(prompt_list)
        chosen = [prompt_list[(next_prompt + k) % len(prompt_list)] for k in range(n)]
        next_prompt += n
        before: dict[str, float] | None = None
        if metrics is not None and not warmup:
            window = await metrics.scrape()
            # A failed scrape leaves the previous counters in place: no delta beats a wrong one.
            before = None if "error" in window.notes else dict(metrics.last_counters)
        seen = [0] * n
        sampled_mid = False

        def on_chunk_for(k: int, sent: float) -> Callable[[ChunkArrival], None]:
            def on_chunk(c: ChunkArrival) -> None:
                nonlocal sampled_mid
                if c.tokens > seen[k]:
                    arrivals.append((sent + c.t, c.tokens - seen[k]))
                    seen[k] = c.tokens
                if not sampled_mid and not warmup:
                    sampled_mid = True
                    # A reading while the GPUs are decoding, however short the run is.
                    mid.append(asyncio.ensure_future(recorder.sample_now()))

            return on_chunk

        mid: list[asyncio.Future[None]] = []
        run_t0 = clock()
        tasks = [
            asyncio.ensure_future(
                stream_completion(
                    client,
                    info,
                    prompt,
                    max_tokens,
                    temperature=config.temperature,
                    ignore_eos=config.ignore_eos,
                    clock=clock,
                    on_chunk=on_chunk_for(k, clock()),
                )
            )
            for k, prompt in enumerate(chosen)
        ]
        cancelled = await _wait_all(tasks, cancel)
        # Errors of the extra GPU reading do not matter; our own cancellation still propagates.
        await asyncio.gather(*mid, return_exceptions=True)
        run_t1 = clock()
        if cancelled:
            return None
        results = [t.result() for t in tasks]
        phases.append((run_t0 - t0, run_t1 - t0, "warmup" if warmup else "run", index))
        run = combine_streams(
            results,
            index=index,
            warmup=warmup,
            prompt_index=first_prompt,
            t_start=run_t0 - t0,
            t_end=run_t1 - t0,
            wall_s=max(r.wall_s for r in results),
        )
        if warmup:
            return run
        deltas: dict[str, float] = {}
        if metrics is not None and before is not None:
            window = await metrics.scrape()
            if "error" not in window.notes:
                deltas = counter_deltas(before, metrics.last_counters)
        ticks = recorder.ticks(run_t0, run_t1)
        return dataclasses.replace(
            run,
            server_counters=deltas,
            server_accept_length=(
                None
                if info.spec.enabled is False
                else dialect_for(info.dialect).accept_length_from_counters(deltas)
            ),
            gpus=recorder.summarize(ticks, run.completion_tokens),
        )

    try:
        await recorder.start()
        for phase_warmup, count, max_tokens in (
            (True, config.warmup, min(config.warmup_max_tokens, config.max_tokens)),
            (False, config.runs, config.max_tokens),
        ):
            for i in range(1, count + 1):
                if cancel is not None and cancel.is_set():
                    interrupted = True
                    break
                if not phase_warmup:
                    emit("run_start", i, count, f"Run {i}/{count} started")
                run = await one_run(i, phase_warmup, max_tokens)
                if run is None:
                    interrupted = True
                    break
                if run.error is not None or run.completion_tokens == 0:
                    what = f"Warmup {i}/{count}" if phase_warmup else f"Run {i}/{count}"
                    error = f"{what} failed: {run.error or 'the server returned no tokens'}"
                    emit("error", i, count, error, run)
                    break
                (warmups if phase_warmup else runs).append(run)
                emit(
                    "warmup_done" if phase_warmup else "run_done",
                    i,
                    count,
                    run.progress_line(count),
                    run,
                )
            if interrupted or error is not None:
                break
    except asyncio.CancelledError:
        # Ctrl-C under asyncio.run, or the TUI cancelling its worker: keep what finished.
        interrupted = True
    finally:
        with contextlib.suppress(asyncio.CancelledError):
            await recorder.stop()

    t_end = clock()
    all_ticks = recorder.ticks(t0, t_end)
    in_runs = [k for k in all_ticks if any(r.t_start <= k.t - t0 <= r.t_end for r in runs)]
    result = BenchResult(
        config=config,
        server=info,
        inventory=recorder.inventory,
        prompts_source=prompts_source,
        started_at=started_at,
        duration_s=t_end - t0,
        warmups=tuple(warmups),
        runs=tuple(runs),
        overall=overall_of(runs),
        gpus=recorder.summarize(in_runs, sum(r.completion_tokens for r in runs) or None),
        series=build_series(arrivals, all_ticks, phases, t0, t_end - t0, config.series_interval_s),
        interrupted=interrupted,
        error=error,
    )
    if interrupted:
        emit(
            "interrupted",
            len(runs),
            config.runs,
            f"Interrupted after {len(runs)} of {config.runs} runs",
        )
    elif error is None:
        emit("finished", len(runs), config.runs, f"Finished {len(runs)} runs")
    return result


async def _wait_all(
    tasks: Sequence[asyncio.Future[StreamResult]], cancel: asyncio.Event | None
) -> bool:
    """Wait for every task; on ``cancel`` (or our own cancellation) cancel them all.

    Returns:
        True when cancelled through ``cancel``. Our own cancellation is re-raised after the
        streams were cancelled and awaited.
    """
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        pending: set[asyncio.Future[Any]] = set(tasks)
        if waiter is not None:
            pending.add(waiter)
        while True:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if waiter is not None and waiter in done:
                await _cancel_all(tasks)
                return True
            if all(t.done() for t in tasks):
                return False
    except asyncio.CancelledError:
        await _cancel_all(tasks)
        raise
    finally:
        if waiter is not None:
            waiter.cancel()


async def _cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "EVENT_KINDS",
    "BenchConfig",
    "BenchEvent",
    "BenchResult",
    "Overall",
    "RunResult",
    "SeriesGpu",
    "SeriesPoint",
    "build_series",
    "busy_view",
    "combine_streams",
    "counter_deltas",
    "overall_of",
    "run_benchmark",
]
