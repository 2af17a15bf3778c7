"""The benchmark runner: warmup requests, then N measured runs of one streamed completion each.

Each run records what the client saw (tokens, wall time, TTFT, step gaps), what the server's own
counters say happened in that interval (deltas of two ``/metrics`` scrapes, as ``vllm bench
serve`` does), and what the GPUs did meanwhile (a summary of the sampler's ticks inside the run).
That last part is what lets ``specwatch compare`` tell a code regression from hot GPUs.

The types live in :mod:`specwatch.core.snapshot_records`, the pure figures in
:mod:`specwatch.bench.aggregate`, the GPU recording in :mod:`specwatch.bench.recorders`; they
are re-exported here so ``from specwatch.bench.runner import ...`` keeps working. The runner
reports its progress as :class:`BenchEvent` and waits for a run's streams together, cancelling
them together (:func:`wait_all`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specwatch.bench.aggregate import build_series, combine_streams, counter_deltas, overall_of
from specwatch.bench.prompts import load_prompts
from specwatch.bench.recorders import GpuRecorder, HostRecorder
from specwatch.bench.steady_gate import steady_after, steady_gate
from specwatch.core.gpu import GpuSample, GpuTick, sample_busy
from specwatch.core.server import ChunkArrival, ServerInfo, StreamResult
from specwatch.core.snapshot_records import (
    BenchConfig,
    BenchResult,
    RunResult,
)
from specwatch.core.steady import Steadiness

if TYPE_CHECKING:
    from specwatch.core.gpu_summary import GpuRunSummary
    from specwatch.sources.gpu_reader import GpuReader
    from specwatch.sources.host import HostSampler
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.watcher import MetricsWatcher


EVENT_KINDS = (
    "warmup_done",
    "steady_wait",
    "steady",
    "run_start",
    "run_done",
    "finished",
    "interrupted",
    "error",
)


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


def busy_view(ticks: Sequence[GpuTick]) -> list[GpuTick]:
    """The ticks without the idle samples of GPUs that worked at some point in them.

    A run's window starts when the request is sent and ends at its last byte, so a tick can
    land before prefill or after the last step, with the GPU idle at its idle clock; averaged
    in, that would drag the run's SM clock toward the idle clock, and the "GPU or code?" answer
    rests on the clock the GPUs held while decoding. A GPU idle in every tick (not in the
    server's tensor-parallel group) keeps all its samples, so it still shows as idle.
    """

    def idle(s: GpuSample) -> bool:
        return not s.lost and not sample_busy(s)

    worked = {s.index for k in ticks for s in k.samples if not s.lost and not idle(s)}
    out: list[GpuTick] = []
    for k in ticks:
        keep = tuple(s for s in k.samples if s.index not in worked or not idle(s))
        if keep:
            out.append(k if len(keep) == len(k.samples) else dataclasses.replace(k, samples=keep))
    return out


def _summaries(
    recorder: GpuRecorder, ticks: Sequence[GpuTick], tokens: int | None
) -> tuple[GpuRunSummary, ...]:
    return recorder.summarize(busy_view(ticks), tokens)


class _Benchmark:
    """One benchmark's state while it runs: the runs so far, token arrivals, phases, prompts."""

    def __init__(
        self,
        client: ServerClient,
        info: ServerInfo,
        config: BenchConfig,
        prompts: Sequence[str],
        recorder: GpuRecorder,
        metrics: MetricsWatcher | None,
        on_event: Callable[[BenchEvent], None] | None,
        cancel: asyncio.Event | None,
        clock: Callable[[], float],
    ) -> None:
        self.client = client
        self.info = info
        self.config = config
        self.prompts = prompts
        self.recorder = recorder
        self.metrics = metrics
        self.on_event = on_event
        self.cancel = cancel
        self.clock = clock
        self.t0 = clock()
        self.on_tokens: Callable[[int], None] | None = None
        """Called with the measured run's tokens so far, as they stream (a progress line)."""
        self.arrivals: list[tuple[float, int]] = []
        self.phases: list[tuple[float, float, str, int]] = []
        self.warmups: list[RunResult] = []
        self.runs: list[RunResult] = []
        self.interrupted = False
        self.error: str | None = None
        self.next_prompt = 0
        self.steadiness: Steadiness | None = None
        self.host = HostRecorder(None)

    def emit(
        self, kind: str, index: int, total: int, message: str, run: RunResult | None = None
    ) -> None:
        if self.on_event is not None:
            self.on_event(BenchEvent(kind, index, total, self.clock() - self.t0, message, run))

    async def run_phases(self) -> None:
        """Warmups, then measured runs, until done, failed or cancelled."""
        config = self.config
        for warmup, count, max_tokens in (
            (True, config.warmup, min(config.warmup_max_tokens, config.max_tokens)),
            (False, config.runs, config.max_tokens),
        ):
            for i in range(1, count + 1):
                if self.cancel is not None and self.cancel.is_set():
                    self.interrupted = True
                    return
                if not warmup:
                    self.emit("run_start", i, count, f"Run {i}/{count} started")
                run = await self.one_run(i, warmup, max_tokens)
                if run is None:
                    self.interrupted = True
                    return
                if run.error is not None or run.completion_tokens == 0:
                    what = f"Warmup {i}/{count}" if warmup else f"Run {i}/{count}"
                    self.error = f"{what} failed: {run.error or 'the server returned no tokens'}"
                    self.emit("error", i, count, self.error, run)
                    return
                (self.warmups if warmup else self.runs).append(run)
                kind = "warmup_done" if warmup else "run_done"
                self.emit(kind, i, count, run.progress_line(count), run)
            if warmup and not await steady_gate(self):
                return

    def _next_prompts(self) -> tuple[int, list[str]]:
        n = max(1, self.config.concurrency)
        first = self.next_prompt % len(self.prompts)
        chosen = [self.prompts[(self.next_prompt + k) % len(self.prompts)] for k in range(n)]
        self.next_prompt += n
        return first, chosen

    async def _counters(self) -> dict[str, float] | None:
        """The server's counters now; ``None`` when the scrape failed."""
        if self.metrics is None:
            return None
        window = await self.metrics.scrape()
        # A failed scrape leaves the previous counters in place: no delta beats a wrong one.
        return None if "error" in window.notes else dict(self.metrics.last_counters)

    async def one_run(self, index: int, warmup: bool, max_tokens: int) -> RunResult | None:
        """One run; ``None`` when cancelled before it finished."""
        first_prompt, chosen = self._next_prompts()
        before = None if warmup else await self._counters()
        host_t0 = None if warmup else await self.host.mark()
        run_t0 = self.clock()
        streamed = await self._stream_all(chosen, max_tokens, warmup)
        run_t1 = self.clock()
        host_t1 = None if warmup or streamed is None else await self.host.mark()
        if streamed is None:
            return None
        t0 = self.t0
        self.phases.append((run_t0 - t0, run_t1 - t0, "warmup" if warmup else "run", index))
        run = combine_streams(
            streamed,
            index=index,
            warmup=warmup,
            prompt_index=first_prompt,
            t_start=run_t0 - t0,
            t_end=run_t1 - t0,
            wall_s=max(r.wall_s for r in streamed),
        )
        if warmup:
            return run
        from specwatch.sources.dialects.base import dialect_for

        deltas: dict[str, float] = {}
        if before is not None:
            after = await self._counters()
            if after is not None:
                deltas = counter_deltas(before, after)
        ticks = self.recorder.ticks(run_t0, run_t1)
        return dataclasses.replace(
            run,
            server_counters=deltas,
            server_accept_length=(
                None
                if self.info.spec.enabled is False
                else dialect_for(self.info.dialect).accept_length_from_counters(deltas)
            ),
            gpus=_summaries(self.recorder, ticks, run.completion_tokens),
            host_cpu=self.host.between(host_t0, host_t1),
        )

    async def _stream_all(
        self, prompts: Sequence[str], max_tokens: int, warmup: bool
    ) -> list[StreamResult] | None:
        """Stream every prompt at once; ``None`` when cancelled."""
        from specwatch.sources.stream import stream_completion

        seen = [0] * len(prompts)
        mid: list[asyncio.Future[None]] = []

        def on_chunk_for(k: int, sent: float) -> Callable[[ChunkArrival], None]:
            def on_chunk(c: ChunkArrival) -> None:
                if c.tokens > seen[k]:
                    self.arrivals.append((sent + c.t, c.tokens - seen[k]))
                    seen[k] = c.tokens
                    if self.on_tokens is not None and not warmup:
                        self.on_tokens(sum(seen))
                if not mid and not warmup:
                    # A reading while the GPUs are decoding, however short the run is.
                    mid.append(asyncio.ensure_future(self.recorder.sample_now()))

            return on_chunk

        config = self.config
        tasks = [
            asyncio.ensure_future(
                stream_completion(
                    self.client,
                    self.info,
                    prompt,
                    max_tokens,
                    temperature=config.temperature,
                    ignore_eos=config.ignore_eos,
                    clock=self.clock,
                    on_chunk=on_chunk_for(k, self.clock()),
                )
            )
            for k, prompt in enumerate(prompts)
        ]
        cancelled = await wait_all(tasks, self.cancel)
        # Errors of the extra GPU reading do not matter; our own cancellation still propagates.
        await asyncio.gather(*mid, return_exceptions=True)
        return None if cancelled else [t.result() for t in tasks]

    def result(self, prompts_source: str, started_at: float) -> BenchResult:
        """Everything measured so far, with the overall GPU summary and the time series."""
        t0, t_end = self.t0, self.clock()
        runs = self.runs
        all_ticks = self.recorder.ticks(t0, t_end)
        in_runs = [k for k in all_ticks if any(r.t_start <= k.t - t0 <= r.t_end for r in runs)]
        tokens = sum(r.completion_tokens for r in runs) or None
        return BenchResult(
            config=self.config,
            server=self.info,
            inventory=self.recorder.inventory,
            prompts_source=prompts_source,
            started_at=started_at,
            duration_s=t_end - t0,
            warmups=tuple(self.warmups),
            runs=tuple(runs),
            overall=overall_of(runs),
            gpus=_summaries(self.recorder, in_runs, tokens),
            series=build_series(
                self.arrivals,
                all_ticks,
                self.phases,
                t0,
                t_end - t0,
                self.config.series_interval_s,
            ),
            interrupted=self.interrupted,
            error=self.error,
            steady=steady_after(self.steadiness, self.t0, runs, all_ticks),
        )


async def run_benchmark(
    client: ServerClient,
    info: ServerInfo,
    config: BenchConfig,
    sampler: GpuReader | None = None,
    on_event: Callable[[BenchEvent], None] | None = None,
    cancel: asyncio.Event | None = None,
    *,
    prompts: Sequence[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    metrics: MetricsWatcher | None = None,
    on_tokens: Callable[[int], None] | None = None,
    host: HostSampler | None = None,
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
        on_tokens: Called on the event loop with the measured run's tokens so far.
        host: This host's CPU sampler (its server pids set where the server is local); each
            run records the host's CPU figures over it.

    Returns:
        The measured runs, statistics, time series and how the benchmark ended.
    """
    started_at = time.time()
    prompt_list = list(prompts) if prompts else load_prompts(config.prompts_file, config.seed)
    if prompts:
        prompts_source = "given"
    elif config.prompts_file:
        prompts_source = str(config.prompts_file)
    else:
        prompts_source = f"builtin (seed {config.seed})"
    if metrics is None and info.metrics_enabled:
        from specwatch.sources.watcher import MetricsWatcher

        metrics = MetricsWatcher(client, info, only_used=False)
    recorder = GpuRecorder(sampler, config.gpu_interval_s)
    bench = _Benchmark(
        client, info, config, prompt_list, recorder, metrics, on_event, cancel, clock
    )
    bench.on_tokens = on_tokens
    bench.host = HostRecorder(host)
    try:
        await recorder.start()
        await bench.host.start()
        await bench.run_phases()
    except asyncio.CancelledError:
        # Ctrl-C under asyncio.run, or the TUI cancelling its worker: keep what finished.
        bench.interrupted = True
    finally:
        with contextlib.suppress(asyncio.CancelledError):
            await recorder.stop()
            await bench.host.stop()
    result = bench.result(prompts_source, started_at)
    n = len(bench.runs)
    if bench.interrupted:
        bench.emit("interrupted", n, config.runs, f"Interrupted after {n} of {config.runs} runs")
    elif bench.error is None:
        bench.emit("finished", n, config.runs, f"Finished {n} runs")
    return result


async def wait_all(
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
                await cancel_all(tasks)
                return True
            if all(t.done() for t in tasks):
                return False
    except asyncio.CancelledError:
        await cancel_all(tasks)
        raise
    finally:
        if waiter is not None:
            waiter.cancel()


async def cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel every task and wait until each has ended."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["EVENT_KINDS", "BenchEvent", "busy_view", "run_benchmark"]
