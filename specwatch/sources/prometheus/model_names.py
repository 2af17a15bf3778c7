"""Model names the metrics do not carry, asked of the servers themselves.

llama.cpp's ``/metrics`` has no model label, so a fleet read through Prometheus knows its
llama.cpp servers by address alone. Where a scrape target answers HTTP, its ``/v1/models``
(passive: no model work) names the model. The address is the one Prometheus scrapes (its
targets' ``scrapeUrl``: ``instance`` is often relabelled to a name), else the ``instance``
itself. Each server is asked once: at most
:data:`AT_ONCE` at a time, each answer within :data:`DEADLINE_S`; a refresh waits at most
:data:`WAIT_S` for the answers it started and later refreshes take the late ones. No API key
is sent: a Prometheus target is not a server the user gave a key for. A server that did not
answer is asked again after :data:`RETRY_S`, and its row says why it has no model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from specwatch.core.fleet import FleetServer
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import model_card

AT_ONCE = 8
PENDING_MAX = 64
"""Lookups under way at most; the other servers are asked at later refreshes."""
DEADLINE_S = 2.0
WAIT_S = 0.5
RETRY_S = 300.0
MAX_KNOWN = 20_000
"""Servers remembered (named or asked); past it the memory starts again."""
NOT_IN_METRICS = "not in metrics"
"""The model cell of a server whose metrics name no model and which did not name it either."""
FROM_SERVER = "/v1/models (not in metrics)"
"""Where a name asked of the server came from."""

Lookup = Callable[[str], Awaitable[str | None]]
"""An address (``http://host:port`` or ``host:port``) → the model served there, ``None`` when
it does not say."""


def model_of(models: Any) -> str | None:
    """The first model id of a ``/v1/models`` answer, a file path reduced to its name."""
    card = model_card(models)
    name = card.get("id") if card is not None else None
    if not isinstance(name, str) or not name.strip():
        return None
    # llama-server names a model by its file (/models/qwen2.5-7b-q4_k_m.gguf) unless aliased
    base = name.rstrip("/").rsplit("/", 1)[-1] if name.endswith(".gguf") else name
    return sanitize_line(base, 200) or None


def target_address(scrape_url: str) -> str | None:
    """``scheme://host:port`` of a target's scrape URL (no credentials, no path)."""
    try:
        parts = urlsplit(scrape_url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


async def ask_server(address: str) -> str | None:
    """``GET ADDRESS/v1/models`` without credentials, within :data:`DEADLINE_S`."""
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import parse_endpoint

    async with ServerClient(
        parse_endpoint(address, env={}), timeout_s=DEADLINE_S, deadline_s=DEADLINE_S
    ) as client:
        return model_of(await client.get_json("/v1/models"))


class ModelNames:
    """Fills in the model of servers whose metrics name none.

    Args:
        lookup: How a server is asked (default :func:`ask_server`).
        clock: Monotonic seconds (when to ask again).
    """

    def __init__(self, lookup: Lookup = ask_server, clock: Callable[[], float] = time.monotonic):
        self.lookup = lookup
        self.clock = clock
        self.known: dict[str, str] = {}
        self._asked: dict[str, float] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._gate: asyncio.Semaphore | None = None

    @property
    def pending(self) -> int:
        """Lookups under way."""
        return len(self._pending)

    async def fill(
        self, servers: Sequence[FleetServer], addresses: Mapping[str, str] | None = None
    ) -> list[FleetServer]:
        """``servers`` with a model where the metrics had none and the server named it, else
        with a note saying the metrics do not carry it. Waits at most :data:`WAIT_S`.

        Args:
            servers: The fleet's servers.
            addresses: ``instance`` → where Prometheus scrapes it (:func:`target_address`).
        """
        where = addresses or {}
        started = [
            t
            for s in servers
            if s.model is None and (t := self._ask(s.instance, where.get(s.instance)))
        ]
        if started:
            await asyncio.wait(started, timeout=WAIT_S)
        out: list[FleetServer] = []
        for s in servers:
            if s.model is not None:
                out.append(s)
            elif (name := self.known.get(s.instance)) is not None:
                out.append(replace(s, model=name, model_note=FROM_SERVER))
            else:
                out.append(replace(s, model_note=NOT_IN_METRICS))
        return out

    def _ask(self, instance: str, address: str | None) -> asyncio.Task[None] | None:
        """Start asking ``instance`` unless it is named, being asked, or was asked lately."""
        if instance in self.known or instance in self._pending:
            return None
        if len(self._pending) >= PENDING_MAX:
            return None
        last = self._asked.get(instance)
        now = self.clock()
        if last is not None and now - last < RETRY_S:
            return None
        if len(self._asked) >= MAX_KNOWN:
            self._asked.clear()
            self.known.clear()
        self._asked[instance] = now
        task = asyncio.create_task(self._answer(instance, address or instance))
        self._pending[instance] = task
        return task

    async def _answer(self, instance: str, address: str) -> None:
        if self._gate is None:
            self._gate = asyncio.Semaphore(AT_ONCE)
        try:
            async with self._gate:
                name = await self.lookup(address)
        except Exception:  # unreachable, refused, not JSON: asked again after RETRY_S
            name = None
        finally:
            self._pending.pop(instance, None)
        if name is not None:
            self.known[instance] = name

    async def aclose(self) -> None:
        """Stop the lookups still running."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = [
    "FROM_SERVER",
    "NOT_IN_METRICS",
    "PENDING_MAX",
    "ModelNames",
    "ask_server",
    "model_of",
    "target_address",
]
