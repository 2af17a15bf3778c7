"""A passive watch for ``specwatch advise URL``: detection, then ``/metrics`` only, for a while.

Nothing here asks the server for model work: detection reads its model list and info
endpoints, the watch reads ``/metrics``. The windows are what the live monitor would have.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.watch.watcher import MetricsWatcher


@dataclass(frozen=True, slots=True)
class Watched:
    """What a watch saw: the server, its windows, and the errors of failed scrapes."""

    info: ServerInfo
    windows: tuple[MetricsWindow, ...]
    errors: tuple[str, ...] = ()


async def watch_windows(
    endpoint: Endpoint,
    seconds: float,
    interval_s: float = 1.0,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> Watched:
    """Detect the server at ``endpoint`` and scrape its ``/metrics`` every ``interval_s``
    for ``seconds``.

    Raises:
        ServerError: The server cannot be reached or identified.
    """
    async with ServerClient(endpoint) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info, clock=clock)
        await watcher.scrape()
        end = clock() + seconds
        windows: list[MetricsWindow] = []
        errors: list[str] = []
        while clock() < end:
            await sleep(interval_s)
            w = await watcher.scrape()
            if "error" in w.notes:
                errors.append(w.notes["error"])
            elif w.dt > 0:
                windows.append(w)
    return Watched(info, tuple(windows), tuple(errors))


__all__ = ["Watched", "watch_windows"]
