"""llama.cpp's llama-server: ``/props`` and ``/slots``, ``llamacpp:*`` metrics, ``/completion``.

The speculative setup is in ``/slots`` (``/props`` always says none). Its counters move only
when a request finishes; the ``llamacpp:spec_decode_*`` counters (vLLM's names) came with
llama.cpp PR #26389. Streams give one token per event; a verify step's events come as a burst,
and the final ``timings`` say how many decode steps there were.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from specwatch.core.server import Dialect, LatencyBucket, ServerInfo, SpecConfig
from specwatch.core.values import as_int
from specwatch.sources.dialects.base import ServerDialect, StreamPlan, StreamRequest
from specwatch.sources.dialects.llamacpp_timings import spec_from_timings
from specwatch.sources.identity.server_queries import (
    redact_launch_args,
    str_or_none,
    try_json,
)
from specwatch.sources.metrics.window_builder import (
    WindowBuilder,
    accept_length_from,
    delta,
    ratio,
    spec_lifetime,
    spec_names,
    spec_window,
)
from specwatch.sources.streams.accumulator import StreamAccumulator

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape

REASON_METRICS = "llama-server was started without --metrics"
END_ONLY = "llama.cpp counters move only when a request finishes"

_L = "llamacpp:"


def llamacpp_spec_from_slots(slots: Any) -> SpecConfig | None:
    """The speculative setup from ``/slots`` (``/props`` always says ``none``)."""
    if not isinstance(slots, list) or not slots:
        return None
    enabled = False
    types: list[str] = []
    n_max: int | None = None
    for slot in slots:
        if not isinstance(slot, Mapping):
            continue
        if slot.get("speculative") is True:
            enabled = True
        params = slot.get("params")
        if isinstance(params, Mapping):
            raw = params.get("speculative.types", params.get("speculative.type"))
            if isinstance(raw, str):
                raw_types = [t.strip() for t in raw.split(",")]
            elif isinstance(raw, list):
                raw_types = [str(t).strip() for t in raw]
            else:
                raw_types = []
            for t in raw_types:
                if t and t != "none" and t not in types:
                    types.append(t)
            n_max = n_max or as_int(params.get("speculative.n_max"), digits=True)
    if types:
        enabled = True
    return SpecConfig(
        enabled=enabled,
        algorithm=",".join(types) or None,
        num_draft_tokens=n_max,
        source="/slots",
    )


_PROPS_FACTS = ("model_path", "total_slots", "model_ftype")
_SLOT_FACTS = ("speculative.n_max", "speculative.n_min", "speculative.p_min")


def llamacpp_launch_facts(props: Mapping[str, Any], slots: Any) -> dict[str, Any]:
    """What ``/props`` and ``/slots`` say about how the server was started.

    Only settings fixed at start: the model, the slots and their context, the draft bounds
    where this build reports them (never ``speculative.types``: ``/slots`` names the type only
    once a request ran).
    """
    facts: dict[str, Any] = {k: props[k] for k in _PROPS_FACTS if props.get(k) is not None}
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and settings.get("n_ctx") is not None:
        facts["n_ctx"] = settings["n_ctx"]
    first = slots[0] if isinstance(slots, list) and slots else None
    params = first.get("params") if isinstance(first, Mapping) else None
    if isinstance(params, Mapping):
        facts.update({k: params[k] for k in _SLOT_FACTS if params.get(k) is not None})
    return {k: v for k, v in facts.items() if isinstance(v, (str, int, float, bool))}


def derive_llamacpp(
    b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
) -> None:
    """llama.cpp's window: counters that move when a request finishes."""
    b.set("requests_running", cur.total(_L + "requests_processing"), _L + "requests_processing")
    b.set("requests_waiting", cur.total(_L + "requests_deferred"), _L + "requests_deferred")
    longest = cur.total(_L + "n_tokens_max")
    if longest is not None and math.isfinite(longest) and longest > 0:
        b.values["largest_context"] = LatencyBucket(1.0, longest, longest)
        b.sources["largest_context"] = f"{_L}n_tokens_max (the longest sequence in a slot)"
    spec_counters = spec_lifetime(b, cur, _L)
    if prev is None:
        return
    _step_time(b, cur, prev, spec_counters or not info.spec.enabled)
    tokens = delta(cur, prev, _L + "tokens_predicted_total")
    if tokens is not None and tokens > 0:
        b.set(
            "tokens", tokens, f"Δ{_L}tokens_predicted_total (requests that finished in the window)"
        )
        b.set(
            "gen_tok_s",
            ratio(tokens, dt),
            f"Δ{_L}tokens_predicted_total / Δt (requests that finished in the window)",
        )
        b.notes["counters"] = END_ONLY
    else:
        b.note("gen_tok_s", f"{END_ONLY}; none finished in this window")
        b.note("tokens", f"{END_ONLY}; none finished in this window")
    if not spec_counters:
        why = (
            "this llama-server build has no speculative counters (llama.cpp PR #26389)"
            if info.spec.enabled
            else "no llamacpp:spec_decode_* counters (speculation off or an older build)"
        )
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
        return
    if spec_window(b, cur, prev, _L) <= 0:
        b.note("accept_length", f"{END_ONLY}; no speculative request finished")
        b.note("draft_acceptance_rate", f"{END_ONLY}; no speculative request finished")


def _step_time(b: WindowBuilder, cur: Scrape, prev: Scrape, steps_known: bool) -> None:
    """Mean generation step time of the requests that finished in the window.

    Each finished request's generation time spans ``predicted_n − 1 − accepted`` target decode
    steps (its first token comes from the prompt); the number of requests is not exported, so
    one is assumed, which counts a step too many for every further request that finished.
    """
    tokens = delta(cur, prev, _L + "tokens_predicted_total")
    seconds = delta(cur, prev, _L + "tokens_predicted_seconds_total")
    if not steps_known:
        b.note("step_latency_s", "speculating, but no accepted-token counter: steps unknown")
        return
    accepted = delta(cur, prev, spec_names(_L)[0]) or 0.0
    if tokens is None or seconds is None or tokens - accepted - 1.0 <= 0:
        b.note("step_latency_s", f"{END_ONLY}; none finished in this window")
        return
    steps = tokens - accepted - 1.0
    _note_precision(b, cur)
    where = f"{_L}tokens_predicted_total − {spec_names(_L)[0]} − 1 (one request assumed)"
    b.set("decode_steps", steps, f"Δ({where})")
    b.set("step_latency_s", seconds / steps, f"Δ{_L}tokens_predicted_seconds_total / Δ({where})")


def _note_precision(b: WindowBuilder, cur: Scrape) -> None:
    """llama-server writes its counters with C++'s default 6 significant digits: from 10^6 up
    a window's delta is rounded to the counter's last printed digit."""
    for name in ("tokens_predicted_total", "tokens_predicted_seconds_total"):
        value = cur.total(_L + name)
        if value is not None and value >= 1e6:
            digit = 10.0 ** (math.floor(math.log10(value)) - 5)
            b.notes["precision"] = (
                f"llama-server prints {_L}{name} with 6 significant digits ({value:.6g}): "
                f"each window's delta is known to ±{digit:g} only"
            )
            return


def llamacpp_request(request: StreamRequest) -> dict[str, Any]:
    """The native ``/completion`` body."""
    return {
        "prompt": request.prompt,
        "n_predict": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
        "timings_per_token": True,
        "ignore_eos": request.ignore_eos,
    }


def parse_llamacpp_chunk(acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
    """Read one native ``/completion`` event (one token per event)."""
    timings = obj.get("timings")
    if isinstance(timings, Mapping):
        acc.server_stats["timings"] = dict(timings)
    evaluated = as_int(obj.get("tokens_evaluated"))
    if evaluated is not None:
        acc.prompt_tokens = evaluated
    tokens = obj.get("tokens")
    new = len(tokens) if isinstance(tokens, list) else 0
    predicted = as_int(obj.get("tokens_predicted"))
    if predicted is not None:
        count = predicted
    elif new:
        count = acc.count + new
        acc.count_source = "tokens (one per event)"
    elif isinstance(timings, Mapping) and (final := as_int(timings.get("predicted_n"))) is not None:
        count = final
    else:
        count = acc.count
    acc.arrive(t, count)
    if obj.get("stop") is True:
        acc.done = True
        acc.final_tokens = count
        stop_type = obj.get("stop_type")
        acc.finish_reason = "length" if stop_type == "limit" else str(stop_type or "stop")


class LlamaCppDialect(ServerDialect):
    """llama.cpp's llama-server."""

    dialect = Dialect.LLAMACPP
    owned_by: ClassVar[tuple[str, ...]] = ("llamacpp", "llama.cpp", "llama-cpp")
    fingerprint_order = 10
    wanted_families: ClassVar[tuple[str, ...]] = tuple(
        _L + name
        for name in (
            "requests_processing",
            "requests_deferred",
            "tokens_predicted",
            "prompt_tokens",
            "prompt_seconds",
            "n_decode",
            "n_tokens_max",
            "spec_decode_",
        )
    )
    metrics_off_statuses: ClassVar[tuple[int, ...]] = (404, 501)
    metrics_off_text = REASON_METRICS
    stream_in_bursts = True

    async def recognize(self, client: ServerClient) -> bool:
        """``/props`` with ``build_info`` or ``total_slots``."""
        props = await try_json(client, "/props")
        return isinstance(props, Mapping) and ("build_info" in props or "total_slots" in props)

    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Build and model from ``/props``, speculative setup from ``/slots``."""
        notes: dict[str, str] = {}
        props = await try_json(client, "/props")
        props = props if isinstance(props, Mapping) else {}
        version = str_or_none(props.get("build_info"))
        model = (
            model or str_or_none(props.get("model_alias")) or str_or_none(props.get("model_path"))
        )
        settings = props.get("default_generation_settings")
        if max_len is None and isinstance(settings, Mapping):
            max_len = as_int(settings.get("n_ctx"), digits=True)
        slots = await try_json(client, "/slots")
        spec = llamacpp_spec_from_slots(slots)
        if spec is None:
            spec = SpecConfig(enabled=None, source="")
            notes["speculative"] = (
                "unknown: /slots is disabled (--no-slots) and /props always says none; "
                "a request's timings.draft_n shows it"
            )
        launch = llamacpp_launch_facts(props, slots)
        metrics_enabled, metrics_reason, scrape = await self.metrics_state(
            client, props.get("endpoint_metrics") is False
        )
        if scrape is not None and not scrape.has_prefix("llamacpp:spec_decode_"):
            notes["spec_metrics"] = (
                "this llama-server build has no llamacpp:spec_decode_* counters "
                "(added by llama.cpp PR #26389)"
            )
        return ServerInfo(
            base_url=client.endpoint.base_url,
            dialect=Dialect.LLAMACPP,
            version=version,
            model=model,
            spec=spec,
            metrics_enabled=metrics_enabled,
            metrics_reason=metrics_reason,
            max_model_len=max_len,
            launch_args=redact_launch_args(launch, client) if launch else None,
            notes=notes,
        )

    derive_window = staticmethod(derive_llamacpp)

    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """Native ``/completion`` with ``timings_per_token``."""
        return StreamPlan(
            attempts=(("/completion", llamacpp_request(request)),),
            count_source="tokens_predicted (timings_per_token)",
        )

    parse_chunk = staticmethod(parse_llamacpp_chunk)

    def spec_figures(
        self, info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
    ) -> tuple[float | None, float | None]:
        """From the final ``timings``."""
        return spec_from_timings(stats, notes)

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """``1 + Δaccepted_tokens / Δdrafts``."""
        accepted, drafts, _ = spec_names(_L)
        return accept_length_from(deltas, accepted, drafts, 1.0)


DIALECT = LlamaCppDialect()

__all__ = [
    "DIALECT",
    "END_ONLY",
    "REASON_METRICS",
    "LlamaCppDialect",
    "derive_llamacpp",
    "llamacpp_launch_facts",
    "llamacpp_spec_from_slots",
]
