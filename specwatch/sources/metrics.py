"""Passive watch: windowed readings from ``/metrics`` counter and histogram deltas.

Each :meth:`MetricsWatcher.scrape` fetches ``/metrics`` once and compares it with the previous
scrape. Which series give which number depends on the dialect and its version
(one ``_derive_*`` function per dialect below); each value says in ``sources`` what it was computed
from, and each missing value says why in ``notes``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
from specwatch.core.versions import version_tuple
from specwatch.sources.client import ServerClient, ServerError
from specwatch.sources.detect import REASON_VLLM_METRICS, metrics_off_reason
from specwatch.sources.prom import Histogram, LabelMatch, Scrape, parse_metrics, series_key

_DECODE_MODES = re.compile(r"decode.*")
_COUNTER_SUFFIXES = ("_total", "_count", "_sum")
_BREAKDOWN_LABELS = ("mode", "position")
_RESTART_EPS = 1e-9
QUANTILES = (0.5, 0.9, 0.99)


def summed_counters(scrape: Scrape) -> dict[str, float]:
    """Counter-like samples summed over their series (replicas once), by name.

    Keys are sample names (``vllm:generation_tokens_total``, ``..._seconds_sum``,
    ``..._count``) plus ``name{mode="decode"}`` / ``name{position="0"}`` breakdowns.
    """
    out: dict[str, float] = {}
    for name in sorted(scrape.names()):
        if not name.endswith(_COUNTER_SUFFIXES):
            continue
        total = scrape.total(name)
        if total is not None:
            out[name] = total
        for label in _BREAKDOWN_LABELS:
            for value, amount in scrape.by_label(name, label).items():
                out[f'{name}{{{label}="{value}"}}'] = amount
    return out


@dataclass(slots=True)
class _Snapshot:
    t: float
    scrape: Scrape
    series: dict[str, float]
    created: dict[str, float]
    start_header: str | None


@dataclass(slots=True)
class _Builder:
    """Collects the fields of one :class:`MetricsWindow`."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, source: str) -> None:
        if value is None:
            return
        if isinstance(value, float) and not math.isfinite(value):
            return
        self.values[name] = value
        self.sources[name] = source

    def note(self, name: str, text: str) -> None:
        if name not in self.values:
            self.notes.setdefault(name, text)


class MetricsWatcher:
    """Scrapes ``/metrics`` and turns pairs of scrapes into :class:`MetricsWindow` readings."""

    def __init__(
        self, client: ServerClient, info: ServerInfo, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.info = info
        self.clock = clock
        self.last_counters: Mapping[str, float] = {}
        """Summed raw counters of the last good scrape (see :func:`summed_counters`)."""
        self.last_scrape: Scrape | None = None
        self._prev: _Snapshot | None = None

    def reset(self) -> None:
        """Forget the previous scrape: the next one starts a fresh window."""
        self._prev = None

    async def scrape(self) -> MetricsWindow:
        """Fetch ``/metrics`` once; return the window since the previous good scrape.

        Never raises: a failed fetch or parse gives ``notes["error"]`` and keeps the previous
        scrape as the start of the next window. The first scrape has ``dt == 0.0`` and only
        lifetime values and gauges.
        """
        t = self.clock()
        if self.info.metrics_enabled is False:
            reason = self.info.metrics_reason or "metrics are off on this server"
            return MetricsWindow(t=t, dt=0.0, notes={"metrics": reason})
        try:
            response = await self.client.get("/metrics", check=False)
        except ServerError as exc:
            return MetricsWindow(t=t, dt=0.0, notes={"error": str(exc)})
        except Exception as exc:  # never raise from a scrape
            return MetricsWindow(t=t, dt=0.0, notes={"error": f"scrape failed: {exc!r}"[:200]})
        try:
            if response.status_code >= 400:
                return MetricsWindow(
                    t=t, dt=0.0, notes=self._status_notes(response.status_code, response.text)
                )
            scrape = parse_metrics(response.text)
            header = response.headers.get("Process-Start-Time-Unix")
            return self._window(t, scrape, header)
        except Exception as exc:  # a bug here must not take the monitor down
            return MetricsWindow(
                t=t, dt=0.0, notes={"error": f"metrics derivation failed: {exc!r}"}
            )

    def _status_notes(self, status: int, body: str) -> dict[str, str]:
        off = metrics_off_reason(self.info.dialect, status)
        if off is not None:
            return {"error": off, "metrics": off}
        excerpt = " ".join(body.split())[:120]
        return {"error": f"{self.client.endpoint.url('/metrics')}: HTTP {status} {excerpt}".strip()}

    def _window(self, t: float, scrape: Scrape, header: str | None) -> MetricsWindow:
        series = {
            series_key(s): s.value
            for s in scrape.samples
            if s.name.endswith((*_COUNTER_SUFFIXES, "_bucket"))
        }
        created = scrape.series_key_values("_created")
        snap = _Snapshot(t, scrape, series, created, header)
        prev = self._prev
        b = _Builder()
        if scrape.error:
            b.notes["parse"] = scrape.error
        if self.info.dialect is Dialect.VLLM and not scrape.has_prefix("vllm:"):
            b.notes["metrics"] = REASON_VLLM_METRICS
        restarted = prev is not None and _restarted(prev, snap)
        if restarted:
            b.notes["restart"] = (
                "the server restarted between scrapes (a counter went backwards); "
                "the window starts again from this scrape"
            )
        start = None if (prev is None or restarted) else prev
        dt = 0.0 if start is None else t - start.t
        if start is not None and dt <= 0:
            start = None
            dt = 0.0
        if start is None and not restarted:
            b.notes["window"] = "first scrape: windowed values need a second one"
        derive = {
            Dialect.SGLANG: _derive_sglang,
            Dialect.VLLM: _derive_vllm,
            Dialect.LLAMACPP: _derive_llamacpp,
        }.get(self.info.dialect, _derive_openai)
        derive(b, scrape, None if start is None else start.scrape, dt, self.info)
        self._prev = snap
        self.last_scrape = scrape
        self.last_counters = summed_counters(scrape)
        return MetricsWindow(
            t=t, dt=dt, restarted=restarted, sources=b.sources, notes=b.notes, **b.values
        )


def _restarted(prev: _Snapshot, cur: _Snapshot) -> bool:
    if prev.start_header and cur.start_header and prev.start_header != cur.start_header:
        return True
    for key, value in cur.created.items():
        old = prev.created.get(key)
        if old is not None and abs(old - value) > _RESTART_EPS:
            return True
    for key, value in cur.series.items():
        old = prev.series.get(key)
        if old is not None and value < old - _RESTART_EPS:
            return True
    return False


def _delta(cur: Scrape, prev: Scrape, name: str, where: LabelMatch | None = None) -> float | None:
    now = cur.total(name, where)
    before = prev.total(name, where)
    if now is None:
        return None
    return now - (before or 0.0)


def _hist_delta(cur: Scrape, prev: Scrape | None, name: str) -> Histogram | None:
    now = cur.histogram(name)
    if now is None or prev is None:
        return None
    before = prev.histogram(name)
    return now if before is None else now.minus(before)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _plus_one(x: float | None) -> float | None:
    return None if x is None else 1.0 + x


def _set_latency_quantiles(b: _Builder, hist: Histogram, source: str) -> None:
    names = ("step_latency_p50_s", "step_latency_p90_s", "step_latency_p99_s")
    for q, name in zip(QUANTILES, names, strict=True):
        b.set(name, hist.quantile(q), f"{source} bucket deltas, q={q:g}, interpolated in bucket")


def _spec_names(prefix: str) -> tuple[str, str, str]:
    """Accepted-token, draft and draft-token counters (llama.cpp copied vLLM's names)."""
    return (
        prefix + "spec_decode_num_accepted_tokens_total",
        prefix + "spec_decode_num_drafts_total",
        prefix + "spec_decode_num_draft_tokens_total",
    )


def _spec_lifetime(b: _Builder, cur: Scrape, prefix: str) -> bool:
    """Set the since-start accept length and rate; ``False`` when there are no spec counters."""
    acc_name, drafts_name, dtok_name = _spec_names(prefix)
    if not (cur.has(drafts_name) or cur.has(acc_name)):
        return False
    b.set(
        "lifetime_accept_length",
        _plus_one(_ratio(cur.total(acc_name), cur.total(drafts_name))),
        f"1 + {acc_name} / {drafts_name} (since start)",
    )
    b.set(
        "lifetime_acceptance_rate",
        _ratio(cur.total(acc_name), cur.total(dtok_name)),
        f"{acc_name} / {dtok_name} (since start)",
    )
    return True


def _spec_window(b: _Builder, cur: Scrape, prev: Scrape, prefix: str) -> float:
    """Set the windowed accept length, rate and per-position rates; returns Δdrafts.

    Nothing is set when no draft was made in the window (Δdrafts <= 0).
    """
    acc_name, drafts_name, dtok_name = _spec_names(prefix)
    drafts = _delta(cur, prev, drafts_name) or 0.0
    if drafts <= 0:
        return drafts
    acc = _delta(cur, prev, acc_name) or 0.0
    dtoks = _delta(cur, prev, dtok_name) or 0.0
    b.set("accept_length", _plus_one(_ratio(acc, drafts)), f"1 + Δ{acc_name} / Δ{drafts_name}")
    b.set("draft_acceptance_rate", _ratio(acc, dtoks), f"Δ{acc_name} / Δ{dtok_name}")
    per_pos = prefix + "spec_decode_num_accepted_tokens_per_pos_total"
    now = cur.by_label(per_pos, "position")
    if now:
        before = prev.by_label(per_pos, "position")
        ordered = sorted(now, key=lambda p: int(p) if p.isdigit() else 1 << 30)
        b.set(
            "per_position_acceptance",
            tuple((now[p] - before.get(p, 0.0)) / drafts for p in ordered),
            f"Δ{per_pos}{{position}} / Δ{drafts_name}",
        )
    return drafts


# --- vLLM -----------------------------------------------------------------------------------

_V = "vllm:"


def _derive_vllm(
    b: _Builder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    b.set("requests_running", cur.total(_V + "num_requests_running"), _V + "num_requests_running")
    b.set("requests_waiting", cur.total(_V + "num_requests_waiting"), _V + "num_requests_waiting")
    spec = _spec_lifetime(b, cur, _V)
    itl_name = _V + "inter_token_latency_seconds"
    if not cur.has(itl_name + "_count") and cur.has(_V + "time_per_output_token_seconds_count"):
        itl_name = _V + "time_per_output_token_seconds"  # vLLM <= 0.11 name of the same series
    if prev is None:
        return
    gen = _delta(cur, prev, _V + "generation_tokens_total")
    b.set("tokens", gen, f"Δ{_V}generation_tokens_total")
    b.set("gen_tok_s", _ratio(gen, dt), f"Δ{_V}generation_tokens_total / Δt")
    if spec:
        if _spec_window(b, cur, prev, _V) <= 0:
            b.note("accept_length", "no speculative steps in this window")
            b.note("draft_acceptance_rate", "no speculative steps in this window")
    else:
        why = "no vllm:spec_decode_* series: speculative decoding is off"
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
    hist = _hist_delta(cur, prev, itl_name)
    if hist is not None and hist.count > 0:
        source = f"Δ{itl_name}_sum / Δ{itl_name}_count (one observation per request per step)"
        b.set("step_latency_s", hist.mean, source)
        b.set("itl_s", hist.mean, source)
        _set_latency_quantiles(b, hist, itl_name)
    else:
        b.note("step_latency_s", "no decode steps observed in this window")
    ttft = _hist_delta(cur, prev, _V + "time_to_first_token_seconds")
    if ttft is not None:
        b.set("ttft_s", ttft.mean, f"Δ{_V}time_to_first_token_seconds _sum/_count")


# --- llama.cpp ------------------------------------------------------------------------------

_L = "llamacpp:"
LLAMACPP_END_ONLY = "llama.cpp counters move only when a request finishes"


def _derive_llamacpp(
    b: _Builder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    b.set("requests_running", cur.total(_L + "requests_processing"), _L + "requests_processing")
    b.set("requests_waiting", cur.total(_L + "requests_deferred"), _L + "requests_deferred")
    spec_counters = _spec_lifetime(b, cur, _L)
    b.note(
        "step_latency_s",
        "llama.cpp exposes no per-step series; a stream's timings give the step latency",
    )
    if prev is None:
        return
    tokens = _delta(cur, prev, _L + "tokens_predicted_total")
    if tokens is not None and tokens > 0:
        b.set(
            "tokens", tokens, f"Δ{_L}tokens_predicted_total (requests that finished in the window)"
        )
        b.set(
            "gen_tok_s",
            _ratio(tokens, dt),
            f"Δ{_L}tokens_predicted_total / Δt (requests that finished in the window)",
        )
        b.notes["counters"] = LLAMACPP_END_ONLY
    else:
        b.note("gen_tok_s", f"{LLAMACPP_END_ONLY}; none finished in this window")
        b.note("tokens", f"{LLAMACPP_END_ONLY}; none finished in this window")
    if not spec_counters:
        why = (
            "this llama-server build has no speculative counters (llama.cpp PR #26389)"
            if info.spec.enabled
            else "no llamacpp:spec_decode_* counters (speculation off or an older build)"
        )
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
        return
    if _spec_window(b, cur, prev, _L) <= 0:
        b.note("accept_length", f"{LLAMACPP_END_ONLY}; no speculative request finished")
        b.note("draft_acceptance_rate", f"{LLAMACPP_END_ONLY}; no speculative request finished")


# --- SGLang ---------------------------------------------------------------------------------

_S = "sglang:"


def _sglang_draft_per_round(info: ServerInfo) -> int | None:
    ndt = info.spec.num_draft_tokens
    if ndt is not None and ndt > 1:
        return ndt - 1
    return info.spec.num_steps


def _derive_sglang(
    b: _Builder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    version = version_tuple(info.version)
    b.set("requests_running", cur.total(_S + "num_running_reqs"), _S + "num_running_reqs")
    b.set("requests_waiting", cur.total(_S + "num_queue_reqs"), _S + "num_queue_reqs")
    spec_on = info.spec.enabled is not False and (
        cur.has(_S + "spec_accept_length") or info.spec.enabled is True
    )
    per_round = _sglang_draft_per_round(info)
    gen_name = _S + "generation_tokens_total"
    verify_name = _S + "spec_verify_calls_total"
    req_name = _S + "num_requests_total"
    finished_source = (
        f"(Δ{gen_name} − Δ{req_name}) / Δ{verify_name}: finished requests, first (prefill) token"
        " left out"
    )
    # lifetime, from the finished-request counters (0.5.16+)
    if spec_on and cur.has(verify_name):
        life_len = _ratio(_minus(cur.total(gen_name), cur.total(req_name)), cur.total(verify_name))
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
        b.note("lifetime_accept_length", "SGLang < 0.5.16 has no spec_verify_calls_total counter")
    gauge_len = cur.mean(_S + "spec_accept_length")
    gauge_rate = cur.mean(_S + "spec_accept_rate")
    if gauge_len is not None and gauge_len < 1.0:
        # an accept length below 1 is impossible: the gauge has not been set yet
        gauge_len = gauge_rate = None
        b.notes["accept_length"] = (
            "SGLang sets its accept-length gauge every 40 decode steps; not yet since start"
        )
    if prev is None:
        return
    # live tokens
    rt_name = _S + "realtime_tokens_total"
    decode_sel = {"mode": "decode"}
    live = _delta(cur, prev, rt_name, decode_sel)
    ttft = _hist_delta(cur, prev, _S + "time_to_first_token_seconds")
    if live is not None:
        source = f'Δ{rt_name}{{mode="decode"}}'
        if ttft is not None:
            # the first token of each request comes from prefill, outside mode="decode";
            # each one is one observation of the TTFT histogram
            live += ttft.count
            source += f" + Δ{_S}time_to_first_token_seconds_count (first tokens)"
        b.set("tokens", live, source)
        b.set("gen_tok_s", _ratio(live, dt), f"({source}) / Δt")
        if version and version < (0, 5, 23):
            b.notes["gen_tok_s"] = (
                "SGLang before 0.5.23 may advance realtime_tokens_total only on log ticks"
            )
    else:
        _sglang_throughput_gauge(b, cur)
        b.note("tokens", "SGLang < 0.5.10 has no live token counter")
    if not spec_on:
        why = "speculative decoding is off"
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
    else:
        d_verify = _delta(cur, prev, verify_name)
        if d_verify is not None and d_verify > 0:
            d_gen = _delta(cur, prev, gen_name)
            d_req = _delta(cur, prev, req_name)
            length = _ratio(_minus(d_gen, d_req), d_verify)
            b.set("accept_length", length, finished_source)
            if length is not None and per_round:
                b.set(
                    "draft_acceptance_rate",
                    (length - 1.0) / per_round,
                    f"(windowed accept length − 1) / {per_round} drafts per round"
                    + (" (tree size with topk > 1)" if (info.spec.topk or 1) > 1 else ""),
                )
        elif d_verify is not None:
            b.notes["accept_length"] = (
                "no request finished in this window (SGLang spec counters move at request end); "
                "showing the gauge"
            )
        _sglang_gauges(b, gauge_len, gauge_rate, version, per_round)
    # step latency
    passes = _delta(cur, prev, _S + "cuda_graph_passes_total", {"mode": _DECODE_MODES})
    running_now = cur.total(_S + "num_running_reqs") or 0.0
    running_before = prev.total(_S + "num_running_reqs") or 0.0
    itl = _hist_delta(cur, prev, _S + "inter_token_latency_seconds")
    if itl is None or itl.count <= 0:
        old = _hist_delta(cur, prev, _S + "time_per_output_token_seconds")
        itl = old if old is not None and old.count > 0 else itl
    if itl is not None and itl.count > 0:
        b.set("itl_s", itl.mean, "Δ sglang ITL histogram _sum/_count (per token)")
    windowed_length = "spec_verify_calls_total" in b.sources.get("accept_length", "")
    if itl is not None and itl.mean is not None and windowed_length:
        b.set(
            "step_latency_s",
            itl.mean * b.values["accept_length"],
            "mean ITL (Δ_sum/Δ_count, per token) × windowed accept length",
        )
    elif passes is not None and passes > 0 and running_now > 0 and running_before > 0:
        b.set(
            "step_latency_s",
            dt / passes,
            f'Δt / Δ{_S}cuda_graph_passes_total{{mode=~"decode.*"}} (busy at both scrapes)',
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
    if ttft is not None:
        b.set("ttft_s", ttft.mean, f"Δ{_S}time_to_first_token_seconds _sum/_count")


def _minus(a: float | None, c: float | None) -> float | None:
    if a is None:
        return None
    return a - (c or 0.0)


def _sglang_gauges(
    b: _Builder,
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
    if gauge_rate is not None and version >= (0, 5, 16):
        b.set(
            "draft_acceptance_rate",
            gauge_rate,
            f"gauge {_S}spec_accept_rate (drafts only since 0.5.16; last 40 steps)",
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


def _sglang_throughput_gauge(b: _Builder, cur: Scrape) -> None:
    gauge = cur.total(_S + "gen_throughput")
    if "gen_tok_s" not in b.values and gauge is not None:
        b.set("gen_tok_s", gauge, f"gauge {_S}gen_throughput (last 40 decode steps)")
        b.notes.setdefault(
            "gen_tok_s",
            "SGLang < 0.5.10 has no live token counter: gauge over the last 40 decode steps, "
            "stale when idle",
        )


# --- generic --------------------------------------------------------------------------------


def _derive_openai(
    b: _Builder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    why = "a generic OpenAI-compatible server's metrics are not understood"
    for name in ("gen_tok_s", "accept_length", "draft_acceptance_rate", "step_latency_s"):
        b.note(name, why)


__all__ = ["LLAMACPP_END_ONLY", "QUANTILES", "MetricsWatcher", "summed_counters"]
