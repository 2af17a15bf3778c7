"""SGLang: ``/server_info`` arguments and ``sglang:*`` metrics (streams: ``sglang_stream``).

Probing never runs a generation: ``/health`` and ``/health_generate`` do (>= 0.4.10), so
readiness comes from ``/ready``. The metrics window per version, as the released wheels have
them (the server reference names later ones): a live token counter (``realtime_tokens_total``,
advanced every decode pass) and the passes counter since 0.5.9; finished-request spec counters
(``spec_verify_calls_total``) and a drafts-only ``spec_accept_rate`` gauge since 0.5.15.post1
(0.5.9's gauge is (accepted + bonus) / (forwards × num_draft_tokens)); the gauges cover the last
``--decode-log-interval`` steps. The accept length has one source per server, chosen once: the
finished-request counters where the server has them, else the gauges; a window in which the
counters did not move reports nothing (the UI holds the last value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from specwatch.core.server import Dialect, ServerInfo, SpecConfig, version_tuple
from specwatch.core.values import as_float, as_int
from specwatch.sources.dialects.base import (
    ONE_CHUNK_PER_STEP,
    ServerDialect,
    StreamPlan,
    StreamRequest,
    WindowBuilder,
    accept_length_from,
    delta,
    hist_delta,
    minus,
    ratio,
    set_largest_context,
    set_load,
)
from specwatch.sources.dialects.sglang_stream import parse_sglang_chunk, sglang_request, sglang_spec
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.server_queries import (
    redact_launch_args,
    str_or_none,
    try_json,
)
from specwatch.sources.metrics.prom import (
    Scrape,
    count,
    mean_of,
    per_scheduler,
    per_scheduler_delta,
    ratio_mean,
)

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient

FORBIDDEN_PATHS = ("/health", "/health_generate")
"""SGLang endpoints that run a generation; specwatch never requests them."""
REASON_METRICS = "SGLang was started without --enable-metrics"

_S = "sglang:"
_SPEC_PREFIX = "spec_"
_INFO_PATHS = ("/server_info", "/get_server_info")


def lifetime_accept_length(server_info: Any) -> float | None:
    """The mean of ``internal_states[].avg_spec_accept_length`` over data-parallel ranks
    (absent before a rank's first decode log tick; a PD payload's decode servers first)."""
    if isinstance(server_info, Mapping) and isinstance(server_info.get("decode"), list):
        decode = server_info["decode"]
        server_info = decode[0] if decode else None
    states = server_info.get("internal_states") if isinstance(server_info, Mapping) else None
    if not isinstance(states, list):
        return None
    values = [
        v
        for state in states
        if isinstance(state, Mapping)
        and (v := as_float(state.get("avg_spec_accept_length"))) is not None
        and v >= 1.0
    ]
    return sum(values) / len(values) if values else None


_ACCEPT_NUM = _S + "generation_tokens_total"
_ACCEPT_DEN = _S + "spec_verify_calls_total"


# --- the metrics window ----------------------------------------------------------------------

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
    elif itl is not None and itl.mean is not None and b.values.get("accept_length") is not None:
        kind = "windowed" if windowed_length else "gauge"
        b.set(
            "step_latency_s",
            itl.mean * b.values["accept_length"],
            f"mean ITL (Δ_sum/Δ_count, per token) × {kind} accept length",
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


class SGLangDialect(ServerDialect):
    """SGLang."""

    dialect = Dialect.SGLANG
    owned_by: ClassVar[tuple[str, ...]] = ("sglang",)
    fingerprint_order = 20
    metrics_prefix = _S
    wanted_families: ClassVar[tuple[str, ...]] = tuple(
        _S + name
        for name in [
            "num_running_reqs",
            "num_queue_reqs",
            "generation_tokens",
            "prompt_tokens",
            "num_requests",
            "realtime_tokens",
            "spec_accept_length",
            "spec_accept_rate",
            "spec_verify_calls",
            "cuda_graph_passes",
            "is_cuda_graph",
            "gen_throughput",
            "inter_token_latency_seconds",
            "time_per_output_token_seconds",
            "request_time_per_output_token_seconds",
            "time_to_first_token_seconds",
            "e2e_request_latency_seconds",
            "queue_time_seconds",
            "token_usage",
            "num_used_tokens",
            "max_total_num_tokens",
            "cache_hit_rate",
        ]
    )
    metrics_off_statuses: ClassVar[tuple[int, ...]] = (404,)
    metrics_off_text = REASON_METRICS

    async def recognize(self, client: ServerClient) -> bool:
        """``/server_info`` with speculative, internal-state or PD-decode fields."""
        for path in _INFO_PATHS:
            info = await try_json(client, path)
            if isinstance(info, Mapping) and (
                "speculative_algorithm" in info or "internal_states" in info or "decode" in info
            ):
                return True
        return False

    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Arguments from ``/server_info`` (or ``/get_server_info``); ``/ready`` answers first."""
        notes: dict[str, str] = {}
        ready = await client.get("/ready", check=False)
        if ready.status_code == 503:
            raise ServerError(
                f"{client.endpoint.url('/ready')}: HTTP 503 (SGLang is still loading)",
                kind="http",
                status=503,
                url=client.endpoint.url("/ready"),
            )
        info: Any = None
        source = ""
        for path in _INFO_PATHS:
            try:
                info = await try_json(client, path)
            except ServerError as exc:
                if not exc.unauthorised:  # the metrics, open without the key, may do
                    raise
                notes["server_info"] = f"{path} wants the API key: arguments not read"
                break
            if isinstance(info, Mapping):
                source = path
                break
        if isinstance(info, Mapping) and isinstance(info.get("decode"), list) and info["decode"]:
            notes["topology"] = "PD disaggregation: reading the decode server's arguments"
            first = info["decode"][0]
            info = first if isinstance(first, Mapping) else info
        args: Mapping[str, Any] = info if isinstance(info, Mapping) else {}
        if not args:
            notes.setdefault("server_info", "neither /server_info nor /get_server_info answered")
        version = str(args["version"]) if args.get("version") is not None else None
        model = (
            model
            or str_or_none(args.get("served_model_name"))
            or str_or_none(args.get("model_path"))
        )
        algorithm = str_or_none(args.get("speculative_algorithm"))
        if args:
            spec = SpecConfig(
                enabled=algorithm is not None and algorithm.upper() != "NONE",
                algorithm=algorithm,
                num_steps=as_int(args.get("speculative_num_steps"), digits=True),
                num_draft_tokens=as_int(args.get("speculative_num_draft_tokens"), digits=True),
                topk=as_int(args.get("speculative_eagle_topk"), digits=True),
                draft_model=str_or_none(args.get("speculative_draft_model_path")),
                source=source,
            )
        else:
            spec = SpecConfig(enabled=None, source="")
        launch = {k: v for k, v in args.items() if k != "internal_states"}
        metrics_enabled, metrics_reason, _ = await self.metrics_state(
            client, args.get("enable_metrics") is False
        )
        return ServerInfo(
            base_url=client.endpoint.base_url,
            dialect=Dialect.SGLANG,
            version=version,
            model=model,
            spec=spec,
            metrics_enabled=metrics_enabled,
            metrics_reason=metrics_reason,
            max_model_len=max_len or as_int(args.get("context_length"), digits=True),
            launch_args=redact_launch_args(launch, client) if launch else None,
            notes=notes,
        )

    async def side_figures(
        self, client: ServerClient, info: ServerInfo, scrape: Scrape
    ) -> dict[str, tuple[float, str]]:
        """The lifetime accept length from ``internal_states[].avg_spec_accept_length``, on
        servers without ``spec_verify_calls_total`` (before 0.5.15.post1).

        ``/server_info`` asks each scheduler for its state between batches: no model work.
        """
        if info.spec.enabled is False or scrape.has(_S + "spec_verify_calls_total"):
            return {}
        path = info.spec.source if info.spec.source in _INFO_PATHS else _INFO_PATHS[0]
        found = await try_json(client, path)
        length = lifetime_accept_length(found)
        if length is None:
            return {}
        source = (
            f"{path} internal_states[].avg_spec_accept_length (since start, warm-up included;"
            " advanced on decode log ticks; mean of data-parallel ranks)"
        )
        out = {"lifetime_accept_length": (length, source)}
        per_round = draft_per_round(info)
        if per_round:
            out["lifetime_acceptance_rate"] = (
                (length - 1.0) / per_round,
                f"(lifetime accept length − 1) / {per_round} drafts per round, from {path}",
            )
        return out

    derive_window = staticmethod(derive_sglang)

    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """Native ``/generate``: cumulative ``meta_info.completion_tokens`` in every chunk."""
        return StreamPlan(
            attempts=(("/generate", sglang_request(request)),),
            count_source="meta_info.completion_tokens",
        )

    parse_chunk = staticmethod(parse_sglang_chunk)

    def step_note(self) -> str | None:
        """One chunk per engine step."""
        return ONE_CHUNK_PER_STEP

    def spec_figures(
        self, info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
    ) -> tuple[float | None, float | None]:
        """The final chunk's ``spec_*`` fields (names per version)."""
        return sglang_spec(info, stats, completion, notes)

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """``(Δgeneration_tokens − Δnum_requests) / Δspec_verify_calls``.

        Each finished request's first token came from prefill, not a verify step; it is left
        out as in the live window, or short runs overstate the length.
        """
        return accept_length_from(
            deltas, _ACCEPT_NUM, _ACCEPT_DEN, 0.0, minus_name=_S + "num_requests_total"
        )


DIALECT = SGLangDialect()

__all__ = [
    "DIALECT",
    "FORBIDDEN_PATHS",
    "REASON_METRICS",
    "SGLangDialect",
    "derive_sglang",
    "draft_per_round",
]
