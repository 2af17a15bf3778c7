"""Server-side models: what the server client detects, scrapes and streams.

These cross every boundary (client -> UI, benchmark, probe, snapshot), so they are plain frozen
dataclasses of numbers and strings. An unknown value is ``None`` with the reason in ``notes``;
``sources`` says where each number came from (e.g. ``"Δvllm:spec_decode_num_accepted_tokens_total
/ Δvllm:spec_decode_num_drafts_total + 1"``).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Dialect(str, enum.Enum):
    """The server families specwatch understands."""

    SGLANG = "sglang"
    VLLM = "vllm"
    LLAMACPP = "llamacpp"
    TRTLLM = "trtllm"
    """TensorRT-LLM's ``trtllm-serve``."""
    OPENAI = "openai"
    """Any other OpenAI-compatible server."""


def model_card(models: Any) -> Mapping[str, Any] | None:
    """The first model card of a ``/v1/models`` answer (``{"data": [{...}, ...]}``), if any."""
    data = models.get("data") if isinstance(models, Mapping) else None
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        return data[0]
    return None


@dataclass(frozen=True, slots=True)
class SpecConfig:
    """The speculative-decoding setup as far as the server exposes it."""

    enabled: bool | None
    """``None`` when the server does not say (and nothing else gave it away yet)."""
    algorithm: str | None = None
    """e.g. ``"EAGLE3"`` (SGLang), ``"draft-simple"`` (llama.cpp), ``None`` (vLLM: not exposed)."""
    num_steps: int | None = None
    num_draft_tokens: int | None = None
    """Draft tokens per verify step (vLLM: ``num_speculative_tokens``, from position labels)."""
    topk: int | None = None
    draft_model: str | None = None
    source: str = ""
    """Where this came from, e.g. ``"/server_info"``, ``"/slots"``, ``"/metrics labels"``."""


KEYLESS_NOTE = "auth"
"""The :attr:`ServerInfo.notes` key of a server watched without the API key it wants."""
ROUTER_NOTE = "router"
"""The :attr:`ServerInfo.notes` key of a router's model: which one of its models is watched."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A detected server."""

    base_url: str
    """Scheme, host and port; never carries credentials."""
    dialect: Dialect
    version: str | None = None
    model: str | None = None
    spec: SpecConfig = field(default_factory=lambda: SpecConfig(enabled=None))
    metrics_enabled: bool | None = None
    metrics_reason: str | None = None
    """Why ``/metrics`` is not usable, e.g. ``"SGLang was started without --enable-metrics"``."""
    max_model_len: int | None = None
    launch_args: Mapping[str, Any] | None = None
    """Server arguments where the server exposes them (SGLang ``/server_info``); secrets removed."""
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def keyless(self) -> str:
        """Why the server is watched through its open ``/metrics`` alone: its refusal of this
        client's API key (:data:`KEYLESS_NOTE`); empty when it is not."""
        return self.notes.get(KEYLESS_NOTE, "")

    @property
    def routed(self) -> str:
        """Which of a router's models is watched, and what else it has loaded
        (:data:`ROUTER_NOTE`); empty when the server is not a router."""
        return self.notes.get(ROUTER_NOTE, "")

    @property
    def counters_off(self) -> str:
        """Why the server serves no counters to read (:attr:`metrics_reason`, else a plain
        word); empty unless :attr:`metrics_enabled` is ``False``."""
        if self.metrics_enabled is not False:
            return ""
        return self.metrics_reason or "the server has no /metrics"


@dataclass(frozen=True, slots=True)
class LatencyBucket:
    """The histogram bucket a percentile falls in: ``(low, high]`` seconds, never a point.

    Interpolating inside a bucket invents a value the server never measured (and can contradict
    the mean); the bucket is what the histogram knows.
    """

    q: float
    """The quantile, e.g. ``0.5``."""
    low: float
    """The bucket's lower bound (``0.0`` for the first bucket)."""
    high: float
    """Its upper bound (``inf`` for the overflow bucket)."""

    def __post_init__(self) -> None:
        # JSON has no infinity: a recording or snapshot stores the overflow bucket's top as null
        if self.high is None:
            object.__setattr__(self, "high", math.inf)


LATE_READ = 3.0
"""A ``/metrics`` window longer than this many intervals is a late read."""


@dataclass(frozen=True, slots=True)
class MetricsWindow:
    """One passive reading: counter and histogram deltas between two ``/metrics`` scrapes."""

    t: float
    """Monotonic seconds of the later scrape (the watcher's clock)."""
    dt: float
    """Seconds between the two scrapes (0.0 for the very first scrape)."""
    gen_tok_s: float | None = None
    accept_length: float | None = None
    """Windowed mean tokens per verify step that carried a draft, bonus token included
    (``1 + accepted / drafts``, the servers' own accept length)."""
    draft_acceptance_rate: float | None = None
    """Windowed accepted drafts / proposed drafts (bonus excluded)."""
    per_position_acceptance: tuple[float, ...] | None = None
    spec_drafts: float | None = None
    """Verify steps that carried a draft (Δ``spec_decode_num_drafts``): the denominator of
    ``per_position_acceptance``."""
    spec_accepted_per_pos: tuple[float, ...] | None = None
    """Accepted drafts at each position, position 0 first: the counts behind
    ``per_position_acceptance`` (a bound needs counts, not ratios)."""
    decode_steps: float | None = None
    """Request decode steps, one per request per step, with a draft or not (vLLM: the count of
    the inter-token-latency histogram); ``spec_drafts / decode_steps`` is the draft-hit share."""
    tokens_per_step: float | None = None
    """Windowed tokens per decode step, with a draft or not (``1 + accepted / decode_steps``):
    below ``accept_length`` when some steps drafted nothing (llama.cpp skipping a weak draft,
    vLLM's n-gram finding no match), and what the step latency is paid for. ``None`` where the
    server does not count its steps; :attr:`step_tokens` then falls back on the accept length."""
    step_latency_s: float | None = None
    """Windowed mean verify-step (decode step) latency."""
    step_latency_p50_s: float | None = None
    step_latency_p90_s: float | None = None
    step_latency_p99_s: float | None = None
    cuda_graph_share: float | None = None
    """Share of decode (verify) passes run under CUDA graphs, 0..1: over the window where the
    server counts passes by mode, else whether its last decode batch did (a gauge). A verify
    step outside a graph costs more, so step times with a low share are not the usual ones."""
    itl_s: float | None = None
    """Windowed mean per-token latency as the server reports it."""
    ttft_s: float | None = None
    """Windowed mean time to first token."""
    requests_running: float | None = None
    requests_waiting: float | None = None
    lifetime_accept_length: float | None = None
    """Since server start (for contrast with the window)."""
    lifetime_acceptance_rate: float | None = None
    restarted: bool = False
    """A counter went backwards: the server restarted between the two scrapes."""
    tokens: float | None = None
    """Raw generated-token counter delta over the window."""
    prompt_tok_s: float | None = None
    """Prompt tokens processed per second over the window (every client's)."""
    requests_per_s: float | None = None
    """Requests finished per second over the window."""
    kv_cache_usage: float | None = None
    """KV-cache use, 0..1 (a gauge)."""
    prefix_cache_hit_rate: float | None = None
    """Prefix-cache hits / queries over the window (or the server's own gauge), 0..1."""
    latency_buckets: Mapping[str, tuple[LatencyBucket, ...]] = field(default_factory=dict)
    """The histogram bucket holding p50, p90 and p99 over the window: latencies in seconds
    (``"ttft"``, ``"tpot"``, ``"e2e"``; vLLM also ``"queue"``, ``"prefill"``, ``"decode"``)
    and the request shape in tokens (vLLM: ``"prompt_tokens"``, ``"generation_tokens"``)."""
    preemptions_per_s: float | None = None
    """Requests preempted per second over the window (vLLM: Δ``num_preemptions_total``)."""
    preemptions_total: float | None = None
    """Requests preempted since the server started."""
    finished_by_reason: Mapping[str, float] = field(default_factory=dict)
    """Requests finished since the server started, by finish reason (``stop``, ``length``,
    ``abort``…; vLLM: ``request_success_total{finished_reason}``)."""
    finished_in_window: Mapping[str, float] = field(default_factory=dict)
    """The same, finished over the window (counter deltas; empty on the first scrape)."""
    kv_capacity_tokens: float | None = None
    """Tokens the KV cache holds at most (vLLM: ``cache_config_info`` ``num_gpu_blocks`` ×
    ``block_size``; SGLang: ``num_used_tokens / token_usage``); with ``kv_cache_usage`` the
    tokens held now."""
    latency_cdf: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    """Requests observed over the window at or under each histogram bound, ``(le, count)``
    ascending, ``inf`` last: ``"ttft"`` and ``"tpot"``, what goodput against an SLO reads."""
    largest_context: LatencyBucket | None = None
    """Prompt + generated tokens of the largest request since the server started, as far as
    the metrics tell (``q`` is 1.0): exact when ``low == high`` (llama.cpp's ``n_tokens_max``),
    else bounds (vLLM: the top occupied buckets of the prompt and generation histograms, so
    at most the two upper bounds added, more than either lower bound)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)
    """Why a field is ``None`` (e.g. ``"llama.cpp counters move only when a request finishes"``)."""

    def __post_init__(self) -> None:
        # JSON has no infinity: a recording stores the overflow bound as null
        if self.latency_cdf and any(
            le is None for cdf in self.latency_cdf.values() for le, _ in cdf
        ):
            cdf = {
                k: tuple((math.inf if le is None else le, n) for le, n in v)
                for k, v in self.latency_cdf.items()
            }
            object.__setattr__(self, "latency_cdf", cdf)

    def late_read(self, interval_s: float, since: float = -math.inf) -> bool:
        """Whether this window ran over :data:`LATE_READ` intervals of ``interval_s`` seconds
        while the server was up (since ``since``, its last ready): the monitor read late (short
        of CPU) or the server was slow to answer, but the server did not stop. Its figures are
        means over the whole span."""
        return self.dt > LATE_READ * interval_s and self.t - self.dt >= since

    @property
    def step_tokens(self) -> float | None:
        """Tokens a decode step yields: :attr:`tokens_per_step`, else the accept length (a
        server that does not count its steps drafts in every one: SGLang's EAGLE)."""
        return self.accept_length if self.tokens_per_step is None else self.tokens_per_step


@dataclass(frozen=True, slots=True)
class ChunkArrival:
    """One streamed chunk as the client saw it."""

    t: float
    """Seconds since the request was sent."""
    tokens: int
    """Cumulative completion tokens after this chunk (exact or estimated, see StreamResult)."""


@dataclass(frozen=True, slots=True)
class StreamResult:
    """One streamed generation, measured by the client."""

    completion_tokens: int
    prompt_tokens: int | None
    wall_s: float
    """Request sent to last byte."""
    ttft_s: float | None
    decode_s: float | None
    """First token to last token."""
    tok_s: float | None
    """completion_tokens / wall_s (the story's figure)."""
    decode_tok_s: float | None
    """(completion_tokens - 1) / decode_s: without TTFT."""
    counts_exact: bool
    """False when per-chunk counts are estimated (generic OpenAI: only the final usage)."""
    count_source: str
    """e.g. ``"meta_info.completion_tokens"``, ``"usage (continuous_usage_stats)"``."""
    chunks: tuple[ChunkArrival, ...] = ()
    steps: int | None = None
    """Decode steps observed (a burst of chunks with ~0 spacing is one step)."""
    step_latency_mean_s: float | None = None
    step_latency_p50_s: float | None = None
    step_latency_p90_s: float | None = None
    step_latency_p99_s: float | None = None
    tokens_per_step: float | None = None
    accept_length: float | None = None
    """The server's own per-request figure where reported, else tokens per step."""
    draft_acceptance_rate: float | None = None
    server_stats: Mapping[str, Any] = field(default_factory=dict)
    """The server's per-request numbers as reported (meta_info spec fields, llama.cpp timings)."""
    finish_reason: str | None = None
    error: str | None = None
    """Set when the stream broke; the counts above are what arrived before it did."""
    notes: Mapping[str, str] = field(default_factory=dict)


# --- server versions as numbers that compare ----------------------------------------------------
# SGLang and vLLM report releases ("0.5.23", "0.4.6.post5", "v0.33.0rc1"); llama.cpp its build as
# b<build>-<commit>. A llama.cpp built from a shallow clone reports build 1 ("b1-0c1e570"): that
# number says nothing about its age, so llama.cpp behaviour is decided from what the server
# exposes rather than from its build number.
_LLAMACPP_BUILD = re.compile(r"[bB](\d+)(?![\d.])")
_RELEASE = re.compile(r"\d+(?:\.\d+)*")


def version_tuple(version: str | None) -> tuple[int, ...]:
    """The comparable numbers of a server version; ``()`` when unknown.

    A release gives at least three numbers, padded with zeros (``"0.5"`` -> ``(0, 5, 0)``), with
    pre-, post- and local parts dropped (``"0.4.6.post5"`` -> ``(0, 4, 6)``). A llama.cpp build
    gives its build number alone (``"b6500-0c1e570"`` -> ``(6500,)``); the digits of the commit
    hash are never read as version numbers.
    """
    text = (version or "").strip().lstrip("vV")
    build = _LLAMACPP_BUILD.match(text)
    if build:
        return (int(build.group(1)),)
    release = _RELEASE.match(text)
    if not release:
        return ()
    numbers = tuple(int(part) for part in release.group(0).split("."))
    return numbers + (0,) * (3 - len(numbers))
