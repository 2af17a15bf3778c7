"""A benchmark and its snapshot as typed, frozen records: the one model of a snapshot file.

The runner fills :class:`RunResult`, :class:`Overall` and :class:`SeriesPoint` while it measures;
``specwatch.bench.snapshot`` puts them into a :class:`Snapshot` and turns it into the JSON
values of the file, :meth:`Snapshot.from_dict` back, both with the one codec of
:mod:`specwatch.core.values`. ``specwatch/bench/snapshot.schema.json`` documents the
same shape (a test keeps the two in agreement). Every schema version reads into the same
records: version 1 named the board's maximum SM clock ``sm_clock_max_mhz`` (version 2 on:
``board_max_sm_clock_mhz``); version 3 adds the server process's code identity
(``server.process``) and each run's load (``runs[].load``), which for older versions is worked
out again from the runs' counter deltas where they allow it; version 4 adds this host's CPU
(``host_cpu``, ``runs[].host_cpu``: :mod:`specwatch.core.host`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from specwatch.core import identity as identity_json
from specwatch.core.goodput import DEFAULT_SLO, RequestGoodput, Slo, request_goodput
from specwatch.core.gpu import GpuInventory, GpuStatic
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.host import HostSpan, combine_spans
from specwatch.core.identity import ServerIdentity
from specwatch.core.load import RunLoad, load_from_counters
from specwatch.core.redaction import redact_value
from specwatch.core.server import ServerInfo, SpecConfig
from specwatch.core.stats import Summary, summarize
from specwatch.core.steady import WINDOW_S, Steadiness
from specwatch.core.values import from_plain, to_jsonable


def runs_goodput(runs: Iterable[RunResult], slo: Slo) -> RequestGoodput:
    """Goodput over every stream of ``runs`` (each stream is one request)."""
    return request_goodput(
        (pair for r in runs for pair in zip(r.stream_ttft_s, r.stream_tpot_s, strict=False)), slo
    )


def _slo_s(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None


NO_FIGURE = summarize([])
"""A figure over no runs (mean ``None``)."""
NO_LOAD = RunLoad(None, None)


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
    steady: bool = False
    """Warm up until the GPUs are steady (``specwatch.core.steady``) instead of a fixed count."""
    steady_limit_s: float = 300.0
    """The longest ``steady`` waits before measuring anyway."""
    steady_window_s: float = WINDOW_S
    """The window over which the steady-state slopes are taken."""
    slo_ttft_s: float | None = 1.0
    """Goodput's objective for the time to first token (``None``: none; schema 5)."""
    slo_tpot_s: float | None = 0.05
    """Goodput's objective for the time per output token after the first (``None``: none)."""

    @property
    def slo(self) -> Slo:
        """The goodput objectives the benchmark is judged against."""
        return Slo(self.slo_ttft_s, self.slo_tpot_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """One warmup or measured run (``concurrency`` streams started together).

    Fields with a default are the ones a snapshot may lack (older or hand-made files).
    """

    index: int
    """1-based within its phase."""
    warmup: bool
    prompt_index: int = 0
    """Index of the first stream's prompt in the prompt list."""
    streams: int = 1
    completion_tokens: int
    """All streams together."""
    prompt_tokens: int | None
    wall_s: float
    """First request sent to last byte of the last stream."""
    tok_s: float | None
    """completion_tokens / wall_s: the story's figure (TTFT included)."""
    decode_tok_s: float | None = None
    """Per-stream decode speed without TTFT (mean over streams)."""
    ttft_s: float | None = None
    steps: int | None = None
    step_latency_mean_s: float | None = None
    step_latency_p50_s: float | None = None
    step_latency_p90_s: float | None = None
    step_latency_p99_s: float | None = None
    tokens_per_step: float | None = None
    accept_length: float | None = None
    """The server's per-request figure where reported, else tokens per step."""
    draft_acceptance_rate: float | None = None
    counts_exact: bool = False
    count_source: str = ""
    finish_reason: str | None = None
    t_start: float = 0.0
    """Seconds since the benchmark started."""
    t_end: float = 0.0
    server_counters: Mapping[str, float] = field(default_factory=dict)
    """Deltas of the server's raw counters over the run (empty without ``/metrics``)."""
    server_accept_length: float | None = None
    """Tokens per verify step from the counter deltas, where the server exposes them."""
    server_stats: Mapping[str, Any] = field(default_factory=dict)
    """The server's own per-request numbers (first stream), e.g. llama.cpp ``timings``;
    SGLang's ``spec_correct_drafts_histogram`` summed over the run's streams."""
    gpus: tuple[GpuRunSummary, ...] = ()
    error: str | None = None
    notes: Mapping[str, str] = field(default_factory=dict)
    load: RunLoad = NO_LOAD
    """The server's load during the run (``specwatch.core.load``); set when it is snapshotted."""
    host_cpu: HostSpan | None = None
    """This host's CPU during the run (``specwatch.core.host``; schema 4)."""
    stream_ttft_s: tuple[float | None, ...] = ()
    """Each stream's time to first token, in stream order (schema 5: goodput per request)."""
    stream_tpot_s: tuple[float | None, ...] = ()
    """Each stream's time per output token after the first (``None``: a one-token stream)."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Overall:
    """Statistics over the measured runs (a figure a snapshot lacks reads as :data:`NO_FIGURE`)."""

    runs: int
    tok_s: Summary
    decode_tok_s: Summary = NO_FIGURE
    ttft_s: Summary = NO_FIGURE
    step_latency_s: Summary = NO_FIGURE
    tokens_per_step: Summary = NO_FIGURE
    accept_length: Summary = NO_FIGURE
    completion_tokens: Summary = NO_FIGURE
    total_tokens: int
    running_requests: Summary = NO_FIGURE
    """Mean requests in the server during a run (Little's law on its request-latency sum)."""
    prompt_tok_s: Summary = NO_FIGURE
    """Prompt tokens per second the server processed during a run, every client's."""
    gpus: tuple[GpuRunSummary, ...] = ()
    """Each GPU over all runs."""


@dataclass(frozen=True, slots=True)
class SeriesGpu:
    """One GPU in one bucket of the time series (its last tick in the bucket)."""

    index: int
    sm_clock_mhz: int | None = None
    temp_c: int | None = None
    hbm_temp_c: int | None = None
    power_w: float | None = None
    reasons: int | None = None


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One bucket of the time series."""

    t: float
    """Bucket start, seconds since the benchmark started."""
    tok_s: float
    """Tokens that arrived in the bucket (all streams) per second."""
    phase: str
    """``"warmup"``, ``"run"`` or ``"idle"`` (between requests)."""
    run: int | None = None
    gpus: tuple[SeriesGpu, ...] = ()


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
    steady: Steadiness | None = None
    """Whether the GPUs were steady before the runs, and their drift during them."""

    @property
    def host_cpu(self) -> HostSpan | None:
        """This host's CPU over the measured runs (``None``: not read)."""
        return combine_spans([r.host_cpu for r in self.runs if r.host_cpu is not None])

    @property
    def goodput(self) -> RequestGoodput:
        """Share of the measured runs' requests within the configured SLO."""
        return runs_goodput(self.runs, self.config.slo)

    @property
    def ok(self) -> bool:
        """All runs finished without error or interruption."""
        return not self.interrupted and self.error is None and len(self.runs) == self.config.runs


@dataclass(frozen=True, slots=True)
class Tool:
    """What wrote the snapshot."""

    name: str
    version: str


NOT_COLLECTED = "not collected"
"""``process_note`` of a server whose process identity was not looked for."""


def process_note(
    identity: ServerIdentity | None, missing: str = NOT_COLLECTED
) -> tuple[ServerIdentity | None, str | None]:
    """The identity worth keeping and, without one, why (``missing``: it was not looked for)."""
    if identity is None:
        return None, missing
    if identity.pid is None:
        return None, "; ".join(identity.notes) or "the server process was not found"
    return identity, None


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotServer:
    """The server the benchmark ran against (a :class:`ServerInfo` as it is kept)."""

    base_url: str | None = None
    """Without credentials."""
    dialect: str | None
    version: str | None
    model: str | None
    speculative: SpecConfig
    metrics_enabled: bool | None = None
    metrics_reason: str | None = None
    max_model_len: int | None = None
    launch_args: Mapping[str, Any] | None
    """Secret-looking ones masked."""
    notes: Mapping[str, Any] = field(default_factory=dict)
    process: ServerIdentity | None = None
    """The code identity of the server process (schema 3); ``None`` when not recorded."""
    process_note: str | None = None
    """Why there is no identity (remote server, older snapshot...)."""

    @classmethod
    def of(
        cls, info: ServerInfo, identity: ServerIdentity | None, missing: str = NOT_COLLECTED
    ) -> SnapshotServer:
        """A detected server as a snapshot (and a probe) keeps it: no credentials in the URL,
        secrets in the launch arguments withheld, the process identity or why there is none
        (``missing``: it was not looked for)."""
        process, note = process_note(identity, missing)
        launch = info.launch_args
        return cls(
            base_url=re.sub(r"//[^/@]*@", "//", info.base_url),
            dialect=info.dialect.value,
            version=info.version,
            model=info.model,
            speculative=info.spec,
            metrics_enabled=info.metrics_enabled,
            metrics_reason=info.metrics_reason,
            max_model_len=info.max_model_len,
            launch_args=None if launch is None else redact_value(to_jsonable(launch)),
            notes=to_jsonable(info.notes),
            process=process,
            process_note=note,
        )

    def to_json(self) -> dict[str, Any]:
        """The plain JSON values (the process identity in its own format)."""
        out: dict[str, Any] = to_jsonable(self)
        out["process"] = None if self.process is None else identity_json.to_json(self.process)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotEnvironment:
    """The driver and each GPU's fixed facts."""

    available: bool
    reason: str | None = None
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    gpus: tuple[GpuStatic, ...]


@dataclass(frozen=True, slots=True)
class TimeSeries:
    """Token rate and GPU state in buckets of ``interval_s``."""

    interval_s: float
    points: tuple[SeriesPoint, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """A benchmark snapshot (see ``specwatch/bench/snapshot.schema.json``)."""

    schema_version: int
    tool: Tool
    created: str
    """UTC, ISO 8601."""
    created_unix: float | None = None
    started_unix: float | None = None
    duration_s: float | None = None
    host: str
    command: tuple[str, ...]
    """The command line without ``--api-key``."""
    label: str | None
    interrupted: bool
    error: str | None
    complete: bool | None = None
    config: Mapping[str, Any]
    """:class:`BenchConfig` by field name, and ``prompts_source``; a mapping because a recorded
    range (``specwatch.record.compare_range``) has settings a :class:`BenchConfig` cannot hold."""
    server: SnapshotServer
    gpu_environment: SnapshotEnvironment
    warmups: tuple[RunResult, ...] = ()
    runs: tuple[RunResult, ...]
    overall: Overall
    timeseries: TimeSeries
    steady: Steadiness | None = None
    """The steady-state gate (``None``: not recorded, older snapshots)."""
    host_cpu: HostSpan | None = None
    """This host's CPU over the measured runs (schema 4; ``None``: not read, older snapshots)."""

    @property
    def goodput(self) -> RequestGoodput | None:
        """Share of the runs' requests within the SLO the benchmark was run with (``None``:
        a snapshot from before schema 5, which kept no per-request figures)."""
        if not any(r.stream_ttft_s for r in self.runs):
            return None
        slo = Slo(
            _slo_s(self.config.get("slo_ttft_s", DEFAULT_SLO.ttft_s)),
            _slo_s(self.config.get("slo_tpot_s", DEFAULT_SLO.tpot_s)),
        )
        return runs_goodput(self.runs, slo)

    @property
    def run_tok_s(self) -> list[float]:
        """Per-run tok/s (runs without a figure are skipped)."""
        return [r.tok_s for r in self.runs if r.tok_s is not None]

    @property
    def finished_runs(self) -> int:
        """Measured runs that produced a tok/s figure."""
        return len(self.run_tok_s)

    @property
    def accept_length(self) -> float | None:
        """Mean accept length over the runs (tokens per verify step, as the bench reports it)."""
        return self.overall.accept_length.mean

    @property
    def overall_gpus(self) -> tuple[GpuRunSummary, ...]:
        """Each GPU over all runs."""
        return self.overall.gpus

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        """Build from a dict that passed schema validation (any supported version).

        Raises:
            TypeError: A value does not fit its field (outside what the schema checks).
        """
        version = d.get("schema_version")
        raw = {**d, "runs": [_gpus_v2(r) for r in d.get("runs") or ()]}
        raw["warmups"] = [_gpus_v2(r) for r in d.get("warmups") or ()]
        raw["overall"] = _gpus_v2(d.get("overall") or {})
        server = dict(d.get("server") or {})
        process = server.pop("process", None)
        raw["server"] = server
        snap: Snapshot = from_plain(cls, raw)
        note = snap.server.process_note
        if process is None and note is None:
            old = isinstance(version, int) and version < 3
            note = "not recorded (snapshot schema version < 3)" if old else "not recorded"
        runs, overall = with_load(snap.runs, snap.overall)
        return dataclasses.replace(
            snap,
            config=MappingProxyType(dict(snap.config)),
            server=dataclasses.replace(
                snap.server,
                process=None if process is None else identity_json.from_json(dict(process)),
                process_note=note,
            ),
            runs=runs,
            overall=overall,
        )


def _gpus_v2(d: Mapping[str, Any]) -> dict[str, Any]:
    """A run or the overall with its GPUs' board maximum named as from schema version 2 on."""
    gpus = [
        {"board_max_sm_clock_mhz": g.get("sm_clock_max_mhz"), **g}
        for g in d.get("gpus") or ()
        if isinstance(g, Mapping)
    ]
    return {**d, "gpus": gpus}


def with_load(
    runs: tuple[RunResult, ...], overall: Overall
) -> tuple[tuple[RunResult, ...], Overall]:
    """Each run with its load, and the overall load figures (where they were not recorded)."""
    loaded = tuple(
        dataclasses.replace(r, load=load_from_counters(r.server_counters, r.wall_s))
        if r.load == NO_LOAD
        else r
        for r in runs
    )

    def figure(name: str) -> Summary:
        recorded: Summary = getattr(overall, name)
        if recorded != NO_FIGURE:
            return recorded
        return summarize([v for r in loaded if (v := getattr(r.load, name)) is not None])

    return loaded, dataclasses.replace(
        overall, running_requests=figure("running_requests"), prompt_tok_s=figure("prompt_tok_s")
    )


__all__ = [
    "NOT_COLLECTED",
    "NO_FIGURE",
    "NO_LOAD",
    "BenchConfig",
    "BenchResult",
    "Overall",
    "RunResult",
    "SeriesGpu",
    "SeriesPoint",
    "Snapshot",
    "SnapshotEnvironment",
    "SnapshotServer",
    "TimeSeries",
    "Tool",
    "process_note",
    "with_load",
]
