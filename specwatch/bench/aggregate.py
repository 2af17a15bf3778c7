"""Streams into runs, runs into statistics, arrivals and ticks into a time series (all pure)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from specwatch.core.acceptance import HISTOGRAM_KEYS, drafts_histogram
from specwatch.core.goodput import tpot_of
from specwatch.core.gpu import GpuTick
from specwatch.core.server import StreamResult
from specwatch.core.snapshot_records import Overall, RunResult, SeriesGpu, SeriesPoint
from specwatch.core.stats import Summary, summarize


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


def _run_stats(results: Sequence[StreamResult]) -> dict[str, object]:
    """The first stream's server stats, with SGLang's accepted-drafts histogram summed over
    every stream of the run (the advisor's per-position counts)."""
    stats: dict[str, object] = dict(results[0].server_stats)
    found = [h for r in results if (h := drafts_histogram(r.server_stats)) is not None]
    if len(found) > 1:
        width = max(len(h) for h in found)
        stats[HISTOGRAM_KEYS[0]] = [
            math.fsum(h[j] for h in found if j < len(h)) for j in range(width)
        ]
    return stats


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
        server_stats=_run_stats(results),
        error="; ".join(errors) if errors else None,
        notes=dict(first.notes),
        stream_ttft_s=tuple(r.ttft_s for r in results),
        stream_tpot_s=tuple(tpot_of(r.completion_tokens, r.decode_s) for r in results),
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
