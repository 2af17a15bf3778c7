"""PromQL for a fleet, and the pure derivation of server and GPU figures from its answers.

A refresh costs a constant number of queries, however many servers and GPUs there are:

- server gauges: one ``{__name__=~"..."}`` selector (names kept, dialect from the prefix);
- server counters: one expression, a union of ``sum by (instance, ...) (rate(name[w]))``, each
  tagged with a ``specwatch_field`` label (``rate()`` drops ``__name__``, so a bare
  ``rate({__name__=~...})`` would collide on identical label sets);
- GPUs: one ``{__name__=~"DCGM_FI_..."}`` selector.

The windowed names are those of :class:`~specwatch.core.server.MetricsWindow`; the formulas
follow ``specwatch.sources.watcher``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from specwatch.core.fleet import POD_LABELS, FleetGpu, FleetServer, ServerRates
from specwatch.core.server import Dialect, MetricsWindow
from specwatch.sources.dcgm.fields import FIELDS, OLD_NAMES
from specwatch.sources.dcgm.parse import group_gpus, to_sample, to_static
from specwatch.sources.prometheus.api import VectorSample

FIELD_LABEL = "specwatch_field"
GROUP_BY = ("instance", "job", *POD_LABELS)
_MATCHER = re.compile(r"^\s*\{(.*)\}\s*$", re.DOTALL)

COUNTERS: tuple[tuple[str, str, str], ...] = (
    # (field, series, extra matcher)
    ("vllm:gen", "vllm:generation_tokens_total", ""),
    ("vllm:acc", "vllm:spec_decode_num_accepted_tokens_total", ""),
    ("vllm:drafts", "vllm:spec_decode_num_drafts_total", ""),
    ("vllm:dtok", "vllm:spec_decode_num_draft_tokens_total", ""),
    ("vllm:itl_sum", "vllm:inter_token_latency_seconds_sum", ""),
    ("vllm:itl_count", "vllm:inter_token_latency_seconds_count", ""),
    ("vllm:tpot_sum", "vllm:time_per_output_token_seconds_sum", ""),
    ("vllm:tpot_count", "vllm:time_per_output_token_seconds_count", ""),
    ("sglang:live", "sglang:realtime_tokens_total", 'mode="decode"'),
    ("sglang:first", "sglang:time_to_first_token_seconds_count", ""),
    ("sglang:gen", "sglang:generation_tokens_total", ""),
    ("sglang:req", "sglang:num_requests_total", ""),
    ("sglang:verify", "sglang:spec_verify_calls_total", ""),
    ("sglang:itl_sum", "sglang:inter_token_latency_seconds_sum", ""),
    ("sglang:itl_count", "sglang:inter_token_latency_seconds_count", ""),
    ("llamacpp:gen", "llamacpp:tokens_predicted_total", ""),
    ("llamacpp:gen_s", "llamacpp:tokens_predicted_seconds_total", ""),
    ("llamacpp:acc", "llamacpp:spec_decode_num_accepted_tokens_total", ""),
    ("llamacpp:drafts", "llamacpp:spec_decode_num_drafts_total", ""),
    ("llamacpp:dtok", "llamacpp:spec_decode_num_draft_tokens_total", ""),
    # TensorRT-LLM (tensorrt_llm/metrics/collector.py): request-end counters per position
    ("trtllm:gen", "trtllm_generation_tokens_total", ""),
    ("trtllm:acc", "trtllm_spec_decode_accepted_tokens_total", ""),
    ("trtllm:drafts", "trtllm_spec_decode_drafted_tokens_total", 'token_position="0"'),
    ("trtllm:dtok", "trtllm_spec_decode_drafted_tokens_total", ""),
    ("trtllm:decode_sum", "trtllm_request_decode_time_seconds_sum", ""),
)
SERVER_GAUGES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
    "sglang:gen_throughput",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "trtllm_num_requests_running",
    "trtllm_num_requests_waiting",
)
_RUNNING = {
    Dialect.VLLM: ("vllm:num_requests_running", "vllm:num_requests_waiting"),
    Dialect.SGLANG: ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
    Dialect.LLAMACPP: ("llamacpp:requests_processing", "llamacpp:requests_deferred"),
    Dialect.TRTLLM: ("trtllm_num_requests_running", "trtllm_num_requests_waiting"),
}
_GEN = {
    Dialect.VLLM: "vllm:generation_tokens_total",
    Dialect.LLAMACPP: "llamacpp:tokens_predicted_total",
    Dialect.TRTLLM: "trtllm_generation_tokens_total",
}

GPU_SERIES = (*(f.dcgm for f in FIELDS), *OLD_NAMES)
"""Every DCGM field specwatch reads (:data:`specwatch.sources.dcgm.fields.FIELDS`, one home)."""


def label_matcher(text: str | None) -> str:
    """The inside of a ``{job="vllm"}`` matcher (``""`` for none).

    Raises:
        ValueError: Not in braces.
    """
    if text is None or not text.strip():
        return ""
    m = _MATCHER.match(text)
    if m is None:
        raise ValueError(f"expected a label matcher like '{{job=\"vllm\"}}', got {text!r}")
    return m.group(1).strip().rstrip(",")


def _selector(*parts: str) -> str:
    return "{" + ",".join(p for p in parts if p) + "}"


def names_selector(names: Iterable[str], matcher: str = "") -> str:
    """``{__name__=~"a|b",<matcher>}`` for the given series names."""
    alternatives = "|".join(re.escape(n).replace("\\:", ":") for n in names)
    return _selector(f'__name__=~"{alternatives}"', matcher)


def server_gauges_query(matcher: str = "") -> str:
    """One selector for every dialect's gauges (and discovery)."""
    return names_selector(SERVER_GAUGES, matcher)


def server_rates_query(window_s: float, matcher: str = "") -> str:
    """One expression for every dialect's counter rates, summed per server, tagged by field."""
    window = f"{max(1, round(window_s * 1000))}ms"
    by = ", ".join(GROUP_BY)
    return " or ".join(
        f"label_replace(sum by ({by}) (rate({name}{_selector(extra, matcher)}[{window}])), "
        f'"{FIELD_LABEL}", "{field}", "", "")'
        for field, name, extra in COUNTERS
    )


def gpu_query(matcher: str = "") -> str:
    """One selector for every DCGM field the GPU sample and static facts use."""
    return names_selector(GPU_SERIES, matcher)


def _server_key(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(labels.get(k, "") for k in GROUP_BY)


def _dialect(name: str) -> Dialect | None:
    if name.startswith("trtllm_"):  # TensorRT-LLM's names have no colon
        return Dialect.TRTLLM
    prefix = name.split(":", 1)[0]
    try:
        return Dialect(prefix) if prefix in ("vllm", "sglang", "llamacpp", "trtllm") else None
    except ValueError:
        return None


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def derive_servers(
    gauges: Iterable[VectorSample],
    rates: Iterable[VectorSample],
    t: float,
    window_s: float,
) -> list[FleetServer]:
    """Servers and their windowed figures from the gauge and rate answers (pure).

    Args:
        gauges: The answer of :func:`server_gauges_query`.
        rates: The answer of :func:`server_rates_query`.
        t: The ``t`` of each :class:`MetricsWindow` (the caller's clock).
        window_s: The rate window, reported as ``dt``.
    """
    found: dict[tuple[str, ...], dict[str, Any]] = {}

    def entry(labels: Mapping[str, str], dialect: Dialect) -> dict[str, Any]:
        return found.setdefault(
            _server_key(labels),
            {"dialect": dialect, "model": None, "gauges": {}, "gauge_n": {}, "rates": {}},
        )

    for s in gauges:
        name = s.labels.get("__name__", "")
        dialect = _dialect(name)
        if dialect is None or not math.isfinite(s.value):  # NaN: a stale or empty gauge
            continue
        e = entry(s.labels, dialect)
        e["model"] = e["model"] or s.labels.get("model_name") or None
        e["gauges"][name] = e["gauges"].get(name, 0.0) + s.value
        e["gauge_n"][name] = e["gauge_n"].get(name, 0) + 1
    for s in rates:
        field = s.labels.get(FIELD_LABEL, "")
        dialect = _dialect(field)
        if dialect is None or not math.isfinite(s.value):
            continue
        entry(s.labels, dialect)["rates"][field.split(":", 1)[1]] = s.value
    out: list[FleetServer] = []
    for key, e in sorted(found.items()):
        labels = dict(zip(GROUP_BY, key, strict=True))
        dialect = e["dialect"]
        gauges_by_name = {n: v / e["gauge_n"][n] if n.startswith("sglang:spec") else v
                          for n, v in e["gauges"].items()}  # fmt: skip
        window, server_rates = _derive(dialect, e["rates"], gauges_by_name, t, window_s)
        out.append(
            FleetServer(
                instance=labels["instance"],
                job=labels["job"],
                dialect=dialect,
                model=e["model"],
                window=window,
                rates=server_rates,
                labels={k: labels[k] for k in POD_LABELS if labels[k]},
            )
        )
    return out


def _derive(
    dialect: Dialect,
    r: Mapping[str, float],
    g: Mapping[str, float],
    t: float,
    window_s: float,
) -> tuple[MetricsWindow, ServerRates]:
    v: dict[str, Any] = {}
    src: dict[str, str] = {}
    notes: dict[str, str] = {}
    running, waiting = _RUNNING[dialect]
    v["requests_running"] = g.get(running)
    v["requests_waiting"] = g.get(waiting)
    rates = ServerRates()
    p = dialect.value + ":"
    if dialect is Dialect.SGLANG:
        rates = _derive_sglang(r, g, v, src, notes)
    else:
        gen = r.get("gen")
        v["gen_tok_s"] = gen
        src["gen_tok_s"] = f"rate({_GEN[dialect]})"
        acc, drafts, dtok = r.get("acc"), r.get("drafts"), r.get("dtok")
        length = _ratio(acc, drafts)
        if length is not None and acc is not None and drafts is not None:
            v["accept_length"] = 1.0 + length
            src["accept_length"] = (
                '1 + rate(trtllm_spec_decode_accepted_tokens_total) / rate(…drafted{position="0"})'
                if dialect is Dialect.TRTLLM
                else f"1 + rate({p}spec_decode_num_accepted_tokens_total) / rate(…drafts_total)"
            )
            v["draft_acceptance_rate"] = _ratio(acc, dtok)
            src["draft_acceptance_rate"] = "rate(accepted_tokens) / rate(draft_tokens)"
            rates = ServerRates(gen, acc + drafts, drafts, acc, dtok)
        else:
            notes["accept_length"] = "no speculative steps in the window (or speculation off)"
            rates = ServerRates(gen_tok_s=gen)
        itl = _ratio(r.get("itl_sum"), r.get("itl_count"))
        if itl is None:
            itl = _ratio(r.get("tpot_sum"), r.get("tpot_count"))
        if dialect is Dialect.VLLM and itl is not None:
            v["step_latency_s"] = v["itl_s"] = itl
            src["step_latency_s"] = "rate(vllm:inter_token_latency_seconds_sum) / rate(…_count)"
        elif dialect is Dialect.TRTLLM:
            step = _ratio(r.get("decode_sum"), drafts)
            if step is not None:
                v["step_latency_s"] = step
                src["step_latency_s"] = (
                    'rate(trtllm_request_decode_time_seconds_sum) / rate(…drafted{position="0"})'
                )
            notes["counters"] = "TensorRT-LLM counters move only when a request finishes"
        elif dialect is Dialect.LLAMACPP:
            # each finished request's generation time over its steps: its tokens less the
            # drafts accepted (a step yields one token and the drafts it accepted), as the
            # live dialect derives it; requests are not counted, so each adds a step
            steps = None if gen is None else gen - (acc or 0.0)
            step = _ratio(r.get("gen_s"), steps) if steps is not None and steps > 0 else None
            if step is not None:
                v["step_latency_s"] = step
                src["step_latency_s"] = (
                    "rate(llamacpp:tokens_predicted_seconds_total) / (rate(…tokens_predicted_"
                    "total) − rate(…spec_decode_num_accepted_tokens_total))"
                )
            else:
                notes["step_latency_s"] = "no request finished in the window"
            notes["counters"] = "llama.cpp counters move only when a request finishes"
    window = MetricsWindow(
        t=t, dt=window_s, sources=src, notes=notes, **{k: x for k, x in v.items() if x is not None}
    )
    return window, rates


def _derive_sglang(
    r: Mapping[str, float],
    g: Mapping[str, float],
    v: dict[str, Any],
    src: dict[str, str],
    notes: dict[str, str],
) -> ServerRates:
    live = r.get("live")
    if live is not None:
        v["gen_tok_s"] = live + r.get("first", 0.0)
        src["gen_tok_s"] = 'rate(sglang:realtime_tokens_total{mode="decode"}) + rate(TTFT _count)'
    elif "sglang:gen_throughput" in g:
        v["gen_tok_s"] = g["sglang:gen_throughput"]
        src["gen_tok_s"] = "gauge sglang:gen_throughput (last 40 decode steps)"
    verify = r.get("verify")
    step_tokens = None
    if verify is not None and verify > 0 and r.get("gen") is not None:
        step_tokens = r["gen"] - r.get("req", 0.0)
        v["accept_length"] = step_tokens / verify
        src["accept_length"] = "(rate(generation_tokens) − rate(num_requests)) / rate(verify_calls)"
    elif "sglang:spec_accept_length" in g and g["sglang:spec_accept_length"] >= 1.0:
        v["accept_length"] = g["sglang:spec_accept_length"]
        src["accept_length"] = "gauge sglang:spec_accept_length (last 40 decode steps)"
    if "sglang:spec_accept_rate" in g:
        v["draft_acceptance_rate"] = g["sglang:spec_accept_rate"]
        src["draft_acceptance_rate"] = "gauge sglang:spec_accept_rate (last 40 decode steps)"
    itl = _ratio(r.get("itl_sum"), r.get("itl_count"))
    if itl is not None:
        v["itl_s"] = itl
        length = v.get("accept_length")
        v["step_latency_s"] = itl * length if length is not None else itl
        src["step_latency_s"] = "mean ITL × accept length"
    else:
        notes["step_latency_s"] = "no decode steps observed in the window"
    return ServerRates(v.get("gen_tok_s"), step_tokens, verify if step_tokens is not None else None)


def derive_gpus(samples: Iterable[VectorSample], t: float) -> list[FleetGpu]:
    """GPUs from the answer of :func:`gpu_query` (pure).

    Each exporter target's series go through the dcgm-exporter parser's own grouping and
    conversion (:func:`~specwatch.sources.dcgm.parse.group_gpus`), so a DCGM blank is an
    "n/s" marker and a field missing from the exporter's counters CSV says which one, exactly
    as when specwatch reads the exporter itself.
    """
    by_instance: dict[str, list[tuple[str, Mapping[str, str], float]]] = {}
    for s in samples:
        name = s.labels.get("__name__", "")
        by_instance.setdefault(s.labels.get("instance", ""), []).append((name, s.labels, s.value))
    out: list[FleetGpu] = []
    for instance, triples in sorted(by_instance.items()):
        for gpu in group_gpus(triples)[0]:
            index = gpu.gpu if gpu.gpu is not None else 0
            gpu_id = gpu.uuid or str(index)
            out.append(
                FleetGpu(
                    key=f"{instance}/{gpu_id}",
                    instance=instance,
                    hostname=gpu.hostname,
                    static=to_static(gpu, index),
                    sample=to_sample(gpu, index, t),
                    labels={k: gpu.k8s[k] for k in POD_LABELS if gpu.k8s.get(k)},
                )
            )
    return out


__all__ = [
    "COUNTERS",
    "FIELD_LABEL",
    "GPU_SERIES",
    "SERVER_GAUGES",
    "derive_gpus",
    "derive_servers",
    "gpu_query",
    "label_matcher",
    "names_selector",
    "server_gauges_query",
    "server_rates_query",
]
