"""vLLM: speculative setup only from ``vllm:spec_decode_*`` metrics, OpenAI streams with usage.

vLLM has no config endpoint; ``/version`` gives the version. Streams use ``/v1/completions``
with ``stream_options.continuous_usage_stats``: a cumulative ``usage.completion_tokens`` in
every chunk. ``inter_token_latency_seconds`` was ``time_per_output_token_seconds`` up to 0.11.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.sources.dialects.base import (
    ServerDialect,
    WindowBuilder,
    accept_length_from,
    delta,
    hist_delta,
    ratio,
    set_largest_context,
    set_latency_quantiles,
    set_load,
    set_tokens_per_step,
    spec_lifetime,
    spec_names,
    spec_window,
)
from specwatch.sources.dialects.openai import ContinuousUsageStreams
from specwatch.sources.identity.server_queries import (
    redact_launch_args,
    scrape_metrics,
    try_json,
)
from specwatch.sources.metrics.prom import count, ratio_mean

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape

MAX_FINISH_REASONS = 8
"""Finish reasons kept from one scrape (vLLM has four: stop, length, abort, error)."""
REASON_METRICS = "vLLM was started with --disable-log-stats (/metrics has no vllm:* series)"

_V = "vllm:"


MAX_ENGINES = 64
"""``cache_config_info`` series read (one per data-parallel engine)."""
MAX_INFO_LABELS = 64
"""Labels kept from ``vllm:cache_config_info`` (vLLM 0.33 has about 20)."""


def vllm_cache_config(scrape: Scrape) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info``: vLLM's cache settings (block size, KV dtype,
    memory share, prefix caching), the one part of its configuration that ``/metrics`` shows."""
    found = scrape.select(_V + "cache_config_info")
    if not found:
        return {}
    labels = sorted(found[0].labels.items())[:MAX_INFO_LABELS]
    return {k: v for k, v in labels if k != "engine"}


KV_CAPACITY_SOURCE = f"{_V}cache_config_info num_gpu_blocks × block_size (summed over engines)"


def vllm_kv_capacity(scrape: Scrape) -> float | None:
    """KV-cache tokens over every engine: ``num_gpu_blocks × block_size`` of each engine's
    ``cache_config_info`` (``None`` where a label is missing or not a number)."""
    total = 0.0
    for series in scrape.select(_V + "cache_config_info")[:MAX_ENGINES]:
        blocks = _label_count(series.labels.get("num_gpu_blocks"))
        size = _label_count(series.labels.get("block_size"))
        if not blocks or not size:
            return None
        total += blocks * size
    return total or None


def _label_count(text: str | None) -> int | None:
    # a label is text of any length: only a short run of digits is a count
    return int(text) if text and text.isascii() and text.isdigit() and len(text) <= 12 else None


def vllm_spec_from_metrics(scrape: Scrape) -> SpecConfig:
    """vLLM's speculative setup as the metrics give it away (no config endpoint exists)."""
    if not scrape.has_prefix("vllm:spec_decode_"):
        return SpecConfig(enabled=False, source="/metrics: no vllm:spec_decode_* series")
    positions = scrape.by_label("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position")
    return SpecConfig(
        enabled=True,
        num_draft_tokens=len(positions) or None,
        source="/metrics: vllm:spec_decode_* series"
        + (" and position labels" if positions else ""),
    )


_LATENCY = {
    "ttft": _V + "time_to_first_token_seconds",
    "tpot": _V + "request_time_per_output_token_seconds",
    "e2e": _V + "e2e_request_latency_seconds",
    # Where a finished request spent its time (vLLM 0.7+), and its shape in tokens.
    "queue": _V + "request_queue_time_seconds",
    "prefill": _V + "request_prefill_time_seconds",
    "decode": _V + "request_decode_time_seconds",
    "prompt_tokens": _V + "request_prompt_tokens",
    "generation_tokens": _V + "request_generation_tokens",
}


def derive_vllm(
    b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    """vLLM's window: generation tokens, spec_decode counters, the ITL histogram per step."""
    # the aggregation rule: engines (data-parallel) add up their requests; KV usage is a ratio
    b.set("requests_running", count(cur, _V + "num_requests_running"), _V + "num_requests_running")
    b.set("requests_waiting", count(cur, _V + "num_requests_waiting"), _V + "num_requests_waiting")
    for kv in ("kv_cache_usage_perc", "gpu_cache_usage_perc"):  # the second before 0.10
        if cur.has(_V + kv):
            b.set("kv_cache_usage", ratio_mean(cur, _V + kv), f"{_V}{kv} (mean of engines)")
            break
    spec = spec_lifetime(b, cur, _V)
    finished = {
        sanitize_line(reason, 32): n
        for reason, n in sorted(
            cur.by_label(_V + "request_success_total", "finished_reason").items()
        )[:MAX_FINISH_REASONS]
        if math.isfinite(n)
    }
    if finished:
        b.values["finished_by_reason"] = finished
        b.sources["finished_by_reason"] = f"{_V}request_success_total by finished_reason"
    b.set("kv_capacity_tokens", vllm_kv_capacity(cur), KV_CAPACITY_SOURCE)
    preempted = _V + "num_preemptions_total"
    b.set("preemptions_total", cur.total(preempted), f"{preempted} (since start)")
    set_largest_context(b, cur, _LATENCY["prompt_tokens"], _LATENCY["generation_tokens"])
    itl_name = _V + "inter_token_latency_seconds"
    if not cur.has(itl_name + "_count") and cur.has(_V + "time_per_output_token_seconds_count"):
        itl_name = _V + "time_per_output_token_seconds"  # vLLM <= 0.11 name of the same series
    if prev is None:
        return
    if finished:
        before = prev.by_label(_V + "request_success_total", "finished_reason")
        b.values["finished_in_window"] = {
            reason: max(0.0, n - before.get(reason, 0.0)) for reason, n in finished.items()
        }
        b.sources["finished_in_window"] = f"Δ{_V}request_success_total by finished_reason"
    gen = delta(cur, prev, _V + "generation_tokens_total")
    b.set("tokens", gen, f"Δ{_V}generation_tokens_total")
    b.set("gen_tok_s", ratio(gen, dt), f"Δ{_V}generation_tokens_total / Δt")
    if spec:
        if spec_window(b, cur, prev, _V) <= 0:
            b.note("accept_length", "no speculative steps in this window")
            b.note("draft_acceptance_rate", "no speculative steps in this window")
    else:
        why = "no vllm:spec_decode_* series: speculative decoding is off"
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
    hist = hist_delta(cur, prev, itl_name)
    if hist is not None and hist.count > 0:
        source = f"Δ{itl_name}_sum / Δ{itl_name}_count (one observation per request per step)"
        b.set("step_latency_s", hist.mean, source)
        b.set("itl_s", hist.mean, source)
        b.set("decode_steps", hist.count, f"Δ{itl_name}_count (one per request per step)")
        set_latency_quantiles(b, hist, itl_name)
    else:
        b.note("step_latency_s", "no decode steps observed in this window")
    ttft = hist_delta(cur, prev, _V + "time_to_first_token_seconds")
    if ttft is not None:
        b.set("ttft_s", ttft.mean, f"Δ{_V}time_to_first_token_seconds _sum/_count")
    hits, queries = _V + "prefix_cache_hits_total", _V + "prefix_cache_queries_total"
    b.set(
        "prefix_cache_hit_rate",
        ratio(delta(cur, prev, hits), delta(cur, prev, queries)),
        f"Δ{hits} / Δ{queries}",
    )
    set_load(b, cur, prev, dt, _V, _LATENCY)
    b.set("preemptions_per_s", ratio(delta(cur, prev, preempted), dt), f"Δ{preempted} / Δt")
    set_tokens_per_step(b)


class VllmDialect(ContinuousUsageStreams, ServerDialect):
    """vLLM."""

    dialect = Dialect.VLLM
    owned_by: ClassVar[tuple[str, ...]] = ("vllm",)
    fingerprint_order = 30
    metrics_prefix = _V
    wanted_families: ClassVar[tuple[str, ...]] = tuple(
        _V + name
        for name in (
            "num_requests_running",
            "num_requests_waiting",
            "generation_tokens",
            "prompt_tokens",
            "request_success",
            "spec_decode_",
            "inter_token_latency_seconds",
            "time_per_output_token_seconds",
            "request_time_per_output_token_seconds",
            "time_to_first_token_seconds",
            "e2e_request_latency_seconds",
            "request_queue_time_seconds",
            "request_prefill_time_seconds",
            "request_decode_time_seconds",
            "request_prompt_tokens",
            "request_generation_tokens",
            "num_preemptions",
            "kv_cache_usage_perc",
            "gpu_cache_usage_perc",
            "prefix_cache_",
            "gpu_prefix_cache_",
            "cache_config_info",
        )
    )

    async def recognize(self, client: ServerClient) -> bool:
        """A ``/version`` answer with a version string."""
        version = await try_json(client, "/version")
        return isinstance(version, Mapping) and isinstance(version.get("version"), str)

    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Version from ``/version``, speculative setup from the ``vllm:spec_decode_*`` series."""
        notes: dict[str, str] = {}
        version_body = await try_json(client, "/version")
        version = (
            str(version_body["version"])
            if isinstance(version_body, Mapping) and version_body.get("version") is not None
            else None
        )
        _, scrape, detail = await scrape_metrics(client)
        launch: dict[str, str] = {}
        metrics_enabled: bool | None
        metrics_reason: str | None = None
        if scrape is not None and scrape.has_prefix("vllm:"):
            metrics_enabled = True
            spec = vllm_spec_from_metrics(scrape)
            launch = vllm_cache_config(scrape)
        else:
            if scrape is not None:
                metrics_enabled, metrics_reason = False, REASON_METRICS
            else:
                metrics_enabled, metrics_reason = None, detail
            spec = SpecConfig(enabled=None, source="")
            notes["speculative"] = "unknown: vLLM exposes its speculative config only in /metrics"
        return ServerInfo(
            base_url=client.endpoint.base_url,
            dialect=Dialect.VLLM,
            version=version,
            model=model,
            spec=spec,
            metrics_enabled=metrics_enabled,
            metrics_reason=metrics_reason,
            max_model_len=max_len,
            launch_args=redact_launch_args(launch, client) if launch else None,
            notes=notes,
        )

    def scrape_notes(self, scrape: Scrape) -> dict[str, str]:
        """Without ``vllm:*`` series vLLM runs with ``--disable-log-stats``."""
        return {} if scrape.has_prefix(_V) else {"metrics": REASON_METRICS}

    derive_window = staticmethod(derive_vllm)

    def no_spec_stats(self, notes: dict[str, str]) -> None:
        """Per-request stats need two flags."""
        notes.setdefault(
            "draft_acceptance_rate",
            "vLLM reports per-request speculative stats only with --enable-per-request-metrics "
            "and --per-request-spec-decode-metrics (0.33+)",
        )

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """``1 + Δaccepted_tokens / Δdrafts``."""
        accepted, drafts, _ = spec_names(_V)
        return accept_length_from(deltas, accepted, drafts, 1.0)


DIALECT = VllmDialect()

__all__ = [
    "DIALECT",
    "REASON_METRICS",
    "VllmDialect",
    "derive_vllm",
    "vllm_cache_config",
    "vllm_spec_from_metrics",
]
