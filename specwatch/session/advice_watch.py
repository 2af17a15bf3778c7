"""A passive watch for ``specwatch advise URL``: detection, then ``/metrics`` only, for a while.

Nothing here asks the server for model work: detection reads its model list and info
endpoints, the watch reads ``/metrics``. The windows are what the live monitor would have.
A server on this machine also gives its command line (``/proc``, on a thread), from which the
advice takes the engine's own syntax.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from specwatch.core.identity import ServerIdentity
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.identity.process import identify as identify_server
from specwatch.sources.watcher import MetricsWatcher


@dataclass(frozen=True, slots=True)
class Watched:
    """What a watch saw: the server, its windows, and the errors of failed scrapes."""

    info: ServerInfo
    windows: tuple[MetricsWindow, ...]
    errors: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    """The server's command line where it runs here (secrets redacted); empty otherwise."""


async def watch_windows(
    endpoint: Endpoint,
    seconds: float,
    interval_s: float = 1.0,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    identify: Callable[[str, ServerInfo], ServerIdentity] | None = identify_server,
) -> Watched:
    """Detect the server at ``endpoint`` and scrape its ``/metrics`` every ``interval_s``
    for ``seconds`` (none at all where the server serves no counters); ``identify`` reads the
    server's command line (``None``: not read).

    Raises:
        ServerError: The server cannot be reached or identified.
    """
    async with ServerClient(endpoint) as client:
        info = await detect(client)
        found = (
            asyncio.create_task(asyncio.to_thread(identify, info.base_url, info))
            if identify is not None
            else None
        )
        watcher = MetricsWatcher(client, info, clock=clock)
        await watcher.scrape()
        # no counters will come (llama-server without --metrics): nothing to wait for
        end = clock() + (0.0 if info.counters_off else seconds)
        windows: list[MetricsWindow] = []
        errors: list[str] = []
        while clock() < end:
            await sleep(interval_s)
            w = await watcher.scrape()
            if "error" in w.notes:
                errors.append(w.notes["error"])
            elif w.dt > 0:
                windows.append(w)
    argv: tuple[str, ...] = ()
    if found is not None:
        try:
            argv = (await found).cmdline
        except Exception:  # the command line only refines the syntax: never a reason to fail
            argv = ()
    return Watched(info, tuple(windows), tuple(errors), argv)


__all__ = ["Watched", "watch_windows"]
