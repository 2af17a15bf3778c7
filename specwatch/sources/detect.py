"""Detect what answers at an endpoint: dialect, version, model, speculative setup, metrics.

The dialect comes from ``/v1/models`` ``owned_by``, else from endpoints only one server has
(each dialect module says which); the dialect module then reads the rest. Probing never makes
the server do model work (see ``sources/dialects/sglang.py`` on SGLang's ``/health``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from specwatch.core.sanitize import clean_info
from specwatch.core.server import KEYLESS_NOTE, Dialect, ServerInfo, model_card
from specwatch.core.values import as_int
from specwatch.sources.dialects.base import ServerDialect, all_dialects, dialect_for, dialect_owning
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.server_queries import scrape_metrics

if TYPE_CHECKING:
    from specwatch.sources.metrics.prom import Scrape


@dataclass(frozen=True, slots=True)
class WaitStatus:
    """One attempt of :func:`wait_ready`."""

    attempt: int
    elapsed_s: float
    state: str
    """``refused`` | ``loading`` | ``error`` | ``ready``."""
    detail: str


async def _fingerprint(
    client: ServerClient,
) -> tuple[ServerDialect, dict[str, Any] | None, ServerError | None]:
    """The dialect from ``/v1/models`` ``owned_by``, else from dialect-only endpoints; third,
    the refusal of a ``/v1/models`` that wants an API key (then the metrics name the server)."""
    try:
        found = model_card(await client.get_json("/v1/models"))
    except ServerError as exc:
        if not exc.unauthorised:
            raise
        dialect, model = await _by_open_metrics(client, exc)
        return dialect, ({"id": model} if model else None), exc
    card = dict(found) if found is not None else None
    if card is not None:
        owner = dialect_owning(str(card.get("owned_by", "")))
        if owner is not None:
            return owner, card, None
    # owned_by is missing or generic (a proxy, a renamed build): look for dialect endpoints
    for candidate in all_dialects():
        if await candidate.recognize(client):
            return candidate, card, None
    return dialect_for(Dialect.OPENAI), card, None


async def _by_open_metrics(
    client: ServerClient, refused: ServerError
) -> tuple[ServerDialect, str | None]:
    """The server whose own series its ``/metrics`` serves without a key (vLLM and SGLang keep
    ``/metrics`` open under ``--api-key``), and the model its series name (``model_name``);
    ``refused`` again when none does."""
    scrapes: dict[str, Scrape | None] = {}
    for candidate in all_dialects():
        if not candidate.metrics_prefix:
            continue
        path = candidate.metrics_path
        if path not in scrapes:
            scrapes[path] = (await scrape_metrics(client, path))[1]
        scrape = scrapes[path]
        if scrape is not None and scrape.has_prefix(candidate.metrics_prefix):
            return candidate, _model_named(scrape, candidate.metrics_prefix)
    raise refused


def _model_named(scrape: Scrape, prefix: str) -> str | None:
    """The ``model_name`` label of the first of the server's own series that has one."""
    for sample in scrape.samples:
        if sample.name.startswith(prefix) and sample.labels.get("model_name"):
            return sample.labels["model_name"]
    return None


def _keyless(info: ServerInfo, refused: ServerError) -> ServerInfo:
    """``info`` of a server watched through its open metrics without the key ``refused``
    wants; ``refused`` raised when its metrics are not open either (nothing to watch)."""
    if info.metrics_enabled is not True:
        raise refused
    return replace(info, notes={**info.notes, KEYLESS_NOTE: str(refused)})


async def detect(client: ServerClient) -> ServerInfo:
    """Find out what server answers at the client's endpoint.

    A server that wants an API key this client lacks is still watched where its own
    ``/metrics`` are open (vLLM, SGLang): ``notes[KEYLESS_NOTE]`` says so. Every string the server
    gave (model id, version, arguments, notes) is sanitised.

    Raises:
        ServerError: The server cannot be reached, refuses the key where its metrics are
            not open either, or is still loading (``loading`` is true: HTTP 503).
    """
    client.route = None  # a restarted server may be no router, or route elsewhere
    dialect, card, refused = await _fingerprint(client)
    model = str(card["id"]) if card and card.get("id") is not None else None
    max_len = as_int(card.get("max_model_len"), digits=True) if card else None
    info = await dialect.detect(client, model, max_len)
    return clean_info(info if refused is None else _keyless(info, refused))


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
