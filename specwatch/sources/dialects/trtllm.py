"""TensorRT-LLM's ``trtllm-serve``: ``trtllm_*`` series on ``/prometheus/metrics`` only.

Its ``/metrics`` is a JSON list of iteration stats drained on read (another consumer, a
dashboard, Dynamo, then never sees them), so this dialect never asks it; detection names the
dialect from ``/v1/models`` ``owned_by: "tensorrt_llm"`` before any metrics read. The Prometheus
text is mounted only with ``return_perf_metrics: true``; iteration series (requests running,
KV cache, ``spec_decode_num_*``) also need ``enable_iter_perf_stats: true``.

Names are those of ``tensorrt_llm/metrics/collector.py`` (``MetricsCollector``); the
speculative setup is ``speculative_config_info``, as ``_log_config_info_metrics`` of
``tensorrt_llm/serve/openai_server.py`` writes it from ``llm_args.py``'s ``decoding_type``,
``max_draft_len`` and ``speculative_model``. Request counters move when a request finishes
(``log_request_metrics_dict``), as llama.cpp's do: accept length, per-position acceptance and
the verify step are figures of the requests that ended in the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.core.values import as_int
from specwatch.sources.dialects.base import (
    ServerDialect,
    WindowBuilder,
    delta,
    hist_delta,
    plus_one,
    ratio,
    set_load,
)
from specwatch.sources.dialects.openai import ContinuousUsageStreams
from specwatch.sources.identity.server_queries import scrape_metrics, str_or_none, try_json

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape

PROMETHEUS_PATH = "/prometheus/metrics"
PREFIX = "trtllm_"
REASON_METRICS = (
    "trtllm-serve mounts /prometheus/metrics only with return_perf_metrics: true "
    "(in --extra_llm_api_options)"
)
REASON_ITERATION = (
    "no iteration series (requests running, KV cache, spec_decode_num_*): "
    "start trtllm-serve with enable_iter_perf_stats: true"
)
REASON_PER_POSITION = (
    "no per-position counters (spec_decode_drafted_tokens_total{token_position}): this "
    "TensorRT-LLM predates NVIDIA/TensorRT-LLM#12636"
)
END_ONLY = "TensorRT-LLM counts a request only when it finishes"
REQUEST_END = "request_end"
"""The note naming the figures of requests that ended in the window (as llama.cpp's)."""
MAX_FINISH_REASONS = 8
MAX_LABEL = 200
"""Longest ``speculative_config_info`` label value kept (a draft model path)."""

# collector.py: counters per position (request end) and per iteration (enable_iter_perf_stats)
_DRAFTED_POS = "spec_decode_drafted_tokens_total"
_ACCEPTED_POS = "spec_decode_accepted_tokens_total"
_ITER_DRAFT = "spec_decode_num_draft_tokens"
_ITER_ACCEPTED = "spec_decode_num_accepted_tokens"
_LATENCY = {
    "ttft": "time_to_first_token_seconds",
    "tpot": "time_per_output_token_seconds",
    "e2e": "e2e_request_latency_seconds",
    "queue": "request_queue_time_seconds",
    "prefill": "request_prefill_time_seconds",
    "decode": "request_decode_time_seconds",
}
_AT_REQUEST_END = (
    "tokens",
    "gen_tok_s",
    "accept_length",
    "draft_acceptance_rate",
    "per_position_acceptance",
    "step_latency_s",
    "decode_steps",
)


def prefix_in(scrape: Scrape) -> str:
    """``trtllm_``, or ``""`` for the unprefixed names of the 1.1 era."""
    return PREFIX if scrape.has_prefix(PREFIX) else ""


def _position_key(p: str) -> int:
    return int(p) if p.isdigit() else 1 << 30


def is_counter(scrape: Scrape, name: str) -> bool | None:
    """Whether ``name`` (without ``_total``) is typed a counter (``None``: absent). Before
    NVIDIA/TensorRT-LLM#12545 the two ``spec_decode_num_*`` series were gauges of one
    iteration: their deltas mean nothing."""
    kind = scrape.types.get(name) or scrape.types.get(name + "_total")
    if kind is None:
        return None if not (scrape.has(name) or scrape.has(name + "_total")) else False
    return kind == "counter"


def trtllm_spec(scrape: Scrape) -> SpecConfig:
    """The speculative setup from ``speculative_config_info`` (absent when speculation is
    off), else from which speculative series exist."""
    p = prefix_in(scrape)
    found = scrape.select(p + "speculative_config_info")
    if found:
        labels = found[0].labels
        draft = labels.get("spec_draft_model")
        return SpecConfig(
            enabled=labels.get("spec_enabled", "true").lower() == "true",
            algorithm=str_or_none(sanitize_line(labels.get("spec_method", ""), MAX_LABEL)),
            num_draft_tokens=as_int(labels.get("spec_num_tokens"), digits=True),
            draft_model=sanitize_line(draft, MAX_LABEL) if draft else None,
            source=f"{PROMETHEUS_PATH}: {p}speculative_config_info",
        )
    positions = scrape.by_label(p + _DRAFTED_POS, "token_position")
    if positions or scrape.has(p + _ITER_DRAFT + "_total") or scrape.has(p + _ITER_DRAFT):
        return SpecConfig(
            enabled=True,
            num_draft_tokens=len(positions) or None,
            source=f"{PROMETHEUS_PATH}: {p}spec_decode_* series",
        )
    if scrape.has(p + "model_config_info"):
        # a version that writes its config info writes speculative_config_info when on
        return SpecConfig(
            enabled=False, source=f"{PROMETHEUS_PATH}: {p}model_config_info, no speculative one"
        )
    return SpecConfig(enabled=None, source="")


def derive_trtllm(
    b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    """TensorRT-LLM's window: gauges of the last drained iteration, and figures of the
    requests that finished in the window from the request counters."""
    p = prefix_in(cur)
    running = p + "num_requests_running"
    if cur.has(running):
        # multiprocess mode writes a gauge per pid: the processes' requests add up
        b.set("requests_running", cur.total(running), f"{running} (summed over pid)")
        waiting = p + "num_requests_waiting"
        b.set("requests_waiting", cur.total(waiting), f"{waiting} (summed over pid)")
        kv = p + "kv_cache_utilization"
        b.set("kv_cache_usage", cur.mean(kv), f"{kv} (last drained iteration)")
    else:
        b.notes["iteration"] = REASON_ITERATION
    finished = {
        sanitize_line(reason, 32): n
        for reason, n in sorted(
            cur.by_label(p + "request_success_total", "finished_reason").items()
        )[:MAX_FINISH_REASONS]
        if math.isfinite(n)
    }
    if finished:
        b.values["finished_by_reason"] = finished
        b.sources["finished_by_reason"] = f"{p}request_success_total by finished_reason"
    if prev is None:
        return
    ended = delta(cur, prev, p + "e2e_request_latency_seconds_count") or 0.0
    gen = p + "generation_tokens_total"
    tokens = delta(cur, prev, gen)
    if tokens is not None and (tokens > 0 or not _busy(cur, prev, running)):
        where = "requests that finished in the window"
        b.set("tokens", tokens, f"Δ{gen} ({where})")
        b.set("gen_tok_s", ratio(tokens, dt), f"Δ{gen} / Δt ({where})")
    else:
        b.note("gen_tok_s", f"{END_ONLY}; none finished in this window")
        b.note("tokens", f"{END_ONLY}; none finished in this window")
    steps = _spec_window(b, cur, prev, p, info)
    _verify_step(b, cur, prev, p, steps, ended)
    hist = hist_delta(cur, prev, p + _LATENCY["ttft"])
    if hist is not None and hist.count > 0:
        b.set("ttft_s", hist.mean, f"Δ{p}time_to_first_token_seconds _sum/_count")
    set_load(b, cur, prev, dt, p, {k: p + v for k, v in _LATENCY.items()})
    held = [n for n in _AT_REQUEST_END if n in b.values]
    if held and ended > 0:
        b.notes[REQUEST_END] = (
            f"{', '.join(held)}: of the requests that ended in the window, over their whole run "
            "(TensorRT-LLM counts them only when a request ends)"
        )


def _busy(cur: Scrape, prev: Scrape, running: str) -> bool:
    return max(cur.total(running) or 0.0, prev.total(running) or 0.0) > 0


def _spec_window(
    b: WindowBuilder, cur: Scrape, prev: Scrape, p: str, info: ServerInfo
) -> float | None:
    """Accept length and rates from the per-position counters; returns the verify steps of
    the finished requests (``Δdrafted{token_position="0"}``), ``None`` without them."""
    drafted_now = cur.by_label(p + _DRAFTED_POS, "token_position")
    if not drafted_now:
        _iteration_rate(b, cur, prev, p, info)
        return None
    drafted_before = prev.by_label(p + _DRAFTED_POS, "token_position")
    accepted_now = cur.by_label(p + _ACCEPTED_POS, "token_position")
    accepted_before = prev.by_label(p + _ACCEPTED_POS, "token_position")
    positions = sorted(drafted_now, key=_position_key)
    drafted = [drafted_now[k] - drafted_before.get(k, 0.0) for k in positions]
    accepted = [accepted_now.get(k, 0.0) - accepted_before.get(k, 0.0) for k in positions]
    steps = drafted[0] if positions and positions[0] == "0" else 0.0
    if steps <= 0:
        b.note("accept_length", f"{END_ONLY}; no speculative request finished")
        b.note("draft_acceptance_rate", f"{END_ONLY}; no speculative request finished")
        return 0.0
    pos = f'{p}{_DRAFTED_POS}{{token_position="0"}}'
    b.set(
        "accept_length",
        plus_one(ratio(sum(accepted), steps)),
        f"1 + ΣΔ{p}{_ACCEPTED_POS} / Δ{pos}",
    )
    b.set(
        "draft_acceptance_rate",
        ratio(sum(accepted), sum(drafted)),
        f"ΣΔ{p}{_ACCEPTED_POS} / ΣΔ{p}{_DRAFTED_POS}",
    )
    b.set("spec_drafts", steps, f"Δ{pos}")
    b.set("spec_accepted_per_pos", tuple(accepted), f"Δ{p}{_ACCEPTED_POS}{{token_position}}")
    b.set(
        "per_position_acceptance",
        tuple(a / steps for a in accepted),
        f"Δ{p}{_ACCEPTED_POS}{{token_position}} / Δ{pos}",
    )
    return steps


def _iteration_rate(b: WindowBuilder, cur: Scrape, prev: Scrape, p: str, info: ServerInfo) -> None:
    """Without per-position counters: the draft acceptance rate from the iteration
    counters where they are counters, and the one line saying what is missing."""
    kinds = (is_counter(cur, p + _ITER_DRAFT), is_counter(cur, p + _ITER_ACCEPTED))
    if kinds == (None, None):
        if info.spec.enabled is False:
            why = "speculative decoding is off (no speculative_config_info)"
        elif cur.has(p + "num_requests_running"):
            why = "this TensorRT-LLM writes no speculative series (before #12545)"
        else:
            why = REASON_ITERATION
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
        return
    b.notes["per_position"] = REASON_PER_POSITION
    if kinds != (True, True):
        why = (
            f"{p}{_ITER_DRAFT} and {p}{_ITER_ACCEPTED} are gauges of one iteration on this "
            "version (before NVIDIA/TensorRT-LLM#12545): no window figure from them"
        )
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
        return
    draft, acc = p + _ITER_DRAFT + "_total", p + _ITER_ACCEPTED + "_total"
    rate = ratio(delta(cur, prev, acc), delta(cur, prev, draft))
    b.set("draft_acceptance_rate", rate, f"Δ{acc} / Δ{draft} (iterations drained)")
    b.note("accept_length", REASON_PER_POSITION)


def _verify_step(
    b: WindowBuilder, cur: Scrape, prev: Scrape, p: str, steps: float | None, ended: float
) -> None:
    """The verify step: the finished requests' decode time over their decode steps."""
    decode = hist_delta(cur, prev, p + _LATENCY["decode"])
    if decode is None or decode.count <= 0:
        b.note("step_latency_s", f"{END_ONLY}; none finished in this window")
        return
    name = p + _LATENCY["decode"]
    if steps is not None and steps > 0:
        pos = f'{p}{_DRAFTED_POS}{{token_position="0"}}'
        b.set("step_latency_s", decode.sum / steps, f"Δ{name}_sum / Δ{pos}")
        b.set("decode_steps", steps, f"Δ{pos} (verify steps of finished requests)")
        return
    if steps is None:
        gen = delta(cur, prev, p + "generation_tokens_total")
        if gen is not None and gen - ended > 0:
            # without drafts each token after the first is one decode step
            b.set(
                "step_latency_s",
                decode.sum / (gen - ended),
                f"Δ{name}_sum / (Δ{p}generation_tokens_total − Δ{p}e2e…_count)",
            )
            b.set("decode_steps", gen - ended, "tokens after each finished request's first")
            return
    b.note("step_latency_s", "no decode steps counted in this window")


class TrtllmDialect(ContinuousUsageStreams, ServerDialect):
    """TensorRT-LLM (``trtllm-serve``)."""

    dialect = Dialect.TRTLLM
    owned_by: ClassVar[tuple[str, ...]] = ("tensorrt_llm",)
    fingerprint_order = 25
    """Before vLLM, whose ``/version`` answers the way TensorRT-LLM's does."""
    metrics_path = PROMETHEUS_PATH
    metrics_off_statuses: ClassVar[tuple[int, ...]] = (404,)
    metrics_off_text = REASON_METRICS
    metrics_prefix = PREFIX
    wanted_families: ClassVar[tuple[str, ...]] = tuple(
        p + name
        for p in (PREFIX, "")  # unprefixed: the 1.1 era
        for name in (
            "num_requests_running",
            "num_requests_waiting",
            "kv_cache_utilization",
            "request_success",
            "generation_tokens",
            "prompt_tokens",
            "spec_decode_",
            "speculative_config_info",
            "model_config_info",
            *_LATENCY.values(),
        )
    )

    async def recognize(self, client: ServerClient) -> bool:
        """``trtllm_*`` series at ``/prometheus/metrics`` (behind a proxy naming another
        owner); ``/metrics`` is never asked."""
        status, scrape, _ = await scrape_metrics(client, PROMETHEUS_PATH)
        return status == 200 and scrape is not None and scrape.has_prefix(PREFIX)

    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Version from ``/version``, setup from ``speculative_config_info``."""
        body = await try_json(client, "/version")
        version = (
            str(body["version"])
            if isinstance(body, Mapping) and body.get("version") is not None
            else None
        )
        enabled, reason, scrape = await self.metrics_state(client, False)
        notes: dict[str, str] = {}
        if scrape is not None:
            spec = trtllm_spec(scrape)
            if not scrape.has(prefix_in(scrape) + "num_requests_running"):
                notes["iteration"] = REASON_ITERATION
        else:
            spec = SpecConfig(enabled=None, source="")
            notes["speculative"] = (
                "unknown: TensorRT-LLM shows its speculative config only on /prometheus/metrics"
            )
        return ServerInfo(
            base_url=client.endpoint.base_url,
            dialect=Dialect.TRTLLM,
            version=version,
            model=model,
            spec=spec,
            metrics_enabled=enabled,
            metrics_reason=reason,
            max_model_len=max_len,
            notes=notes,
        )

    def scrape_notes(self, scrape: Scrape) -> dict[str, str]:
        """A page without TensorRT-LLM's series says so."""
        if scrape.has_prefix(PREFIX) or scrape.has("generation_tokens_total"):
            return {}
        return {"metrics": f"{PROMETHEUS_PATH} has no trtllm_* series"}

    derive_window = staticmethod(derive_trtllm)

    def no_spec_stats(self, notes: dict[str, str]) -> None:
        """Streams carry no speculative stats."""
        notes.setdefault(
            "draft_acceptance_rate", "TensorRT-LLM streams carry no per-request speculative stats"
        )

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """``1 + ΣΔaccepted{token_position} / Δdrafted{token_position="0"}``."""
        for p in (PREFIX, ""):
            steps = deltas.get(f'{p}{_DRAFTED_POS}{{token_position="0"}}')
            accepted = deltas.get(p + _ACCEPTED_POS)
            if steps and accepted is not None:
                return 1.0 + accepted / steps
        return None


DIALECT = TrtllmDialect()

__all__ = [
    "DIALECT",
    "PROMETHEUS_PATH",
    "REASON_METRICS",
    "TrtllmDialect",
    "derive_trtllm",
    "is_counter",
    "prefix_in",
    "trtllm_spec",
]
