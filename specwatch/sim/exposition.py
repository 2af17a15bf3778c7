"""Prometheus exposition of a simulated server's telemetry, with each dialect's names.

Built with ``prometheus_client`` metric families and ``generate_latest`` (no hand formatting).
Which series exist, their labels and their names follow the imitated version of each server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from specwatch.core.server import Dialect
from specwatch.sim.engine import SimRequest
from specwatch.sim.telemetry import Hist, Telemetry


class _Collector:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


def render(
    telemetry: Telemetry,
    running: list[SimRequest],
    waiting: int,
    t: float,
    created_unix: float,
    kv_usage: float,
) -> bytes:
    """The ``/metrics`` body for the dialect and version of ``telemetry.config``."""
    cfg = telemetry.config
    telemetry.set_queue(running, waiting)
    if cfg.dialect is Dialect.SGLANG:
        families = _sglang(telemetry, t, kv_usage)
    elif cfg.dialect is Dialect.VLLM:
        families = _vllm(telemetry, created_unix, kv_usage)
    elif cfg.dialect is Dialect.LLAMACPP:
        families = _llamacpp(telemetry, running, waiting)
    else:
        families = []
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(families))
    return generate_latest(registry)


def _gauge(name: str, doc: str, labels: dict[str, str], value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=list(labels))
    g.add_metric(list(labels.values()), value)
    return g


def _counter(
    name: str,
    doc: str,
    series: Sequence[tuple[dict[str, str], float]],
    created: float | None = None,
) -> CounterMetricFamily:
    labelnames = list(series[0][0]) if series else []
    c = CounterMetricFamily(name, doc, labels=labelnames)
    for labels, value in series:
        c.add_metric([labels[k] for k in labelnames], value, created=created)
    return c


def _hist(
    name: str,
    doc: str,
    series: Sequence[tuple[dict[str, str], Hist]],
    created: float | None = None,
) -> HistogramMetricFamily:
    labelnames = list(series[0][0]) if series else []
    h = HistogramMetricFamily(name, doc, labels=labelnames)
    for labels, hist in series:
        values = [labels[k] for k in labelnames]
        h.add_metric(values, hist.cumulative(), hist.total)
        if created is not None:
            h.samples.append(Sample(name + "_created", dict(labels), created, None, None))
    return h


# --- SGLang --------------------------------------------------------------------------------


def _sglang(tm: Telemetry, t: float, kv_usage: float) -> list[Metric]:
    cfg = tm.config
    sched: dict[str, str] = {"model_name": cfg.model, "engine_type": "unified"}
    if cfg.at_least("0.4.10"):
        sched.update({"tp_rank": "0", "pp_rank": "0"})
    if cfg.at_least("0.5.23"):
        sched["moe_ep_rank"] = "0"
    tok: dict[str, str] = {"model_name": cfg.model}
    if cfg.at_least("0.5.23"):
        tok["engine_type"] = "unified"
    ec = tm.engines[0]
    running = sum(e.running for e in tm.engines)
    waiting = sum(e.waiting for e in tm.engines)
    used = int(kv_usage * 500_000)
    out: list[Metric] = [
        _gauge("sglang:num_running_reqs", "The number of running requests.", sched, running),
        _gauge("sglang:num_used_tokens", "The number of used tokens.", sched, used),
        _gauge("sglang:token_usage", "The token usage.", sched, kv_usage),
        _gauge(
            "sglang:gen_throughput",
            "The generation throughput (token/s).",
            sched,
            tm.gen_throughput_now(t),
        ),
        _gauge("sglang:num_queue_reqs", "The number of requests in the queue.", sched, waiting),
        _gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", sched, 0.0),
        _gauge(
            "sglang:spec_accept_length",
            "The average acceptance length of speculative decoding.",
            sched,
            tm.spec_accept_length,
        ),
    ]  # fmt: skip
    if cfg.at_least("0.5.4"):
        out.append(
            _gauge(
                "sglang:spec_accept_rate",
                "The average acceptance rate of speculative decoding.",
                sched,
                tm.spec_accept_rate,
            )
        )
        out.append(
            _gauge("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.", sched, 1.0)
        )
    if cfg.at_least("0.5.16"):
        steps = cfg.num_steps if cfg.spec_enabled else 0
        drafts = cfg.num_draft_tokens if cfg.spec_enabled else 0
        out.append(_gauge("sglang:spec_num_steps", "Active speculative_num_steps.", sched, steps))
        out.append(
            _gauge("sglang:spec_num_draft_tokens", "Active num_draft_tokens.", sched, drafts)
        )
    if cfg.at_least("0.5.10"):
        out.append(
            _counter(
                "sglang:cuda_graph_passes",
                "Number of forward passes by mode.",
                [
                    ({**sched, "mode": "decode_cuda_graph"}, float(tm.decode_passes)),
                    ({**sched, "mode": "decode_none"}, 0.0),
                    ({**sched, "mode": "prefill_none"}, float(tm.prefill_passes)),
                ],
            )
        )
        out.append(
            _counter(
                "sglang:realtime_tokens",
                "Tokens as they are produced, by mode.",
                [
                    ({**tok, "mode": "prefill_compute"}, float(tm.realtime_prefill)),
                    ({**tok, "mode": "prefill_cache"}, 0.0),
                    ({**tok, "mode": "decode"}, float(tm.realtime_decode)),
                ],
            )
        )
    if cfg.at_least("0.5.23"):
        out.append(
            _counter(
                "sglang:prompt_tokens",
                "Number of prefill tokens processed.",
                [
                    ({**tok, "is_streaming": "true"}, float(tm.sg_prompt_by_stream[True])),
                    ({**tok, "is_streaming": "false"}, float(tm.sg_prompt_by_stream[False])),
                ],
            )
        )
        out.append(
            _counter(
                "sglang:generation_tokens",
                "Number of generation tokens processed.",
                [
                    ({**tok, "is_streaming": "true"}, float(tm.sg_gen_by_stream[True])),
                    ({**tok, "is_streaming": "false"}, float(tm.sg_gen_by_stream[False])),
                ],
            )
        )
    else:
        out.append(
            _counter(
                "sglang:prompt_tokens",
                "Number of prefill tokens processed.",
                [(tok, float(ec.prompt_tokens_finish))],
            )
        )
        out.append(
            _counter(
                "sglang:generation_tokens",
                "Number of generation tokens processed.",
                [(tok, float(ec.generation_tokens_finish))],
            )
        )
    out.append(
        _counter(
            "sglang:num_requests",
            "Number of requests processed.",
            [(tok, float(sum(ec.finished.values())))],
        )
    )
    if cfg.at_least("0.5.16"):
        out.append(
            _counter(
                "sglang:spec_verify_calls",
                "Number of speculative verify calls of finished requests.",
                [(tok, float(ec.verify_calls_finish))],
            )
        )
    out.append(
        _hist(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            [(tok, tm.sg_ttft)],
        )
    )
    out.append(
        _hist(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            [(tok, tm.sg_itl)],
        )
    )
    out.append(
        _hist(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            [(tok, tm.sg_e2e)],
        )
    )
    if cfg.at_least("0.5.4"):
        out.append(
            _hist(
                "sglang:queue_time_seconds",
                "Histogram of queueing time in seconds.",
                [(tok, tm.sg_queue)],
            )
        )
    if cfg.at_least("0.5.23"):
        out.append(
            _hist(
                "sglang:request_time_per_output_token_seconds",
                "Histogram of per-request time per output token in seconds.",
                [(tok, tm.sg_tpot)],
            )
        )
    return out


# --- vLLM ----------------------------------------------------------------------------------


def _vllm(tm: Telemetry, created: float, kv_usage: float) -> list[Metric]:
    cfg = tm.config
    engines = [({"engine": str(i), "model_name": cfg.model}, ec) for i, ec in enumerate(tm.engines)]
    out: list[Metric] = []

    def gauge(name: str, doc: str, values: list[float]) -> None:
        g = GaugeMetricFamily(name, doc, labels=["engine", "model_name"])
        for (labels, _), v in zip(engines, values, strict=True):
            g.add_metric([labels["engine"], labels["model_name"]], v)
        out.append(g)

    def counter(name: str, doc: str, values: list[float]) -> None:
        out.append(
            _counter(
                name,
                doc,
                [(labels, v) for (labels, _), v in zip(engines, values, strict=True)],
                created,
            )
        )

    def hist(name: str, doc: str, pick: str) -> None:
        out.append(
            _hist(name, doc, [(labels, getattr(ec, pick)) for labels, ec in engines], created)
        )

    gauge(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        [float(ec.running) for _, ec in engines],
    )
    gauge(
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        [float(ec.waiting) for _, ec in engines],
    )
    gauge(
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        [kv_usage for _ in engines],
    )
    if not cfg.at_least("0.11.0"):
        gauge(
            "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage."
            " DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
            [kv_usage for _ in engines],
        )
    counter(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        [0.0 for _ in engines],
    )
    counter(
        "vllm:prompt_tokens",
        "Number of prefill tokens processed.",
        [float(ec.prompt_tokens_step) for _, ec in engines],
    )
    counter(
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        [float(ec.generation_tokens_step) for _, ec in engines],
    )
    success = CounterMetricFamily(
        "vllm:request_success",
        "Count of successfully processed requests.",
        labels=["engine", "finished_reason", "model_name"],
    )
    for labels, ec in engines:
        for reason in ("stop", "length", "abort"):
            success.add_metric(
                [labels["engine"], reason, labels["model_name"]],
                float(ec.finished.get(reason, 0)),
                created=created,
            )
    out.append(success)
    if cfg.spec_enabled:
        counter(
            "vllm:spec_decode_num_drafts",
            "Number of spec decoding drafts.",
            [float(ec.num_drafts) for _, ec in engines],
        )
        counter(
            "vllm:spec_decode_num_draft_tokens",
            "Number of draft tokens.",
            [float(ec.draft_tokens) for _, ec in engines],
        )
        counter(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            [float(ec.accepted) for _, ec in engines],
        )
        per_pos = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            labels=["engine", "model_name", "position"],
        )
        for labels, ec in engines:
            for pos in range(cfg.drafts_per_step):
                value = ec.accepted_per_pos[pos] if pos < len(ec.accepted_per_pos) else 0
                per_pos.add_metric(
                    [labels["engine"], labels["model_name"], str(pos)],
                    float(value),
                    created=created,
                )
        out.append(per_pos)
    hist(
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        "vllm_iteration_tokens",
    )
    hist(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        "vllm_ttft",
    )
    if cfg.at_least("0.11.0"):
        hist(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            "vllm_itl",
        )
        hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            "vllm_tpot",
        )
    if not cfg.at_least("0.20.0"):
        hist(
            "vllm:time_per_output_token_seconds",
            "Histogram of time per output token in seconds."
            + (
                " DEPRECATED: Use vllm:inter_token_latency_seconds instead."
                if cfg.at_least("0.11.0")
                else ""
            ),
            "vllm_itl",
        )
    hist(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        "vllm_e2e",
    )
    hist(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        "vllm_queue",
    )
    hist(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        "vllm_prefill",
    )
    hist(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        "vllm_decode",
    )
    hist(
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        "vllm_inference",
    )
    hist(
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        "vllm_req_prompt",
    )
    hist(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        "vllm_req_gen",
    )
    return out


# --- llama.cpp -----------------------------------------------------------------------------


def _llamacpp(tm: Telemetry, running: list[SimRequest], waiting: int) -> list[Metric]:
    cfg = tm.config
    prompt_rate, predicted_rate, busy = tm.llamacpp_bucket()
    out: list[Metric] = [
        _counter("llamacpp:prompt_tokens", "Number of prompt tokens processed.",
                 [({}, float(tm.ll_prompt_tokens))]),
        _counter("llamacpp:prompt_seconds", "Prompt process time",
                 [({}, tm.ll_prompt_s)]),
        _counter("llamacpp:tokens_predicted", "Number of generation tokens processed.",
                 [({}, float(tm.ll_predicted))]),
        _counter("llamacpp:tokens_predicted_seconds", "Predict process time",
                 [({}, tm.ll_predicted_s)]),
        _counter("llamacpp:n_decode", "Total number of llama_decode() calls",
                 [({}, float(tm.ll_n_decode))]),
    ]  # fmt: skip
    if cfg.llamacpp_new:
        out.append(
            _counter(
                "llamacpp:prompt_tokens_cached",
                "Number of prompt tokens reused from the cache.",
                [({}, 0.0)],
            )
        )
        out.append(
            _counter(
                "llamacpp:spec_decode_num_draft_tokens",
                "Number of draft tokens.",
                [({}, float(tm.ll_draft_tokens))],
            )
        )
        out.append(
            _counter(
                "llamacpp:spec_decode_num_accepted_tokens",
                "Number of accepted draft tokens.",
                [({}, float(tm.ll_accepted))],
            )
        )
        out.append(
            _counter(
                "llamacpp:spec_decode_num_drafts",
                "Number of speculative verification steps.",
                [({}, float(tm.ll_drafts))],
            )
        )
        if tm.ll_per_pos is not None:
            out.append(
                _counter(
                    "llamacpp:spec_decode_num_accepted_tokens_per_pos",
                    "Accepted draft tokens per position.",
                    [({"position": str(i)}, float(v)) for i, v in enumerate(tm.ll_per_pos)],
                )
            )
    out += [
        _gauge("llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.", {},
               prompt_rate),
        _gauge("llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s.",
               {}, predicted_rate),
        _gauge("llamacpp:requests_processing", "Number of requests processing.", {},
               float(len(running))),
        _gauge("llamacpp:requests_deferred", "Number of requests deferred.", {}, float(waiting)),
        _gauge("llamacpp:n_busy_slots_per_decode", "Average number of busy slots per decode.",
               {}, busy),
    ]  # fmt: skip
    return out
