"""llama.cpp's llama-server: ``/props`` and ``/slots``, ``llamacpp:*`` metrics, ``/completion``.

The speculative setup is in ``/slots`` (``/props`` always says none). Its token and speculative
counters move only when a request finishes; the ``llamacpp:spec_decode_*`` counters (vLLM's
names) came with llama.cpp PR #26389. The token rate is live all the same: ``/slots``, read just
before each scrape, says how many tokens each running request has decoded so far, and the
tokens generated since start are the counter plus those (:func:`generated`). Streams give one
token per event; a verify step's events come as a burst, and the final ``timings`` say how many
decode steps there were.

A router (``/props`` ``role: router``) is read through one of its models
(:mod:`~specwatch.sources.dialects.llamacpp_router`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from specwatch.core.launch_config import REPORTED_ARGV, launch_config, spec_with_arguments
from specwatch.core.server import Dialect, LatencyBucket, ServerInfo, SpecConfig
from specwatch.core.values import as_int
from specwatch.sources.dialects.base import (
    ServerDialect,
    StreamPlan,
    StreamRequest,
    WindowBuilder,
    accept_length_from,
    delta,
    ratio,
    set_tokens_per_step,
    spec_lifetime,
    spec_names,
    spec_window,
)
from specwatch.sources.dialects.llamacpp_router import routed_model
from specwatch.sources.dialects.llamacpp_timings import spec_from_timings
from specwatch.sources.identity.server_queries import (
    redact_launch_args,
    str_or_none,
    try_json,
)
from specwatch.sources.stream_steps import StreamAccumulator

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape

REASON_METRICS = "llama-server was started without --metrics"
END_ONLY = "llama.cpp counters move only when a request finishes"
REQUEST_END = "request_end"
"""The note naming the figures that describe whole requests which ended in the window (the
server counts them only then), not the window: ``"name, name: why"``."""
SLOTS_OFF_RETRY = 60
"""Scrapes between two asks of a ``/slots`` that answered it is off or not understood."""
MAX_SLOTS = 4096
"""Slots read of one ``/slots`` answer."""

_L = "llamacpp:"
_AT_REQUEST_END = (
    "accept_length",
    "draft_acceptance_rate",
    "step_latency_s",
    "decode_steps",
    "tokens_per_step",
)
_LIVE = (
    f"{_L}tokens_predicted_total (requests that ended) + /slots next_token.n_decoded "
    "(requests running), read just before it"
)


@dataclass(frozen=True, slots=True)
class RunningSlot:
    """One slot processing a request, as ``/slots`` shows it."""

    task: int
    """``id_task`` (``-1`` when not given)."""
    decoded: int
    """Tokens generated so far (``next_token[0].n_decoded``)."""
    remain: int
    """Tokens left before its limit (``n_remain``; ``-1``: no limit)."""


@dataclass(frozen=True, slots=True)
class SlotProgress:
    """``/slots`` as the token rate reads it: the slots processing a request."""

    running: tuple[RunningSlot, ...] = ()
    off: str = ""
    """Why there is no reading (``/slots`` disabled, an answer not understood); empty if read."""
    retry_in: int = 0
    """Scrapes left before ``/slots`` is asked again after it was ``off``."""


IDLE = SlotProgress()
"""No request running, as the last ``/slots`` and ``/metrics`` said (``/slots`` not asked)."""


async def _read_slots(client: ServerClient) -> SlotProgress:
    """``/slots`` (bounded, passive) as the token rate reads it."""
    from specwatch.sources.http.client import SLOTS_LIMIT_BYTES
    from specwatch.sources.http.server_errors import ServerError

    try:
        response = await client.get("/slots", check=False, limit=SLOTS_LIMIT_BYTES)
    except ServerError as exc:
        return SlotProgress(off=f"/slots not read: {exc}")
    if response.status_code >= 400:
        return SlotProgress(
            off=f"/slots answered HTTP {response.status_code} (started with --no-slots?)",
            retry_in=SLOTS_OFF_RETRY,
        )
    try:
        return slot_progress(client.decode_json(response.content, "/slots"))
    except ServerError:
        return SlotProgress(off="/slots answered no JSON", retry_in=SLOTS_OFF_RETRY)


def _asleep(props: Any) -> bool:
    """Whether a ``/props`` answer says the server sleeps (``--sleep-idle-seconds``)."""
    return isinstance(props, Mapping) and props.get("is_sleeping") is True


def slot_progress(slots: Any) -> SlotProgress:
    """The running slots of a ``/slots`` answer (only whole numbers are taken from it)."""
    if not isinstance(slots, list):
        return SlotProgress(off="/slots answered no list of slots", retry_in=SLOTS_OFF_RETRY)
    running: list[RunningSlot] = []
    for slot in slots[:MAX_SLOTS]:
        if not isinstance(slot, Mapping) or slot.get("is_processing") is not True:
            continue
        tokens = slot.get("next_token")
        first = tokens[0] if isinstance(tokens, list) and tokens else None
        decoded = as_int(first.get("n_decoded")) if isinstance(first, Mapping) else None
        if decoded is None or decoded < 0:
            return SlotProgress(
                off="/slots shows no next_token.n_decoded for a running slot (an older build)",
                retry_in=SLOTS_OFF_RETRY,
            )
        remain = as_int(first.get("n_remain")) if isinstance(first, Mapping) else None
        task = as_int(slot.get("id_task"))
        running.append(
            RunningSlot(-1 if task is None else task, decoded, -1 if remain is None else remain)
        )
    return SlotProgress(tuple(running))


def _nearest_end(slot: RunningSlot) -> tuple[float, int, int]:
    return (slot.remain if slot.remain >= 0 else math.inf, -slot.decoded, slot.task)


def generated(scrape: Scrape, progress: Any) -> float | None:
    """Tokens generated since start as of ``scrape``: ``tokens_predicted_total`` (requests that
    ended) plus what the running slots of ``progress`` (read just before it) had decoded.

    A request that ended between the two reads is in both: the scrape's own count of processing
    requests says how many did, and the running slots nearest their limit are taken as those.
    ``None`` without both readings.
    """
    counted = scrape.total(_L + "tokens_predicted_total")
    if counted is None or not isinstance(progress, SlotProgress) or progress.off:
        return None
    running = sorted(progress.running, key=_nearest_end)
    processing = scrape.total(_L + "requests_processing")
    ended = len(running) - int(processing) if processing is not None else 0
    return counted + sum(r.decoded for r in running[max(0, ended) :])


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
    """llama.cpp's window: a live token rate from the counters and ``/slots``; step time and
    acceptance from the counters, which move when a request finishes."""
    b.set("requests_running", cur.total(_L + "requests_processing"), _L + "requests_processing")
    b.set("requests_waiting", cur.total(_L + "requests_deferred"), _L + "requests_deferred")
    longest = cur.total(_L + "n_tokens_max")
    if longest is not None and math.isfinite(longest) and longest > 0:
        b.values["largest_context"] = LatencyBucket(1.0, longest, longest)
        b.sources["largest_context"] = f"{_L}n_tokens_max (the longest sequence in a slot)"
    spec_counters = spec_lifetime(b, cur, _L)
    if prev is None:
        return
    prompt = _L + "prompt_tokens_total"
    processed = delta(cur, prev, prompt)
    b.set("prompt_tok_s", ratio(processed, dt), f"Δ{prompt} / Δt")
    cached = _L + "prompt_tokens_cached_total"  # the prompt tokens it did not process again
    if (hits := delta(cur, prev, cached)) is not None and processed is not None:
        b.set(
            "prefix_cache_hit_rate",
            ratio(hits, hits + processed),
            f"Δ{cached} / Δ({cached} + {prompt})",
        )
    _token_rate(b, cur, prev, dt)
    ended = delta(cur, prev, _L + "tokens_predicted_total") or 0.0
    _step_time(b, cur, prev, spec_counters or not info.spec.enabled)
    if not spec_counters:
        why = (
            "this llama-server build has no speculative counters (llama.cpp PR #26389)"
            if info.spec.enabled
            else "no llamacpp:spec_decode_* counters (speculation off or an older build)"
        )
        b.note("accept_length", why)
        b.note("draft_acceptance_rate", why)
    elif spec_window(b, cur, prev, _L) <= 0:
        b.note("accept_length", f"{END_ONLY}; no speculative request finished")
        b.note("draft_acceptance_rate", f"{END_ONLY}; no speculative request finished")
    set_tokens_per_step(b)
    held = [n for n in _AT_REQUEST_END if n in b.values]
    if held and ended > 0:
        b.notes[REQUEST_END] = (
            f"{', '.join(held)}: of the requests that ended in the window, over their whole run "
            "(llama.cpp counts them only when a request ends)"
        )


def _token_rate(b: WindowBuilder, cur: Scrape, prev: Scrape, dt: float) -> None:
    """Generated tokens and tok/s over the window: live from :func:`generated`, else from the
    counter alone (requests that ended in the window)."""
    now, before = generated(cur, b.progress), generated(prev, b.prev_progress)
    if now is not None and before is not None:
        # Below zero only when the earlier reading counted a request twice that the
        # processing count could not tell (one ended and another began between its two reads).
        tokens = max(0.0, now - before)
        b.set("tokens", tokens, f"Δ({_LIVE})")
        b.set("gen_tok_s", ratio(tokens, dt), f"Δ({_LIVE}) / Δt")
        return
    progress = b.progress if isinstance(b.progress, SlotProgress) else None
    why = progress.off if progress is not None and progress.off else "/slots not read"
    b.notes["counters"] = f"{END_ONLY}; no live rate: {why}"
    finished = delta(cur, prev, _L + "tokens_predicted_total")
    running = max(
        cur.total(_L + "requests_processing") or 0.0, prev.total(_L + "requests_processing") or 0.0
    )
    if finished is not None and (finished > 0 or running <= 0):
        where = "requests that finished in the window"
        b.set("tokens", finished, f"Δ{_L}tokens_predicted_total ({where})")
        b.set("gen_tok_s", ratio(finished, dt), f"Δ{_L}tokens_predicted_total / Δt ({where})")
    else:
        b.note("gen_tok_s", f"{END_ONLY}; none finished in this window")
        b.note("tokens", f"{END_ONLY}; none finished in this window")


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
    metrics_prefix = _L
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
        argv: tuple[str, ...] = ()
        if props.get("role") == "router":
            model, argv = await routed_model(client, notes)
            props = await try_json(client, "/props")  # the routed model's own
            props = props if isinstance(props, Mapping) else {}
        version = str_or_none(props.get("build_info"))
        model = (
            model or str_or_none(props.get("model_alias")) or str_or_none(props.get("model_path"))
        )
        settings = props.get("default_generation_settings")
        if max_len is None and isinstance(settings, Mapping):
            max_len = as_int(settings.get("n_ctx"), digits=True)
        # /slots wakes a sleeping server (--sleep-idle-seconds): it reloads the model
        sleeping = _asleep(props)
        slots = None if sleeping else await try_json(client, "/slots")
        spec = llamacpp_spec_from_slots(slots)
        if spec is None:
            spec = SpecConfig(enabled=None, source="")
            notes["speculative"] = (
                "unknown while the server sleeps (--sleep-idle-seconds): /slots would wake it"
                if sleeping
                else "unknown: /slots is disabled (--no-slots) and /props always says none; "
                "a request's timings.draft_n shows it"
            )
        launch: dict[str, Any] = llamacpp_launch_facts(props, slots)
        if argv:  # the router's own process is not this model's server: its arguments are
            launch[REPORTED_ARGV] = list(argv)
            spec = spec_with_arguments(spec, launch_config("llamacpp", (), launch, spec))
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

    async def progress(
        self, client: ServerClient, info: ServerInfo, last: Any, scrape: Scrape | None
    ) -> Any:
        """``/slots`` (bounded, passive): the tokens each running request decoded so far; after
        an answer saying it is off, asked again only every :data:`SLOTS_OFF_RETRY` scrapes.

        Not asked of an idle server (the last ``/slots`` and the last scrape both had nothing
        running): llama-server counts a ``/slots`` read as activity, so reading it at every
        scrape kept a server started with ``--sleep-idle-seconds`` from ever sleeping, and
        woke (reloaded) one that slept; ``/metrics`` and ``/props`` do neither. A request that
        begins shows in the scrape's ``requests_processing``, and ``/slots`` is read just after
        it (:meth:`progress_after`) and before each scrape from then on. A watch's first read
        asks ``/props`` whether the server sleeps (it runs nothing then) before ``/slots``.
        """
        if isinstance(last, SlotProgress) and last.off and last.retry_in > 0:
            return replace(last, retry_in=last.retry_in - 1)
        if (
            isinstance(last, SlotProgress)
            and not last.off
            and not last.running
            and scrape is not None
            and scrape.total(_L + "requests_processing") == 0
        ):
            return IDLE
        if last is None and _asleep(await try_json(client, "/props")):  # a new or renewed watch
            return IDLE
        return await _read_slots(client)

    async def progress_after(
        self, client: ServerClient, info: ServerInfo, progress: Any, scrape: Scrape
    ) -> Any:
        """Where ``/slots`` was skipped as idle and the scrape shows a request running (it
        began since the last scrape), ``/slots`` read now: the rate is live from the request's
        first window. A request that ended between the two reads is in neither until the next
        window's counter."""
        if progress is IDLE and (scrape.total(_L + "requests_processing") or 0) > 0:
            return await _read_slots(client)
        return progress

    derive_window = staticmethod(derive_llamacpp)

    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """Native ``/completion`` with ``timings_per_token`` (to a router: naming its model)."""
        body = llamacpp_request(request)
        if info.routed and info.model:
            body["model"] = info.model
        return StreamPlan(
            attempts=(("/completion", body),),
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
    "REQUEST_END",
    "LlamaCppDialect",
    "RunningSlot",
    "SlotProgress",
    "derive_llamacpp",
    "generated",
    "llamacpp_launch_facts",
    "llamacpp_spec_from_slots",
    "slot_progress",
]
