"""Detect what answers at an endpoint: dialect, version, model, speculative setup, metrics.

Probing never makes the server do model work: on SGLang ``/health`` and ``/health_generate`` run
a generation (>= 0.4.10), so they are never called; readiness comes from ``/ready``,
``/model_info`` and ``/v1/models``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.core.values import as_int
from specwatch.sources.client import ServerClient, ServerError
from specwatch.sources.endpoint import redact
from specwatch.sources.prom import Scrape, parse_metrics

FORBIDDEN_SGLANG_PATHS = ("/health", "/health_generate")
"""SGLang endpoints that run a generation; specwatch never requests them."""

REASON_SGLANG_METRICS = "SGLang was started without --enable-metrics"
REASON_LLAMACPP_METRICS = "llama-server was started without --metrics"
REASON_VLLM_METRICS = "vLLM was started with --disable-log-stats (/metrics has no vllm:* series)"

_METRICS_OFF: dict[Dialect, tuple[tuple[int, ...], str]] = {
    Dialect.SGLANG: ((404,), REASON_SGLANG_METRICS),
    Dialect.LLAMACPP: ((404, 501), REASON_LLAMACPP_METRICS),
}
"""The ``/metrics`` statuses that mean a server runs without metrics, and the reason to show."""

_SECRET_KEY = re.compile(r"(?i)(api[_-]?key|secret|password|(^|_)token$)")


@dataclass(frozen=True, slots=True)
class WaitStatus:
    """One attempt of :func:`wait_ready`."""

    attempt: int
    elapsed_s: float
    state: str
    """``refused`` | ``loading`` | ``error`` | ``ready``."""
    detail: str


def _dialect_from_owner(owner: str) -> Dialect | None:
    owner = owner.lower()
    if owner == "sglang":
        return Dialect.SGLANG
    if owner == "vllm":
        return Dialect.VLLM
    if owner in ("llamacpp", "llama.cpp", "llama-cpp"):
        return Dialect.LLAMACPP
    return None


def redact_launch_args(args: Mapping[str, Any], client: ServerClient) -> dict[str, Any]:
    """Launch arguments with secrets (API keys, tokens, passwords) replaced by ``***``."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if _SECRET_KEY.search(key) and value not in (None, "", False):
            out[key] = "***"
        elif isinstance(value, str):
            out[key] = redact(value, client.endpoint)
        elif isinstance(value, Mapping):
            out[key] = redact_launch_args(value, client)
        elif isinstance(value, list):
            out[key] = [redact(v, client.endpoint) if isinstance(v, str) else v for v in value]
        else:
            out[key] = value
    return out


async def _try_json(client: ServerClient, path: str) -> Any | None:
    """JSON at ``path``, or ``None`` on 404/405/501 or a non-JSON answer."""
    try:
        return await client.get_json(path)
    except ServerError as exc:
        if exc.kind == "garbage" or (exc.kind == "http" and exc.status in (404, 405, 501)):
            return None
        raise


async def _fingerprint(client: ServerClient) -> tuple[Dialect, dict[str, Any] | None]:
    """The dialect from ``/v1/models`` ``owned_by``, else from dialect-only endpoints."""
    models = await client.get_json("/v1/models")
    card: dict[str, Any] | None = None
    if isinstance(models, Mapping):
        data = models.get("data")
        if isinstance(data, list) and data and isinstance(data[0], Mapping):
            card = dict(data[0])
    if card is not None:
        dialect = _dialect_from_owner(str(card.get("owned_by", "")))
        if dialect is not None:
            return dialect, card
    # owned_by is missing or generic (a proxy, a renamed build): look for dialect endpoints
    props = await _try_json(client, "/props")
    if isinstance(props, Mapping) and ("build_info" in props or "total_slots" in props):
        return Dialect.LLAMACPP, card
    for path in ("/server_info", "/get_server_info"):
        info = await _try_json(client, path)
        if isinstance(info, Mapping) and (
            "speculative_algorithm" in info or "internal_states" in info or "decode" in info
        ):
            return Dialect.SGLANG, card
    version = await _try_json(client, "/version")
    if isinstance(version, Mapping) and isinstance(version.get("version"), str):
        return Dialect.VLLM, card
    return Dialect.OPENAI, card


async def detect(client: ServerClient) -> ServerInfo:
    """Find out what server answers at the client's endpoint.

    Raises:
        ServerError: The server cannot be reached, refuses the key, or is still loading
            (``loading`` is true: HTTP 503).
    """
    dialect, card = await _fingerprint(client)
    model = str(card["id"]) if card and card.get("id") is not None else None
    max_len = as_int(card.get("max_model_len"), digits=True) if card else None
    if dialect is Dialect.SGLANG:
        return await _detect_sglang(client, model, max_len)
    if dialect is Dialect.VLLM:
        return await _detect_vllm(client, model, max_len)
    if dialect is Dialect.LLAMACPP:
        return await _detect_llamacpp(client, model, max_len)
    return await _detect_openai(client, model, max_len)


def metrics_off_reason(dialect: Dialect, status: int) -> str | None:
    """Why a ``/metrics`` answer of ``status`` means metrics are off; ``None`` when it does not."""
    statuses, reason = _METRICS_OFF.get(dialect, ((), ""))
    return reason if status in statuses else None


async def _metrics_state(
    client: ServerClient, dialect: Dialect, off_by_config: bool
) -> tuple[bool | None, str | None, Scrape | None]:
    """``(metrics_enabled, metrics_reason, scrape)``; no request when the config says off."""
    if off_by_config:
        return False, _METRICS_OFF[dialect][1], None
    status, scrape, detail = await _scrape(client)
    reason = metrics_off_reason(dialect, status)
    if reason is not None:
        return False, reason, None
    if scrape is None:
        return None, detail, None
    return True, None, scrape


async def _scrape(client: ServerClient) -> tuple[int, Scrape | None, str]:
    """``(status, parsed body or None, one-line detail)`` of ``GET /metrics``."""
    try:
        response = await client.get("/metrics", check=False)
    except ServerError as exc:
        return 0, None, str(exc)
    if response.status_code >= 400:
        return response.status_code, None, f"/metrics answered HTTP {response.status_code}"
    return response.status_code, parse_metrics(response.text), ""


# --- SGLang ---------------------------------------------------------------------------------


async def _detect_sglang(
    client: ServerClient, model: str | None, max_len: int | None
) -> ServerInfo:
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
    for path in ("/server_info", "/get_server_info"):
        info = await _try_json(client, path)
        if isinstance(info, Mapping):
            source = path
            break
    if isinstance(info, Mapping) and isinstance(info.get("decode"), list) and info["decode"]:
        notes["topology"] = "PD disaggregation: reading the decode server's arguments"
        first = info["decode"][0]
        info = first if isinstance(first, Mapping) else info
    args: Mapping[str, Any] = info if isinstance(info, Mapping) else {}
    if not args:
        notes["server_info"] = "neither /server_info nor /get_server_info answered"
    version = str(args["version"]) if args.get("version") is not None else None
    model = (
        model or _str_or_none(args.get("served_model_name")) or _str_or_none(args.get("model_path"))
    )
    algorithm = _str_or_none(args.get("speculative_algorithm"))
    if args:
        spec = SpecConfig(
            enabled=algorithm is not None and algorithm.upper() != "NONE",
            algorithm=algorithm,
            num_steps=as_int(args.get("speculative_num_steps"), digits=True),
            num_draft_tokens=as_int(args.get("speculative_num_draft_tokens"), digits=True),
            topk=as_int(args.get("speculative_eagle_topk"), digits=True),
            draft_model=_str_or_none(args.get("speculative_draft_model_path")),
            source=source,
        )
    else:
        spec = SpecConfig(enabled=None, source="")
    launch = {k: v for k, v in args.items() if k != "internal_states"}
    metrics_enabled, metrics_reason, _ = await _metrics_state(
        client, Dialect.SGLANG, args.get("enable_metrics") is False
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


def _str_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


# --- vLLM -----------------------------------------------------------------------------------


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


async def _detect_vllm(client: ServerClient, model: str | None, max_len: int | None) -> ServerInfo:
    notes: dict[str, str] = {}
    version_body = await _try_json(client, "/version")
    version = (
        str(version_body["version"])
        if isinstance(version_body, Mapping) and version_body.get("version") is not None
        else None
    )
    _, scrape, detail = await _scrape(client)
    metrics_enabled: bool | None
    metrics_reason: str | None = None
    if scrape is not None and scrape.has_prefix("vllm:"):
        metrics_enabled = True
        spec = vllm_spec_from_metrics(scrape)
    else:
        if scrape is not None:
            metrics_enabled, metrics_reason = False, REASON_VLLM_METRICS
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
        notes=notes,
    )


# --- llama.cpp ------------------------------------------------------------------------------


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


async def _detect_llamacpp(
    client: ServerClient, model: str | None, max_len: int | None
) -> ServerInfo:
    notes: dict[str, str] = {}
    props = await _try_json(client, "/props")
    props = props if isinstance(props, Mapping) else {}
    version = _str_or_none(props.get("build_info"))
    model = model or _str_or_none(props.get("model_alias")) or _str_or_none(props.get("model_path"))
    settings = props.get("default_generation_settings")
    if max_len is None and isinstance(settings, Mapping):
        max_len = as_int(settings.get("n_ctx"), digits=True)
    slots = await _try_json(client, "/slots")
    spec = llamacpp_spec_from_slots(slots)
    if spec is None:
        spec = SpecConfig(enabled=None, source="")
        notes["speculative"] = (
            "unknown: /slots is disabled (--no-slots) and /props always says none; "
            "a request's timings.draft_n shows it"
        )
    metrics_enabled, metrics_reason, scrape = await _metrics_state(
        client, Dialect.LLAMACPP, props.get("endpoint_metrics") is False
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
        notes=notes,
    )


# --- generic OpenAI -------------------------------------------------------------------------


async def _detect_openai(
    client: ServerClient, model: str | None, max_len: int | None
) -> ServerInfo:
    status, scrape, detail = await _scrape(client)
    metrics_enabled: bool | None
    if scrape is not None and scrape.samples:
        metrics_enabled, reason = True, None
    elif status in (404, 405, 501):
        metrics_enabled, reason = False, "this server has no /metrics endpoint"
    else:
        metrics_enabled, reason = False, detail or "no usable /metrics"
    return ServerInfo(
        base_url=client.endpoint.base_url,
        dialect=Dialect.OPENAI,
        model=model,
        spec=SpecConfig(enabled=None, source=""),
        metrics_enabled=metrics_enabled,
        metrics_reason=reason,
        max_model_len=max_len,
        notes={
            "speculative": "unknown: a generic OpenAI-compatible server does not expose it",
            "version": "unknown: a generic OpenAI-compatible server does not expose it",
        },
    )


# --- waiting --------------------------------------------------------------------------------


async def wait_ready(
    client: ServerClient,
    on_attempt: Callable[[WaitStatus], None] | None = None,
    timeout_s: float | None = None,
    interval_s: float = 1.0,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ServerInfo:
    """Detect the server, retrying while it is down or loading.

    Each attempt is reported through ``on_attempt`` (attempt number, elapsed seconds, state
    ``refused`` / ``loading`` / ``error``, then ``ready``). Attempts are ``interval_s`` apart.

    Raises:
        ServerError: ``timeout_s`` passed without the server becoming ready (the message has
            the attempt count, elapsed time and the last problem), or an error waiting cannot
            fix (a wrong API key, TLS trouble).
    """
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            info = await detect(client)
        except ServerError as exc:
            elapsed = clock() - start
            if exc.kind == "refused":
                state = "refused"
            elif exc.loading:
                state = "loading"
            else:
                state = "error"
            if on_attempt is not None:
                on_attempt(WaitStatus(attempt, elapsed, state, str(exc)))
            if not exc.retryable:
                raise
            if timeout_s is not None and elapsed + interval_s > timeout_s:
                raise ServerError(
                    f"{client.endpoint.base_url} not ready after {attempt} attempts in "
                    f"{elapsed:.1f} s; last: {exc}",
                    kind=exc.kind,
                    status=exc.status,
                    url=exc.url,
                ) from None
            await sleep(interval_s)
            continue
        if on_attempt is not None:
            detail = f"{info.dialect.value} {info.version or ''}".strip()
            on_attempt(WaitStatus(attempt, clock() - start, "ready", detail))
        return info


__all__ = [
    "FORBIDDEN_SGLANG_PATHS",
    "REASON_LLAMACPP_METRICS",
    "REASON_SGLANG_METRICS",
    "REASON_VLLM_METRICS",
    "WaitStatus",
    "detect",
    "llamacpp_spec_from_slots",
    "metrics_off_reason",
    "redact_launch_args",
    "vllm_spec_from_metrics",
    "wait_ready",
]
