"""What the exporter last heard from the session: a subscriber that keeps the newest reading of
each kind, and forgets a server's figures the moment it is lost (so a scrape never shows a stale
verdict or window as current).

Events arrive on the session's threads; :meth:`Readings.view` hands the collector a consistent
copy under one lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.host import HostSpan
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.session import events as ev
from specwatch.session.verdict_state import LiveVerdictState
from specwatch.sources.http.endpoint import Endpoint, redact

LABEL_LIMIT = 120
"""Longest label value taken from outside (a model id, a URL)."""


def label(text: str | None) -> str:
    """A label value safe to export: one line, no control characters, bounded."""
    return sanitize_line(text or "", LABEL_LIMIT)


@dataclass(frozen=True, slots=True)
class ServerView:
    """One server as the exporter shows it."""

    server: str
    """The address without credentials."""
    model: str = ""
    dialect: str = ""
    up: bool = False
    window: MetricsWindow | None = None
    """The newest ``/metrics`` window (``None`` while down: dropped, not kept stale)."""
    verdict: LiveVerdictState | None = None
    """The live verdict (the session's first server only; ``None`` while down)."""
    errors: int = 0
    """Failed attempts to reach it (waits while down, losses)."""
    last_success: float | None = None
    """Unix seconds of the newest successful scrape."""


@dataclass(frozen=True, slots=True)
class GpuView:
    """The GPUs as the exporter shows them."""

    inventory: GpuInventory | None = None
    tick: GpuTick | None = None
    errors: int = 0
    last_success: float | None = None


@dataclass(frozen=True, slots=True)
class View:
    """Everything one scrape shows."""

    servers: tuple[ServerView, ...]
    gpus: GpuView = field(default_factory=GpuView)
    host: HostSpan | None = None
    """This host's CPU over the newest interval the session read."""


class Readings:
    """A session subscriber keeping the newest readings (thread-safe).

    Args:
        endpoints: The session's servers, by index.
        wall: Unix seconds (for the last-success series).
    """

    def __init__(self, endpoints: Sequence[Endpoint], wall: Callable[[], float] = time.time):
        self._wall = wall
        self._lock = threading.Lock()
        self._servers = [ServerView(label(redact(e.base_url, e))) for e in endpoints]
        self._gpus = GpuView()
        self._host: HostSpan | None = None

    def __call__(self, event: ev.SessionEvent) -> None:
        """Take one session event."""
        with self._lock:
            self._take(event)

    def _set(self, index: int, **changes: object) -> None:
        if 0 <= index < len(self._servers):
            self._servers[index] = replace(self._servers[index], **changes)  # type: ignore[arg-type]

    def _take(self, event: ev.SessionEvent) -> None:
        if isinstance(event, ev.MetricsScraped):
            changes: dict[str, object] = {"up": True, "last_success": self._wall()}
            # A window of no width (the first scrape) measured nothing: keep the one before.
            if event.window.dt > 0:
                changes["window"] = event.window
            self._set(event.server, **changes)
        elif isinstance(event, ev.ServerReady):
            self._ready(event.server, event.info)
        elif isinstance(event, ev.ServerLost | ev.ServerWaiting):
            s = event.server
            errors = self._servers[s].errors + 1 if 0 <= s < len(self._servers) else 0
            self._set(s, up=False, window=None, verdict=None, errors=errors)
        elif isinstance(event, ev.VerdictChanged):
            if 0 <= event.server < len(self._servers) and self._servers[event.server].up:
                self._set(event.server, verdict=event.state)
        elif isinstance(event, ev.GpuTicked):
            g = self._gpus
            if event.tick.error:  # the GPUs' last figures are no longer current: dropped
                self._gpus = replace(g, tick=None, errors=g.errors + 1)
            else:
                self._gpus = replace(g, tick=event.tick, last_success=self._wall())
        elif isinstance(event, ev.HostSampled):
            self._host = event.span
        elif isinstance(event, ev.GpuInventoryChanged):
            bad = 0 if event.inventory.available else 1
            g = self._gpus
            self._gpus = replace(g, inventory=event.inventory, errors=g.errors + bad)

    def _ready(self, index: int, info: ServerInfo) -> None:
        self._set(index, up=True, model=label(info.model), dialect=label(str(info.dialect.value)))

    def view(self) -> View:
        """A consistent copy of what is known now."""
        with self._lock:
            return View(tuple(self._servers), self._gpus, self._host)


__all__ = ["LABEL_LIMIT", "GpuView", "Readings", "ServerView", "View", "label"]
