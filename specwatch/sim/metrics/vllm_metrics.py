"""What the simulated vLLM server counts, and its ``/metrics`` names per version.

vLLM counts tokens every engine step, one series per data-parallel ``engine`` label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.metrics.telemetry import Family, Hist, Telemetry, since, until, write
from specwatch.sim.truth import StepRecord

ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
REQUEST_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


@dataclass(slots=True)
class EngineCounters:
    """Counters of one data-parallel engine."""

    prompt_tokens_step: int = 0
    generation_tokens_step: int = 0
    num_drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    preemptions: int = 0
    positions: int = 0
    """Draft positions the per-position counter shows (drafts per step)."""
    finished: dict[str, int] = field(default_factory=dict)
    vllm_ttft: Hist = field(default_factory=lambda: Hist(TTFT_BUCKETS))
    vllm_itl: Hist = field(default_factory=lambda: Hist(ITL_BUCKETS))
    vllm_tpot: Hist = field(default_factory=lambda: Hist(ITL_BUCKETS))
    vllm_e2e: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    vllm_queue: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    vllm_prefill: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    vllm_decode: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    vllm_inference: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    vllm_iteration_tokens: Hist = field(default_factory=lambda: Hist(TOKEN_BUCKETS))
    vllm_req_prompt: Hist = field(default_factory=lambda: Hist(TOKEN_BUCKETS))
    vllm_req_gen: Hist = field(default_factory=lambda: Hist(TOKEN_BUCKETS))

    @property
    def finished_by_reason(self) -> dict[str, int]:
        """Finished requests per reason, every reason vLLM counts."""
        return {reason: self.finished.get(reason, 0) for reason in ("stop", "length", "abort")}

    @property
    def accepted_by_position(self) -> dict[str, int]:
        """Accepted drafts per draft position."""
        per_pos = self.accepted_per_pos
        return {str(i): per_pos[i] if i < len(per_pos) else 0 for i in range(self.positions)}


def _spec(config: SimConfig) -> bool:
    return config.spec_enabled


def _deprecated_tpot(config: SimConfig) -> bool:
    return config.at_least("0.11.0") and not config.at_least("0.20.0")


FAMILIES = (
    Family("gauge", "vllm:num_requests_running", "Number of requests in model execution batches.",
           "running"),
    Family("gauge", "vllm:num_requests_waiting", "Number of requests waiting to be processed.",
           "waiting"),
    Family("gauge", "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
           "kv_usage"),
    Family("gauge", "vllm:gpu_cache_usage_perc",
           "GPU KV-cache usage. 1 means 100 percent usage."
           " DEPRECATED: Use vllm:kv_cache_usage_perc instead.", "kv_usage", when=until("0.11.0")),
    Family("counter", "vllm:num_preemptions", "Cumulative number of preemption from the engine.",
           "preemptions"),
    Family("counter", "vllm:prompt_tokens", "Number of prefill tokens processed.",
           "prompt_tokens_step"),
    Family("counter", "vllm:generation_tokens", "Number of generation tokens processed.",
           "generation_tokens_step"),
    Family("counter", "vllm:request_success", "Count of successfully processed requests.",
           "finished_by_reason", by="finished_reason"),
    Family("counter", "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
           "num_drafts", when=_spec),
    Family("counter", "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
           "draft_tokens", when=_spec),
    Family("counter", "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
           "accepted", when=_spec),
    Family("counter", "vllm:spec_decode_num_accepted_tokens_per_pos",
           "Accepted tokens per draft position.", "accepted_by_position", by="position",
           when=_spec),
    Family("histogram", "vllm:iteration_tokens_total",
           "Histogram of number of tokens per engine_step.", "vllm_iteration_tokens"),
    Family("histogram", "vllm:time_to_first_token_seconds",
           "Histogram of time to first token in seconds.", "vllm_ttft"),
    Family("histogram", "vllm:inter_token_latency_seconds",
           "Histogram of inter-token latency in seconds.", "vllm_itl", when=since("0.11.0")),
    Family("histogram", "vllm:request_time_per_output_token_seconds",
           "Histogram of time_per_output_token_seconds per request.", "vllm_tpot",
           when=since("0.11.0")),
    Family("histogram", "vllm:time_per_output_token_seconds",
           "Histogram of time per output token in seconds.", "vllm_itl", when=until("0.11.0")),
    Family("histogram", "vllm:time_per_output_token_seconds",
           "Histogram of time per output token in seconds."
           " DEPRECATED: Use vllm:inter_token_latency_seconds instead.", "vllm_itl",
           when=_deprecated_tpot),
    Family("histogram", "vllm:e2e_request_latency_seconds",
           "Histogram of e2e request latency in seconds.", "vllm_e2e"),
    Family("histogram", "vllm:request_queue_time_seconds",
           "Histogram of time spent in WAITING phase for request.", "vllm_queue"),
    Family("histogram", "vllm:request_prefill_time_seconds",
           "Histogram of time spent in PREFILL phase for request.", "vllm_prefill"),
    Family("histogram", "vllm:request_decode_time_seconds",
           "Histogram of time spent in DECODE phase for request.", "vllm_decode"),
    Family("histogram", "vllm:request_inference_time_seconds",
           "Histogram of time spent in RUNNING phase for request.", "vllm_inference"),
    Family("histogram", "vllm:request_prompt_tokens", "Number of prefill tokens processed.",
           "vllm_req_prompt"),
    Family("histogram", "vllm:request_generation_tokens", "Number of generation tokens processed.",
           "vllm_req_gen"),
)  # fmt: skip
"""vLLM's series, in its order, one series per ``engine``."""


class VllmTelemetry(Telemetry):
    """vLLM's per-engine counters of one server lifetime."""

    def __init__(self, config: SimConfig, start_t: float) -> None:
        super().__init__(config, start_t)
        k = config.max_accepted
        self.engines = [
            EngineCounters(accepted_per_pos=[0] * k, positions=config.drafts_per_step)
            for _ in range(max(1, config.dp_engines))
        ]

    def _engine(self, req: SimRequest) -> EngineCounters:
        return self.engines[req.engine_index % len(self.engines)]

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """First token: prompt tokens, TTFT, queue and prefill time."""
        ec = self._engine(req)
        ec.prompt_tokens_step += req.prompt_tokens
        admit = req.t_admit if req.t_admit is not None else req.t_arrival
        ec.vllm_ttft.observe(t - req.t_arrival)
        ec.vllm_queue.observe(admit - req.t_arrival)
        ec.vllm_prefill.observe(t - admit)
        ec.generation_tokens_step += 1

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """Tokens, drafts and inter-token latency of every step."""
        for req, n, acc, proposed in decoded:
            ec = self._engine(req)
            ec.generation_tokens_step += n
            if proposed > 0:
                ec.num_drafts += 1
                ec.draft_tokens += proposed
                ec.accepted += acc
                for i in range(acc):
                    ec.accepted_per_pos[i] += 1
            ec.vllm_itl.observe(req.step_latencies[-1])
        if step.tokens:
            self.engines[0].vllm_iteration_tokens.observe(step.tokens)

    def on_finish(self, req: SimRequest, t: float) -> None:
        """Request-end histograms and the finish reason."""
        if req.probe:
            return
        ec = self._engine(req)
        reason = req.finish_reason or "length"
        ec.finished[reason] = ec.finished.get(reason, 0) + 1
        first = req.t_first if req.t_first is not None else t
        admit = req.t_admit if req.t_admit is not None else req.t_arrival
        decode_s = t - first
        ec.vllm_e2e.observe(t - req.t_arrival)
        ec.vllm_decode.observe(decode_s)
        ec.vllm_inference.observe(t - admit)
        ec.vllm_req_prompt.observe(req.prompt_tokens)
        ec.vllm_req_gen.observe(req.generated)
        if req.generated > 1:
            ec.vllm_tpot.observe(decode_s / (req.generated - 1))

    def families(
        self, running: list[SimRequest], waiting: int, t: float, created_unix: float, kv: float
    ) -> list[Metric]:
        """vLLM's series for the imitated version."""
        for ec in self.engines:
            ec.running = 0
            ec.waiting = 0
            ec.kv_usage = kv
        for req in running:
            self._engine(req).running += 1
        self.engines[0].waiting = waiting
        model = self.config.model
        engines = [
            ({"engine": str(i), "model_name": model}, ec) for i, ec in enumerate(self.engines)
        ]
        return [*write(FAMILIES, self.config, engines, created_unix), self._cache_config()]

    def _cache_config(self) -> Metric:
        """``cache_config_info``: the cache settings vLLM shows as labels of one gauge."""
        cfg = self.config
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=("block_size", "cache_dtype", "enable_prefix_caching", "engine",
                    "gpu_memory_utilization", "num_gpu_blocks"),
        )  # fmt: skip
        blocks = cfg.kv_capacity_tokens // max(1, cfg.kv_block_size) // max(1, cfg.dp_engines)
        for i in range(max(1, cfg.dp_engines)):
            info.add_metric(
                (str(cfg.kv_block_size), "auto", str(cfg.prefix_caching), str(i), "0.9",
                 str(blocks)),
                1.0,
            )  # fmt: skip
        return info
