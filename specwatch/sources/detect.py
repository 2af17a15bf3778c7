"""Detect what answers at an endpoint: dialect, version, model, speculative setup, metrics.

The dialect comes from ``/v1/models`` ``owned_by``, else from endpoints only one server has
(each dialect module says which); the dialect module then reads the rest. Probing never makes
the server do model work (see ``sources/dialects/sglang.py`` on SGLang's ``/health``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from specwatch.core.sanitize import clean_info
from specwatch.core.server import Dialect, ServerInfo, model_card
from specwatch.core.values import as_int
from specwatch.sources.dialects.base import ServerDialect, all_dialects, dialect_for, dialect_owning
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.server_errors import ServerError


@dataclass(frozen=True, slots=True)
class WaitStatus:
    """One attempt of :func:`wait_ready`."""

    attempt: int
    elapsed_s: float
    state: str
    """``refused`` | ``loading`` | ``error`` | ``ready``."""
    detail: str


async def _fingerprint(client: ServerClient) -> tuple[ServerDialect, dict[str, Any] | None]:
    """The dialect from ``/v1/models`` ``owned_by``, else from dialect-only endpoints."""
    found = model_card(await client.get_json("/v1/models"))
    card = dict(found) if found is not None else None
    if card is not None:
        owner = dialect_owning(str(card.get("owned_by", "")))
        if owner is not None:
            return owner, card
    # owned_by is missing or generic (a proxy, a renamed build): look for dialect endpoints
    for candidate in all_dialects():
        if await candidate.recognize(client):
            return candidate, card
    return dialect_for(Dialect.OPENAI), card


async def detect(client: ServerClient) -> ServerInfo:
    """Find out what server answers at the client's endpoint.

    Every string the server gave (model id, version, arguments, notes) is sanitised.

    Raises:
        ServerError: The server cannot be reached, refuses the key, or is still loading
            (``loading`` is true: HTTP 503).
    """
    dialect, card = await _fingerprint(client)
    model = str(card["id"]) if card and card.get("id") is not None else None
    max_len = as_int(card.get("max_model_len"), digits=True) if card else None
    return clean_info(await dialect.detect(client, model, max_len))


def metrics_off_reason(dialect: Dialect, status: int) -> str | None:
    """Why a ``/metrics`` answer of ``status`` means metrics are off; ``None`` when it does not."""
    return dialect_for(dialect).metrics_off_reason(status)


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


__all__ = ["WaitStatus", "detect", "metrics_off_reason", "wait_ready"]
