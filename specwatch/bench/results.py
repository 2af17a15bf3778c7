"""What a benchmark is asked to run and what it measured: configuration, runs, series, events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specwatch.core.gpu import GpuInventory
from specwatch.core.server import ServerInfo
from specwatch.core.stats import Summary

if TYPE_CHECKING:
    from specwatch.core.gpu_summary import GpuRunSummary

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
