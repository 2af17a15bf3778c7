"""What the simulated llama.cpp server counts, and its ``/metrics`` names per build.

llama-server moves its prompt counters when a prompt is processed and everything else when a
request ends (the slot resets); its throughput gauges cover the window since the previous
``/metrics`` call.
"""

from __future__ import annotations

from prometheus_client.core import Metric

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.metrics.telemetry import Family, Telemetry, write
from specwatch.sim.truth import StepRecord


def _new(config: SimConfig) -> bool:
    return config.llamacpp_new


FAMILIES = (
    Family("counter", "llamacpp:prompt_tokens", "Number of prompt tokens processed.",
           "ll_prompt_tokens"),
    Family("counter", "llamacpp:prompt_seconds", "Prompt process time", "ll_prompt_s"),
    Family("counter", "llamacpp:tokens_predicted", "Number of generation tokens processed.",
           "ll_predicted"),
    Family("counter", "llamacpp:tokens_predicted_seconds", "Predict process time",
           "ll_predicted_s"),
    Family("counter", "llamacpp:n_decode", "Total number of llama_decode() calls", "ll_n_decode"),
    Family("counter", "llamacpp:prompt_tokens_cached",
           "Number of prompt tokens reused from the cache.", "ll_prompt_cached", when=_new),
    Family("counter", "llamacpp:spec_decode_num_draft_tokens", "Number of draft tokens.",
           "ll_draft_tokens", when=_new),
    Family("counter", "llamacpp:spec_decode_num_accepted_tokens",
           "Number of accepted draft tokens.", "ll_accepted", when=_new),
    Family("counter", "llamacpp:spec_decode_num_drafts",
           "Number of speculative verification steps.", "ll_drafts", when=_new),
    Family("counter", "llamacpp:spec_decode_num_accepted_tokens_per_pos",
           "Accepted draft tokens per position.", "ll_by_position", by="position", when=_new),
    Family("gauge", "llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
           "prompt_rate"),
    Family("gauge", "llamacpp:predicted_tokens_seconds",
           "Average generation throughput in tokens/s.", "predicted_rate"),
    Family("gauge", "llamacpp:requests_processing", "Number of requests processing.", "processing"),
    Family("gauge", "llamacpp:requests_deferred", "Number of requests deferred.", "deferred"),
    Family("gauge", "llamacpp:n_busy_slots_per_decode", "Average number of busy slots per decode.",
           "busy_per_decode"),
    # llama-server types it a counter, yet names its sample without ``_total``.
    Family("gauge", "llamacpp:n_tokens_max", "Largest observed n_tokens.", "ll_tokens_max"),
)  # fmt: skip
"""llama-server's series, in its order; the ``spec_decode_*`` ones from build 6500."""


class LlamaCppTelemetry(Telemetry):
    """llama-server's counters of one server lifetime."""

    def __init__(self, config: SimConfig, start_t: float) -> None:
        super().__init__(config, start_t)
        self.ll_prompt_tokens = 0
        self.ll_prompt_s = 0.0
        self.ll_predicted = 0
        self.ll_predicted_s = 0.0
        self.ll_n_decode = 0
        self.ll_draft_tokens = 0
        self.ll_accepted = 0
        self.ll_drafts = 0
        self.ll_per_pos: list[int] | None = None
        self.ll_prompt_cached = 0
        # as the last /metrics call showed them
        self.prompt_rate = self.predicted_rate = self.busy_per_decode = 0.0
        self.processing = self.deferred = 0
        self.ll_tokens_max = 0
        self._bucket_prompt_tokens = 0
        self._bucket_prompt_s = 0.0
        self._bucket_gen_tokens = 0
        self._bucket_gen_s = 0.0
        self._bucket_busy = 0
        self._bucket_decodes = 0

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """Prompt counters move when the prompt is processed."""
        self.ll_prompt_tokens += req.prompt_tokens
        self.ll_prompt_s += req.prefill_s
        self._bucket_prompt_tokens += req.prompt_tokens
        self._bucket_prompt_s += req.prefill_s

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """One ``llama_decode()`` call per step."""
        self.ll_n_decode += 1
        self._bucket_decodes += 1
        self._bucket_busy += step.decode_requests + step.prefill_requests

    def on_finish(self, req: SimRequest, t: float) -> None:
        """Everything generation-related is flushed when the slot resets."""
        if req.probe:
            return
        first = req.t_first if req.t_first is not None else t
        decode_s = t - first
        self.ll_predicted += req.generated
        self.ll_predicted_s += decode_s
        self.ll_tokens_max = max(self.ll_tokens_max, req.prompt_tokens + req.generated)
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

    def take_window(self) -> tuple[float, float, float]:
        """The windowed gauges (prompt tok/s, predicted tok/s, busy slots per decode),
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

    @property
    def ll_by_position(self) -> dict[str, int] | None:
        """Accepted drafts per position, absent until a speculative request finished."""
        if self.ll_per_pos is None:
            return None
        return {str(i): v for i, v in enumerate(self.ll_per_pos)}

    def families(
        self, running: list[SimRequest], waiting: int, t: float, created_unix: float, kv: float
    ) -> list[Metric]:
        """llama-server's series for the imitated build (the windowed gauges reset)."""
        self.prompt_rate, self.predicted_rate, self.busy_per_decode = self.take_window()
        self.processing, self.deferred = len(running), waiting
        return write(FAMILIES, self.config, [({}, self)])
