"""SGLang's metrics window: which ``sglang:*`` series give which number, per version.

Versions as the released wheels have them (the server reference names later ones): a live
token counter (``realtime_tokens_total``, advanced every decode pass) and the passes counter
already in 0.5.9 (not in 0.5.3); finished-request spec counters (``spec_verify_calls_total``)
and a drafts-only ``spec_accept_rate`` gauge already in 0.5.15.post1 (0.5.9's gauge is
(accepted + bonus) / (forwards × num_draft_tokens)); the gauges cover the last
``--decode-log-interval`` steps. The accept length has one source per server, chosen once: the
finished-request counters where the server has them, else the gauges; a window in which the
counters did not move reports nothing (the UI holds the last value) instead of another source.
"""

from __future__ import annotations

import re

from specwatch.core.server import ServerInfo, version_tuple
from specwatch.core.values import as_float
from specwatch.sources.metrics.prom import (
    Scrape,
    count,
    mean_of,
    per_scheduler,
    per_scheduler_delta,
    ratio_mean,
)
from specwatch.sources.metrics.window_builder import (
    WindowBuilder,
    delta,
    hist_delta,
    minus,
    ratio,
    set_largest_context,
    set_load,
)

_S = "sglang:"
_DECODE_MODES = re.compile(r"decode.*")
_RUNNING = _S + "num_running_reqs"
_PASSES = _S + "cuda_graph_passes_total"


def draft_per_round(info: ServerInfo) -> int | None:
    """Drafts a verify step can accept: ``num_draft_tokens − 1``, else ``num_steps``."""
    ndt = info.spec.num_draft_tokens
    if ndt is not None and ndt > 1:
        return ndt - 1
    return info.spec.num_steps


def set_kv_capacity(b: WindowBuilder, cur: Scrape, info: ServerInfo) -> None:
    """KV tokens over every rank: the ``max_total_num_tokens`` gauge, else ``/server_info``'s
    figure, else the used tokens over the usage share (each rank the same pool size)."""
    top = _S + "max_total_num_tokens"
    if b.set("kv_capacity_tokens", cur.total(top), f"{top} (summed over ranks)"):
        return
    launch = info.launch_args or {}
    given = as_float(launch.get("max_total_num_tokens"))
    if given and given > 0:
        b.set("kv_capacity_tokens", given, "/server_info max_total_num_tokens")
        return
    used, usage = cur.total(_S + "num_used_tokens"), ratio_mean(cur, _S + "token_usage")
    if used and usage and usage > 0:
        b.set("kv_capacity_tokens", used / usage, f"{_S}num_used_tokens / {_S}token_usage")


_LATENCY = {
    "ttft": _S + "time_to_first_token_seconds",
    "tpot": _S + "request_time_per_output_token_seconds",
    "e2e": _S + "e2e_request_latency_seconds",
    "queue": _S + "queue_time_seconds",  # 0.5.4+
    # a finished request's shape in tokens: only with --collect-tokens-histogram
    "prompt_tokens": _S + "prompt_tokens_histogram",
    "generation_tokens": _S + "generation_tokens_histogram",
}


def derive_sglang(
    b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    """SGLang's window: live tokens; finished-request spec counters, or gauges without them."""
    version = version_tuple(info.version)
    # counts sum over data-parallel ranks (the priority breakdown dropped); ratios are a mean
    b.set(
        "requests_running",
        count(cur, _RUNNING),
        f"{_RUNNING}: sampled on SGLang's log ticks, written after a prefill (the batch before"
        " the new requests join) and every --decode-log-interval decode passes (default 40)",
    )
    b.set("requests_waiting", count(cur, _S + "num_queue_reqs"), _S + "num_queue_reqs")
    # per-request token histograms: only with --collect-tokens-histogram
    set_largest_context(b, cur, _S + "prompt_tokens_histogram", _S + "generation_tokens_histogram")
    b.set("kv_cache_usage", ratio_mean(cur, _S + "token_usage"), _S + "token_usage (mean of ranks)")
    set_kv_capacity(b, cur, info)
    b.set(
        "prefix_cache_hit_rate",
        ratio_mean(cur, _S + "cache_hit_rate"),
        _S + "cache_hit_rate (mean of ranks)",
    )
    if prev is not None:
        set_load(b, cur, prev, dt, _S, _LATENCY)
    spec_on = info.spec.enabled is not False and (
        cur.has(_S + "spec_accept_length") or info.spec.enabled is True
    )
    per_round = draft_per_round(info)
    gen_name = _S + "generation_tokens_total"
    verify_name = _S + "spec_verify_calls_total"
    req_name = _S + "num_requests_total"
    finished_source = (
        f"(Δ{gen_name} − Δ{req_name}) / Δ{verify_name}: finished requests, first (prefill) token"
        " left out"
    )
    # lifetime, from the finished-request counters (0.5.15.post1+)
    if spec_on and cur.has(verify_name):
        life_len = ratio(minus(cur.total(gen_name), cur.total(req_name)), cur.total(verify_name))
        b.set(
            "lifetime_accept_length", life_len, finished_source.replace("Δ", "") + " (since start)"
        )
        if life_len is not None and per_round:
            b.set(
                "lifetime_acceptance_rate",
                (life_len - 1.0) / per_round,
                f"(lifetime accept length − 1) / {per_round} drafts per round",
            )
    elif spec_on:
        b.note(
            "lifetime_accept_length", "SGLang < 0.5.15.post1 has no spec_verify_calls_total counter"
        )
    gauge_len = ratio_mean(cur, _S + "spec_accept_length")
    gauge_rate = ratio_mean(cur, _S + "spec_accept_rate")
    if gauge_len is not None and gauge_len < 1.0:
        # an accept length below 1 is impossible: the gauge has not been set yet
        gauge_len = gauge_rate = None
        if not cur.has(verify_name):  # the gauge is this server's source
            b.notes["accept_length"] = (
                "SGLang sets its accept-length gauge every 40 decode steps; not yet since start"
            )
    if prev is None:
        return
    # live tokens
    rt_name = _S + "realtime_tokens_total"
    decode_sel = {"mode": "decode"}
    live = delta(cur, prev, rt_name, decode_sel)
    ttft = hist_delta(cur, prev, _S + "time_to_first_token_seconds")
    if live is not None:
        source = f'Δ{rt_name}{{mode="decode"}}'
        if ttft is not None:
            # the first token of each request comes from prefill, outside mode="decode";
            # each one is one observation of the TTFT histogram
            live += ttft.count
            source += f" + Δ{_S}time_to_first_token_seconds_count (first tokens)"
        b.set("tokens", live, source)
        b.set("gen_tok_s", ratio(live, dt), f"({source}) / Δt")
    else:
        _sglang_throughput_gauge(b, cur)
        b.note("tokens", "SGLang < 0.5.9 has no live token counter")
    if not spec_on:
        why = "speculative decoding is off"
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
    elif cur.has(verify_name):
        _sglang_windowed_spec(b, cur, prev, per_round, info, finished_source)
    else:
        _sglang_gauges(b, gauge_len, gauge_rate, version, per_round)
    # step latency
    pass_time = _pass_time(cur, prev, dt)
    itl = hist_delta(cur, prev, _S + "inter_token_latency_seconds")
    if itl is None or itl.count <= 0:
        old = hist_delta(cur, prev, _S + "time_per_output_token_seconds")
        itl = old if old is not None and old.count > 0 else itl
    if itl is not None and itl.count > 0:
        b.set("itl_s", itl.mean, "Δ sglang ITL histogram _sum/_count (per token)")
    windowed_length = "spec_verify_calls_total" in b.sources.get("accept_length", "")
    # One method while the passes counter moves: the per-rank pass time is the step itself;
    # ITL × the accept length of the requests that finished mixes two populations and made
    # the figure switch method (±2%) between windows with and without a finished request.
    if pass_time is not None:
        b.set(
            "step_latency_s",
            pass_time,
            f'Δt / Δ{_S}cuda_graph_passes_total{{mode=~"decode.*"}} per data-parallel rank busy'
            " at both scrapes, mean of ranks",
        )
    elif itl is not None and itl.mean is not None and windowed_length:
        b.set(
            "step_latency_s",
            itl.mean * b.values["accept_length"],
            "mean ITL (Δ_sum/Δ_count, per token) × windowed accept length",
        )
    elif itl is not None and itl.mean is not None and b.values.get("accept_length") is not None:
        b.set(
            "step_latency_s",
            itl.mean * b.values["accept_length"],
            "mean ITL (per token) × gauge accept length",
        )
    elif itl is not None and itl.mean is not None and not spec_on:
        b.set("step_latency_s", itl.mean, "mean ITL (no speculation: one token per step)")
    else:
        b.note("step_latency_s", "no decode steps observed in this window")
    b.note("step_latency_p50_s", "SGLang's ITL histogram is per token, not per step")
    _cuda_graph_share(b, cur, prev)
    if ttft is not None:
        b.set("ttft_s", ttft.mean, f"Δ{_S}time_to_first_token_seconds _sum/_count")


def _cuda_graph_share(b: WindowBuilder, cur: Scrape, prev: Scrape) -> None:
    """Decode passes under CUDA graphs / all decode passes, over every rank (0.5.9+); else the
    ``is_cuda_graph`` gauge, whether each rank's last decode batch ran in a graph (0.5.3)."""
    graphed = per_scheduler_delta(cur, prev, _PASSES, {"mode": "decode_cuda_graph"})
    passes = per_scheduler_delta(cur, prev, _PASSES, {"mode": _DECODE_MODES})
    total = sum(passes.values())
    if total > 0:
        b.set(
            "cuda_graph_share",
            sum(graphed.values()) / total,
            f'Δ{_PASSES}{{mode="decode_cuda_graph"}} / Δ{_PASSES}{{mode=~"decode.*"}}',
        )
        return
    if passes:
        b.note("cuda_graph_share", "no decode pass in this window")
        return
    gauge = ratio_mean(cur, _S + "is_cuda_graph")
    b.set(
        "cuda_graph_share",
        gauge,
        f"gauge {_S}is_cuda_graph (each rank's last decode batch; mean of ranks)",
    )
    b.note("cuda_graph_share", "this SGLang version says nothing of CUDA graphs")


def _pass_time(cur: Scrape, prev: Scrape, dt: float) -> float | None:
    """Δt / Δdecode passes of each data-parallel rank busy at both scrapes, their mean.

    Ranks are separate schedulers stepping side by side: Δt over their summed passes would
    halve the pass time with two ranks. A rank idle at either scrape stepped for part of the
    window only and is left out.
    """
    passes = per_scheduler_delta(cur, prev, _PASSES, {"mode": _DECODE_MODES})
    now, before = per_scheduler(cur, _RUNNING), per_scheduler(prev, _RUNNING)
    return mean_of(
        dt / n
        for rank, n in passes.items()
        if n > 0 and now.get(rank, 0.0) > 0 and before.get(rank, 0.0) > 0
    )


def _sglang_windowed_spec(
    b: WindowBuilder,
    cur: Scrape,
    prev: Scrape,
    per_round: int | None,
    info: ServerInfo,
    finished_source: str,
) -> None:
    """Accept length from the finished-request counters (0.5.15.post1+), and only from them.

    A server that has them is always read this way: a window in which no request finished is
    left empty, so the UI holds the last reading, rather than switching to the 40-step gauge,
    which measures other steps and would make the number jump between two sources.
    """
    verify_name = _S + "spec_verify_calls_total"
    d_verify = delta(cur, prev, verify_name)
    if d_verify is None or d_verify <= 0:
        why = (
            "no verify step finished in this window (SGLang's spec counters move when a request"
            " ends): the last reading is held"
        )
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
        return
    d_gen = delta(cur, prev, _S + "generation_tokens_total")
    d_req = delta(cur, prev, _S + "num_requests_total")
    length = ratio(minus(d_gen, d_req), d_verify)
    b.set("accept_length", length, finished_source)
    if length is not None and per_round:
        b.set(
            "draft_acceptance_rate",
            (length - 1.0) / per_round,
            f"(windowed accept length − 1) / {per_round} drafts per round"
            + (" (tree size with topk > 1)" if (info.spec.topk or 1) > 1 else ""),
        )


def _sglang_gauges(
    b: WindowBuilder,
    gauge_len: float | None,
    gauge_rate: float | None,
    version: tuple[int, ...],
    per_round: int | None,
) -> None:
    """Fall back to SGLang's gauges (last decode-log interval, default 40 steps)."""
    if "accept_length" not in b.values and gauge_len is not None:
        b.set(
            "accept_length",
            gauge_len,
            f"gauge {_S}spec_accept_length (last --decode-log-interval steps, default 40)",
        )
        b.notes.setdefault(
            "accept_length", "SGLang gauge over the last 40 decode steps, not this window"
        )
    if "draft_acceptance_rate" in b.values:
        return
    if gauge_rate is not None and version >= (0, 5, 15):
        b.set(
            "draft_acceptance_rate",
            gauge_rate,
            f"gauge {_S}spec_accept_rate (drafts only since 0.5.15.post1; last 40 steps)",
        )
    elif gauge_len is not None and per_round:
        b.set(
            "draft_acceptance_rate",
            (gauge_len - 1.0) / per_round,
            f"(gauge {_S}spec_accept_length − 1) / {per_round} drafts per round "
            "(this version's spec_accept_rate uses another formula)",
        )
    else:
        b.note("draft_acceptance_rate", "SGLang exposes no drafts-only rate in this version")


def _sglang_throughput_gauge(b: WindowBuilder, cur: Scrape) -> None:
    gauge = count(cur, _S + "gen_throughput")  # a rate per rank: ranks add up
    if "gen_tok_s" not in b.values and gauge is not None:
        b.set("gen_tok_s", gauge, f"gauge {_S}gen_throughput (last 40 decode steps)")
        b.notes.setdefault(
            "gen_tok_s",
            "SGLang < 0.5.9 has no live token counter: gauge over the last 40 decode steps, "
            "stale when idle",
        )


__all__ = ["derive_sglang", "draft_per_round"]
