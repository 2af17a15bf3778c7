"""What the simulated TensorRT-LLM server counts, and its Prometheus names per version.

It follows ``tensorrt_llm/metrics/collector.py`` (``MetricsCollector``) and the iteration-stats
loop of ``tensorrt_llm/serve/openai_server.py``: request counters and histograms move when a
request finishes (``log_request_metrics_dict``); iteration stats queue up in the engine and are
drained, all at once, when a request finishes (``_iteration_stats_collector_loop`` wakes on
request completion), into the gauges and the ``spec_decode_num_*`` counters
(``log_iteration_stats``) and into the tee buffer the JSON ``/metrics`` hands out and clears.
Gauges carry a ``pid`` label (``prometheus_client`` multiprocess mode).

Version shapes the twin stands in for (cut points are the twin's, named after the pull
requests, not verified release numbers): ``< 1.2`` unprefixed names, no speculative series,
labels ``"undefined"``; ``1.2`` the ``trtllm_`` prefix and the two speculative series as gauges
of one iteration (before NVIDIA/TensorRT-LLM#12545); ``>= 1.3`` counters, per-position counters
(#12636), ``speculative_config_info`` and real ``model_name`` / ``engine_type`` labels.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import Metric

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.metrics.telemetry import Family, Hist, Telemetry, gauge, write
from specwatch.sim.metrics.vllm_metrics import ITL_BUCKETS, REQUEST_BUCKETS, TTFT_BUCKETS
from specwatch.sim.truth import StepRecord

PREFIXED = "1.2.0"
"""From this version the names carry ``trtllm_`` and the speculative series exist."""
SPEC_COUNTERS = "1.3.0"
"""From this version the speculative series are counters, with per-position counters."""
BUFFER_MAX = 1000
"""Iteration stats the tee buffer keeps (``iter_stats_max_iterations``)."""
BASE_PID = 4242
"""The ``pid`` label of the first serving process."""


def prefix_of(config: SimConfig) -> str:
    """``trtllm_`` or, on older versions, nothing."""
    return "trtllm_" if config.at_least(PREFIXED) else ""


@dataclass(slots=True)
class _Counters:
    """What one server lifetime has logged to Prometheus."""

    prompt: int = 0
    generation: int = 0
    finished: dict[str, int] = field(default_factory=dict)
    drafted_pos: dict[str, int] = field(default_factory=dict)
    accepted_pos: dict[str, int] = field(default_factory=dict)
    draft_tokens: int = 0
    accepted_tokens: int = 0
    completed: int = 0
    ttft: Hist = field(default_factory=lambda: Hist(TTFT_BUCKETS))
    tpot: Hist = field(default_factory=lambda: Hist(ITL_BUCKETS))
    e2e: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    queue: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    prefill: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))
    decode: Hist = field(default_factory=lambda: Hist(REQUEST_BUCKETS))


def _counters(config: SimConfig) -> bool:
    # a labelled Counter no request touched writes no sample
    return config.spec_enabled and config.at_least(SPEC_COUNTERS)


def _families(p: str) -> tuple[Family, ...]:
    return (
        Family("counter", p + "request_success", "Count of successfully processed requests.",
               "finished", by="finished_reason"),
        Family("histogram", p + "e2e_request_latency_seconds",
               "Histogram of end to end request latency in seconds.", "e2e"),
        Family("histogram", p + "time_to_first_token_seconds",
               "Histogram of time to first token in seconds.", "ttft"),
        Family("histogram", p + "time_per_output_token_seconds",
               "Histogram of time per output token in seconds.", "tpot"),
        Family("histogram", p + "request_queue_time_seconds",
               "Histogram of time spent in WAITING phase for request.", "queue"),
        Family("histogram", p + "request_prefill_time_seconds",
               "Histogram of prefill (context) phase duration in seconds.", "prefill"),
        Family("histogram", p + "request_decode_time_seconds",
               "Histogram of decode (generation) phase duration in seconds.", "decode"),
        Family("counter", p + "prompt_tokens", "Cumulative number of prompt tokens processed.",
               "prompt"),
        Family("counter", p + "generation_tokens",
               "Cumulative number of generation (output) tokens produced.", "generation"),
        Family("counter", p + "num_requests_completed",
               "Total number of completed requests across iterations", "completed"),
        Family("counter", p + "spec_decode_num_draft_tokens",
               "Total number of draft tokens in speculative decoding", "draft_tokens",
               when=_counters),
        Family("counter", p + "spec_decode_num_accepted_tokens",
               "Total number of accepted tokens in speculative decoding", "accepted_tokens",
               when=_counters),
        Family("counter", p + "spec_decode_drafted_tokens",
               "Total drafted tokens per speculative decoding position.", "drafted_pos",
               by="token_position", when=_counters),
        Family("counter", p + "spec_decode_accepted_tokens",
               "Total accepted tokens per speculative decoding position.", "accepted_pos",
               by="token_position", when=_counters),
    )  # fmt: skip


class TrtllmTelemetry(Telemetry):
    """TensorRT-LLM's collector over one server lifetime, and its iteration-stats queue."""

    def __init__(self, config: SimConfig, start_t: float) -> None:
        super().__init__(config, start_t)
        self.c = _Counters()
        self.pending: deque[dict[str, Any]] = deque()
        """Iteration stats the engine made that nobody drained yet."""
        self.buffer: deque[dict[str, Any]] = deque(maxlen=BUFFER_MAX)
        """The tee buffer the JSON ``/metrics`` serves and clears."""
        self.last: dict[str, Any] = {
            "iterLatencyMS": 0.0,
            "numActiveRequests": 0,
            "numQueuedRequests": 0,
            "_running_by_pid": {BASE_PID: 0},
        }
        """The last drained iteration (what the gauges show): the collector drains the
        executor's start-up stats at once, so the gauges are there before any request."""
        self.iterations = 0
        self.waiting_seen = 0
        self.running_by_pid: dict[int, int] = {}

    @property
    def collecting(self) -> bool:
        """Whether the Prometheus collector loop runs (``return_perf_metrics``)."""
        return self.config.metrics_enabled

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """Nothing is logged before a request ends."""

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """One iteration's stats, queued in the engine."""
        self.iterations += 1
        drafted = sum(p for _, _, _, p in decoded)
        accepted = sum(a for _, _, a, _ in decoded)
        with_drafts = sum(1 for *_, p in decoded if p > 0)
        stat: dict[str, Any] = {
            "iter": self.iterations,
            "iterLatencyMS": step.latency_s * 1000.0,
            "numActiveRequests": step.decode_requests + step.prefill_requests,
            "numQueuedRequests": self.waiting_seen,
            "numCompletedRequests": 0,
        }
        pids: dict[int, int] = {}
        for req, *_ in decoded:
            pid = self._pid(req)
            pids[pid] = pids.get(pid, 0) + 1
        stat["_running_by_pid"] = pids
        if self.config.spec_enabled:
            stat["specDecodingStats"] = {
                "numDraftTokens": drafted,
                "numAcceptedTokens": accepted,
                "acceptanceLength": 1.0 + accepted / with_drafts if with_drafts else 0.0,
                "numRequestsWithDraftTokens": with_drafts,
            }
        self.pending.append(stat)

    def _pid(self, req: SimRequest) -> int:
        return BASE_PID + req.engine_index % max(1, self.config.dp_engines)

    def on_finish(self, req: SimRequest, t: float) -> None:
        """The request's metrics, then the collector loop wakes and drains the queue."""
        if self.pending:
            self.pending[-1]["numCompletedRequests"] += 1
        if not req.probe and self.collecting:
            self._log_request(req, t)
        if self.collecting:
            self.drain()

    def _log_request(self, req: SimRequest, t: float) -> None:
        c = self.c
        reason = req.finish_reason or "length"
        c.finished[reason] = c.finished.get(reason, 0) + 1
        first = req.t_first if req.t_first is not None else t
        admit = req.t_admit if req.t_admit is not None else req.t_arrival
        c.e2e.observe(t - req.t_arrival)
        c.ttft.observe(first - req.t_arrival)
        c.queue.observe(admit - req.t_arrival)
        c.prefill.observe(first - admit)
        c.decode.observe(t - first)
        if req.generated > 1:
            c.tpot.observe((t - first) / (req.generated - 1))
        c.prompt += req.prompt_tokens
        c.generation += req.generated
        drafted = [0] * max((p for _, p in req.per_step), default=0)
        accepted = [0] * len(drafted)
        for acc, proposed in req.per_step:
            for i in range(proposed):
                drafted[i] += 1
            for i in range(acc):
                accepted[i] += 1
        for i, n in enumerate(drafted):
            key = str(i)
            c.drafted_pos[key] = c.drafted_pos.get(key, 0) + n
            if accepted[i] > 0 or key in c.accepted_pos:
                c.accepted_pos[key] = c.accepted_pos.get(key, 0) + accepted[i]

    def drain(self) -> list[dict[str, Any]]:
        """Every queued iteration logged to Prometheus and teed into the buffer."""
        out = list(self.pending)
        self.pending.clear()
        for stat in out:
            spec = stat.get("specDecodingStats")
            if spec is not None:
                self.c.draft_tokens += spec["numDraftTokens"]
                self.c.accepted_tokens += spec["numAcceptedTokens"]
            self.c.completed += stat["numCompletedRequests"]
            public = {k: v for k, v in stat.items() if not k.startswith("_")}
            self.buffer.append(public)
            self.last = stat
        return out

    def take_json(self) -> list[dict[str, Any]]:
        """The JSON ``/metrics`` answer: the tee buffer, cleared (the engine queue itself
        when no collector loop runs)."""
        if not self.collecting:
            got = self.drain()
            self.buffer.clear()
            return [{k: v for k, v in s.items() if not k.startswith("_")} for s in got]
        out = list(self.buffer)
        self.buffer.clear()
        return out

    def families(
        self, running: list[SimRequest], waiting: int, t: float, created_unix: float, kv: float
    ) -> list[Metric]:
        """The ``/prometheus/metrics`` families of the imitated version."""
        cfg = self.config
        self.waiting_seen = waiting
        p = prefix_of(cfg)
        new = cfg.at_least(SPEC_COUNTERS)
        labels = (
            {"model_name": cfg.model, "engine_type": "pytorch"}
            if new
            else {"model_name": "undefined", "engine_type": "undefined"}
        )
        out = write(_families(p), cfg, [(labels, self.c)], created_unix)
        last = self.last
        if self.collecting:
            pids: dict[int, int] = last.get("_running_by_pid") or {BASE_PID: 0}
            out.append(
                gauge(
                    p + "num_requests_running",
                    "Number of active requests",
                    [({**labels, "pid": str(pid)}, float(n)) for pid, n in sorted(pids.items())],
                )
            )
            one = {**labels, "pid": str(BASE_PID)}
            out.append(
                gauge(
                    p + "num_requests_waiting",
                    "Number of queued requests",
                    [(one, float(last["numQueuedRequests"]))],
                )
            )
            out.append(
                gauge(
                    p + "iteration_latency_seconds",
                    "Iteration latency in seconds",
                    [(one, last["iterLatencyMS"] / 1000.0)],
                )
            )
            out.append(gauge(p + "kv_cache_utilization", "KV cache utilization", [(one, kv)]))
            spec = last.get("specDecodingStats")
            if spec is not None and cfg.at_least(PREFIXED):
                out.append(
                    gauge(
                        p + "spec_decode_acceptance_length",
                        "Acceptance length in speculative decoding",
                        [(one, spec["acceptanceLength"])],
                    )
                )
                if not new:  # before #12545 the two series were gauges of one iteration
                    out.append(
                        gauge(
                            p + "spec_decode_num_draft_tokens",
                            "Number of draft tokens in speculative decoding",
                            [(one, float(spec["numDraftTokens"]))],
                        )
                    )
                    out.append(
                        gauge(
                            p + "spec_decode_num_accepted_tokens",
                            "Number of accepted tokens in speculative decoding",
                            [(one, float(spec["numAcceptedTokens"]))],
                        )
                    )
        if new:
            model = {**labels, "model": cfg.model, "served_model_name": cfg.model}
            out.append(gauge(p + "model_config_info", "Model configuration info", [(model, 1.0)]))
        if new and cfg.spec_enabled:
            info = {
                **labels,
                "spec_enabled": "true",
                "spec_method": trtllm_method(cfg.spec_algorithm),
                "spec_num_tokens": str(cfg.drafts_per_step),
            }
            if trtllm_method(cfg.spec_algorithm) not in ("MTP", "NGram"):
                info["spec_draft_model"] = "sim/draft"
            out.append(
                gauge(p + "speculative_config_info", "Speculative decoding configuration info",
                      [(info, 1.0)])
            )  # fmt: skip
        return out


_METHODS = {"eagle3": "Eagle3", "eagle": "Eagle", "mtp": "MTP", "ngram": "NGram"}


def trtllm_method(algorithm: str | None) -> str:
    """TensorRT-LLM's ``decoding_type`` for a simulated algorithm (``DraftTarget`` else)."""
    return _METHODS.get((algorithm or "").lower(), "DraftTarget")


__all__ = ["PREFIXED", "SPEC_COUNTERS", "TrtllmTelemetry", "prefix_of", "trtllm_method"]
