"""What the simulated SGLang server counts, and its ``/metrics`` names per version.

SGLang's scheduler gauges move every ``decode_log_interval`` decode iterations; its tokenizer
manager's counters and histograms move when a request finishes.
"""

from __future__ import annotations

from prometheus_client.core import Metric

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.metrics.sglang_ranks import scheduler_families
from specwatch.sim.metrics.telemetry import Family, Hist, Telemetry, since, until, write
from specwatch.sim.truth import StepRecord

ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
)  # fmt: skip
TTFT_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0, 800.0,
)  # fmt: skip

FAMILIES = (
    # realtime_tokens: in the 0.5.9 wheel already (not 0.5.3); spec_verify_calls: in 0.5.15.post1
    Family("counter", "sglang:realtime_tokens", "Tokens as they are produced, by mode.",
           "realtime_by_mode", by="mode", when=since("0.5.9")),
    Family("counter", "sglang:prompt_tokens", "Number of prefill tokens processed.",
           "sg_prompt_by_stream", by="is_streaming", when=since("0.5.23")),
    Family("counter", "sglang:prompt_tokens", "Number of prefill tokens processed.",
           "prompt_tokens_finish", when=until("0.5.23")),
    Family("counter", "sglang:generation_tokens", "Number of generation tokens processed.",
           "sg_gen_by_stream", by="is_streaming", when=since("0.5.23")),
    Family("counter", "sglang:generation_tokens", "Number of generation tokens processed.",
           "generation_tokens_finish", when=until("0.5.23")),
    Family("counter", "sglang:num_requests", "Number of requests processed.", "finished"),
    Family("counter", "sglang:spec_verify_calls",
           "Number of speculative verify calls of finished requests.", "verify_calls_finish",
           when=since("0.5.15")),
    Family("histogram", "sglang:time_to_first_token_seconds",
           "Histogram of time to first token in seconds.", "sg_ttft"),
    Family("histogram", "sglang:inter_token_latency_seconds",
           "Histogram of inter-token latency in seconds.", "sg_itl"),
    Family("histogram", "sglang:e2e_request_latency_seconds",
           "Histogram of End-to-end request latency in seconds", "sg_e2e"),
    Family("histogram", "sglang:queue_time_seconds", "Histogram of queueing time in seconds.",
           "sg_queue", when=since("0.5.4")),
    Family("histogram", "sglang:request_time_per_output_token_seconds",
           "Histogram of per-request time per output token in seconds.", "sg_tpot",
           when=since("0.5.23")),
)  # fmt: skip
"""The tokenizer manager's series, in SGLang's order (the scheduler's: ``sglang_ranks``)."""


class SglangTelemetry(Telemetry):
    """SGLang's scheduler gauges and tokenizer-manager counters of one server lifetime."""

    def __init__(self, config: SimConfig, start_t: float) -> None:
        super().__init__(config, start_t)
        # scheduler side
        self.decode_iterations = 0
        ranks = max(1, config.dp_engines)
        # one scheduler per data-parallel rank, each stepping in every engine step it has work
        self.decode_passes = [0] * ranks
        self.decode_passes_no_graph = [0] * ranks
        self.last_batch_in_graph = [True] * ranks
        # num_running_reqs as the scheduler last wrote it: after a prefill, the batch the new
        # requests had not joined yet; on each decode log tick, the batch then
        self.running_written = [0] * ranks
        self.prefill_passes = [0] * ranks
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
        # tokenizer side: one tokenizer manager sees the requests of every rank
        self.finished = 0
        self.prompt_tokens_finish = 0
        self.generation_tokens_finish = 0
        self.verify_calls_finish = 0
        self.sg_ttft = Hist(TTFT_BUCKETS)
        self.sg_itl = Hist(ITL_BUCKETS)
        self.sg_e2e = Hist(E2E_BUCKETS)
        self.sg_queue = Hist(E2E_BUCKETS)
        self.sg_tpot = Hist(ITL_BUCKETS)
        self.sg_gen_by_stream = {"true": 0, "false": 0}
        self.sg_prompt_by_stream = {"true": 0, "false": 0}

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """First token: TTFT and queue time (not for the health probe), realtime tokens."""
        if not req.probe:  # SGLang's health probe runs with log_metrics=False
            admit = req.t_admit if req.t_admit is not None else req.t_arrival
            self.sg_ttft.observe(t - req.t_arrival)
            self.sg_queue.observe(admit - req.t_arrival)
        self.realtime_prefill += req.prompt_tokens

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """Forward passes, inter-token latency, and the decode log tick."""
        if step.prefill_requests:
            self.prefill_passes[0] += 1
        in_graph = self.config.cuda_graph_at(step.decode_requests)
        for rank in {self.rank_of(req) for req, _, _, _ in decoded}:
            self.decode_passes[rank] += 1
            self.decode_passes_no_graph[rank] += 0 if in_graph else 1
            self.last_batch_in_graph[rank] = in_graph
        for req, n, _, _ in decoded:
            itl = req.step_latencies[-1]
            # The tokenizer manager: interval / new tokens, recorded once per token.
            self.sg_itl.observe(itl / n, times=n, sum_value=itl)
            self.realtime_decode += n
        decoding = [0] * len(self.decode_passes)
        for req, _, _, _ in decoded:
            decoding[self.rank_of(req)] += 1
        if step.prefill_requests:
            self.running_written = decoding
        if step.decode_requests:
            self.decode_iterations += 1
            self._tick_tokens += step.decode_tokens
            self._tick_forward += step.decode_requests
            self._tick_correct += step.accepted_drafts
            if self.decode_iterations % max(1, self.config.decode_log_interval) == 0:
                self.running_written = decoding
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
        """Request-end counters and histograms (not for the health probe)."""
        if req.probe:
            return
        self.finished += 1
        self.prompt_tokens_finish += req.prompt_tokens
        self.generation_tokens_finish += req.generated
        self.verify_calls_finish += req.steps
        streaming = "true" if req.streaming else "false"
        self.sg_gen_by_stream[streaming] += req.generated
        self.sg_prompt_by_stream[streaming] += req.prompt_tokens
        first = req.t_first if req.t_first is not None else t
        if req.generated > 1:
            self.sg_tpot.observe((t - first) / (req.generated - 1))
        self.sg_e2e.observe(t - req.t_arrival)

    def rank_of(self, req: SimRequest) -> int:
        """The data-parallel rank (scheduler) a request runs on."""
        return req.engine_index % len(self.decode_passes)

    def gen_throughput_now(self, t: float) -> float:
        """The gauge as exposed; 0.5.23 decays it to 0 when stale for over 30 s."""
        if self.config.at_least("0.5.23") and (
            self.last_tick_t is None or t - self.last_tick_t > 30.0
        ):
            return 0.0
        return self.gen_throughput

    @property
    def avg_spec_accept_length(self) -> float | None:
        """The lifetime ``internal_states[].avg_spec_accept_length`` (None before a tick)."""
        if not self.config.spec_enabled or not self.lifetime_forward_ct:
            return None
        return self.lifetime_accept_tokens / self.lifetime_forward_ct

    def families(
        self, running: list[SimRequest], waiting: int, t: float, created_unix: float, kv: float
    ) -> list[Metric]:
        """SGLang's series for the imitated version."""
        tok: dict[str, str] = {"model_name": self.config.model}
        if self.config.at_least("0.5.23"):
            tok["engine_type"] = "unified"
        out = scheduler_families(self, running, waiting, t, kv)
        return out + write(FAMILIES, self.config, [(tok, self)])

    @property
    def realtime_by_mode(self) -> dict[str, int]:
        """``sglang:realtime_tokens`` per mode (no prefix cache: nothing from the cache)."""
        return {
            "prefill_compute": self.realtime_prefill,
            "prefill_cache": 0,
            "decode": self.realtime_decode,
        }


def sglang_accept_rate(cfg: SimConfig, incl_bonus: int, forward_ct: int, correct: int) -> float:
    """``sglang:spec_accept_rate`` with the formula of the imitated version (§1.5)."""
    if forward_ct <= 0:
        return 0.0
    if cfg.at_least("0.5.23"):
        return correct / (forward_ct * max(1, cfg.num_draft_tokens - 1))
    if cfg.at_least("0.5.15"):  # drafts only in the 0.5.15.post1 wheel already
        return (incl_bonus - forward_ct) / (forward_ct * max(1, cfg.num_draft_tokens - 1))
    if cfg.at_least("0.5.9"):  # the 0.5.9 wheel's formula already
        return incl_bonus / (forward_ct * max(1, cfg.num_draft_tokens))
    return (incl_bonus / forward_ct) / (cfg.num_steps + 1)
