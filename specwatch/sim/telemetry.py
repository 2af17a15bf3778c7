"""What a simulated server counts, updated with each server's own timing.

One :class:`Telemetry` holds every counter any dialect exposes; each dialect's exposition picks
its names. The update *timing* follows the real servers: vLLM counts tokens every step, SGLang's
``generation_tokens_total`` and llama.cpp's counters move only when a request finishes, SGLang's
gauges every ``decode_log_interval`` decode iterations.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.truth import StepRecord

SGLANG_ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
)  # fmt: skip
SGLANG_TTFT_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0,
)  # fmt: skip
SGLANG_E2E_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0, 800.0,
)  # fmt: skip
VLLM_ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
VLLM_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
VLLM_REQUEST_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
VLLM_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


@dataclass(slots=True)
class Hist:
    """A cumulative histogram the way prometheus_client keeps one."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    """Per bucket (not cumulative); the last one is ``+Inf``."""
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, times: int = 1, sum_value: float | None = None) -> None:
        """Record ``value`` ``times`` times; ``sum_value`` (default value × times) goes to _sum."""
        if times <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.n += times
        self.total += value * times if sum_value is None else sum_value

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs ending with ``+Inf``."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else _le(bound), float(running)))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))


@dataclass(slots=True)
class EngineCounters:
    """Counters attributable to one (vLLM data-parallel) engine."""

    # per step (vLLM)
    prompt_tokens_step: int = 0
    generation_tokens_step: int = 0
    num_drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    running: int = 0
    waiting: int = 0
    # at finish
    finished: dict[str, int] = field(default_factory=dict)
    prompt_tokens_finish: int = 0
    generation_tokens_finish: int = 0
    verify_calls_finish: int = 0
    # histograms, vLLM semantics
    vllm_ttft: Hist = field(default_factory=lambda: Hist(VLLM_TTFT_BUCKETS))
    vllm_itl: Hist = field(default_factory=lambda: Hist(VLLM_ITL_BUCKETS))
    vllm_tpot: Hist = field(default_factory=lambda: Hist(VLLM_ITL_BUCKETS))
    vllm_e2e: Hist = field(default_factory=lambda: Hist(VLLM_REQUEST_BUCKETS))
    vllm_queue: Hist = field(default_factory=lambda: Hist(VLLM_REQUEST_BUCKETS))
    vllm_prefill: Hist = field(default_factory=lambda: Hist(VLLM_REQUEST_BUCKETS))
    vllm_decode: Hist = field(default_factory=lambda: Hist(VLLM_REQUEST_BUCKETS))
    vllm_inference: Hist = field(default_factory=lambda: Hist(VLLM_REQUEST_BUCKETS))
    vllm_iteration_tokens: Hist = field(default_factory=lambda: Hist(VLLM_TOKEN_BUCKETS))
    vllm_req_prompt: Hist = field(default_factory=lambda: Hist(VLLM_TOKEN_BUCKETS))
    vllm_req_gen: Hist = field(default_factory=lambda: Hist(VLLM_TOKEN_BUCKETS))


class Telemetry:
    """All counters of one server lifetime (a restart makes a new one)."""

    def __init__(self, config: SimConfig, start_t: float) -> None:
        self.config = config
        self.start_t = start_t
        k = config.max_accepted
        self.engines = [
            EngineCounters(accepted_per_pos=[0] * k) for _ in range(max(1, config.dp_engines))
        ]
        # SGLang scheduler side
        self.decode_iterations = 0
        self.decode_passes = 0
        self.prefill_passes = 0
        self.realtime_decode = 0
        self.realtime_prefill = 0
        self._tick_tokens = 0
        self._tick_forward = 0
        self._tick_correct = 0
        self._tick_t = start_t
        self.last_tick_t: float | None = None
        self.gen_throughput = 0.0
        self.spec_accept_length = 0.0
        self.spec_accept_rate = 0.0
        self.lifetime_accept_tokens = 0
        self.lifetime_forward_ct = 0
        self.is_cuda_graph = 1.0
        # SGLang tokenizer side
        self.sg_ttft = Hist(SGLANG_TTFT_BUCKETS)
        self.sg_itl = Hist(SGLANG_ITL_BUCKETS)
        self.sg_e2e = Hist(SGLANG_E2E_BUCKETS)
        self.sg_queue = Hist(SGLANG_E2E_BUCKETS)
        self.sg_tpot = Hist(SGLANG_ITL_BUCKETS)
        self.sg_gen_by_stream: dict[bool, int] = {True: 0, False: 0}
        self.sg_prompt_by_stream: dict[bool, int] = {True: 0, False: 0}
        # llama.cpp (counters move at prompt end / request end)
        self.ll_prompt_tokens = 0
        self.ll_prompt_s = 0.0
        self.ll_predicted = 0
        self.ll_predicted_s = 0.0
        self.ll_n_decode = 0
        self.ll_draft_tokens = 0
        self.ll_accepted = 0
        self.ll_drafts = 0
        self.ll_per_pos: list[int] | None = None
        self._bucket_prompt_tokens = 0
        self._bucket_prompt_s = 0.0
        self._bucket_gen_tokens = 0
        self._bucket_gen_s = 0.0
        self._bucket_busy = 0
        self._bucket_decodes = 0

    # --- engine listener -----------------------------------------------------------------

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """First token: TTFT, prompt counters (vLLM per step, llama.cpp at prompt end)."""
        ec = self.engines[req.engine_index % len(self.engines)]
        ec.prompt_tokens_step += req.prompt_tokens
        ttft = t - req.t_arrival
        admit = req.t_admit if req.t_admit is not None else req.t_arrival
        ec.vllm_ttft.observe(ttft)
        ec.vllm_queue.observe(admit - req.t_arrival)
        ec.vllm_prefill.observe(t - admit)
        if not req.probe:  # SGLang's health probe runs with log_metrics=False
            self.sg_ttft.observe(ttft)
            self.sg_queue.observe(admit - req.t_arrival)
        self.realtime_prefill += req.prompt_tokens
        self.ll_prompt_tokens += req.prompt_tokens
        self.ll_prompt_s += req.prefill_s
        self._bucket_prompt_tokens += req.prompt_tokens
        self._bucket_prompt_s += req.prefill_s
        ec.generation_tokens_step += 1

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """Per-step counters and SGLang's decode log tick."""
        self.ll_n_decode += 1
        self._bucket_decodes += 1
        self._bucket_busy += step.decode_requests + step.prefill_requests
        if step.prefill_requests:
            self.prefill_passes += 1
        if step.decode_requests:
            self.decode_passes += 1
        for req, n, acc, proposed in decoded:
            ec = self.engines[req.engine_index % len(self.engines)]
            ec.generation_tokens_step += n
            if proposed > 0:
                ec.num_drafts += 1
                ec.draft_tokens += proposed
                ec.accepted += acc
                for i in range(acc):
                    ec.accepted_per_pos[i] += 1
            itl = req.step_latencies[-1]
            ec.vllm_itl.observe(itl)
            # SGLang's tokenizer manager: interval / new tokens, recorded once per token.
            self.sg_itl.observe(itl / n, times=n, sum_value=itl)
            self.realtime_decode += n
        if step.tokens:
            self.engines[0].vllm_iteration_tokens.observe(step.tokens)
        if step.decode_requests:
            self.decode_iterations += 1
            self._tick_tokens += step.decode_tokens
            self._tick_forward += step.decode_requests
            self._tick_correct += step.accepted_drafts
            if self.decode_iterations % max(1, self.config.decode_log_interval) == 0:
                self._decode_log_tick(t)

    def _decode_log_tick(self, t: float) -> None:
        cfg = self.config
        elapsed = t - self._tick_t
        self.gen_throughput = self._tick_tokens / elapsed if elapsed > 0 else 0.0
        fwd = self._tick_forward
        if cfg.spec_enabled and fwd:
            accepted_incl_bonus = self._tick_tokens
            self.spec_accept_length = accepted_incl_bonus / fwd
            self.spec_accept_rate = sglang_accept_rate(
                cfg, accepted_incl_bonus, fwd, self._tick_correct
            )
            self.lifetime_accept_tokens += accepted_incl_bonus
            self.lifetime_forward_ct += fwd
        self.last_tick_t = t
        self._tick_t = t
        self._tick_tokens = self._tick_forward = self._tick_correct = 0

    def on_finish(self, req: SimRequest, t: float) -> None:
        """Request-end counters (SGLang tokenizer, vLLM request histograms, llama.cpp all)."""
        if req.probe:
            return
        ec = self.engines[req.engine_index % len(self.engines)]
        ec.finished[req.finish_reason or "length"] = (
            ec.finished.get(req.finish_reason or "length", 0) + 1
        )
        ec.prompt_tokens_finish += req.prompt_tokens
        ec.generation_tokens_finish += req.generated
        ec.verify_calls_finish += req.steps
        self.sg_gen_by_stream[req.streaming] += req.generated
        self.sg_prompt_by_stream[req.streaming] += req.prompt_tokens
        e2e = t - req.t_arrival
        first = req.t_first if req.t_first is not None else t
        admit = req.t_admit if req.t_admit is not None else req.t_arrival
        decode_s = t - first
        ec.vllm_e2e.observe(e2e)
        ec.vllm_decode.observe(decode_s)
        ec.vllm_inference.observe(t - admit)
        ec.vllm_req_prompt.observe(req.prompt_tokens)
        ec.vllm_req_gen.observe(req.generated)
        if req.generated > 1:
            ec.vllm_tpot.observe(decode_s / (req.generated - 1))
            self.sg_tpot.observe(decode_s / (req.generated - 1))
        self.sg_e2e.observe(e2e)
        # llama.cpp: everything generation-related is flushed when the slot resets.
        self.ll_predicted += req.generated
        self.ll_predicted_s += decode_s
        self._bucket_gen_tokens += max(0, req.generated - 1)
        self._bucket_gen_s += decode_s
        if req.proposed > 0:
            self.ll_draft_tokens += req.proposed
            self.ll_accepted += req.accepted
            self.ll_drafts += req.drafted_steps
            if self.ll_per_pos is None:
                self.ll_per_pos = [0] * len(req.accepted_per_pos)
            for i, c in enumerate(req.accepted_per_pos):
                self.ll_per_pos[i] += c

    def set_queue(self, running: list[SimRequest], waiting: int) -> None:
        """Refresh the scheduler gauges (called before each exposition)."""
        for ec in self.engines:
            ec.running = 0
            ec.waiting = 0
        for req in running:
            self.engines[req.engine_index % len(self.engines)].running += 1
        self.engines[0].waiting = waiting

    def llamacpp_bucket(self) -> tuple[float, float, float]:
        """llama.cpp's windowed gauges (prompt tok/s, predicted tok/s, busy slots per decode),
        resetting the window as every ``/metrics`` call does."""
        prompt = (
            self._bucket_prompt_tokens / self._bucket_prompt_s if self._bucket_prompt_s else 0.0
        )
        predicted = self._bucket_gen_tokens / self._bucket_gen_s if self._bucket_gen_s else 0.0
        busy = self._bucket_busy / self._bucket_decodes if self._bucket_decodes else 0.0
        self._bucket_prompt_tokens = self._bucket_gen_tokens = 0
        self._bucket_prompt_s = self._bucket_gen_s = 0.0
        self._bucket_busy = self._bucket_decodes = 0
        return prompt, predicted, busy

    def gen_throughput_now(self, t: float) -> float:
        """The gauge as exposed; 0.5.23 decays it to 0 when stale for over 30 s."""
        if (
            self.config.dialect is Dialect.SGLANG
            and self.config.at_least("0.5.23")
            and (self.last_tick_t is None or t - self.last_tick_t > 30.0)
        ):
            return 0.0
        return self.gen_throughput

    @property
    def avg_spec_accept_length(self) -> float | None:
        """SGLang's lifetime ``internal_states[].avg_spec_accept_length`` (None before a tick)."""
        if not self.config.spec_enabled or not self.lifetime_forward_ct:
            return None
        return self.lifetime_accept_tokens / self.lifetime_forward_ct


def sglang_accept_rate(cfg: SimConfig, incl_bonus: int, forward_ct: int, correct: int) -> float:
    """``sglang:spec_accept_rate`` with the formula of the imitated version (§1.5)."""
    if forward_ct <= 0:
        return 0.0
    if cfg.at_least("0.5.23"):
        return correct / (forward_ct * max(1, cfg.num_draft_tokens - 1))
    if cfg.at_least("0.5.16"):
        return (incl_bonus - forward_ct) / (forward_ct * max(1, cfg.num_draft_tokens - 1))
    if cfg.at_least("0.5.10"):
        return incl_bonus / (forward_ct * max(1, cfg.num_draft_tokens))
    return (incl_bonus / forward_ct) / (cfg.num_steps + 1)
