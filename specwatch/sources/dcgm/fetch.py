"""GET dcgm-exporter ``/metrics`` bodies within a wall-clock deadline and a size limit.

The requests go through :class:`~specwatch.sources.http.client.ServerClient` (deadlines, limits,
same-origin redirects, one-line errors), one kept-alive client per exporter, on an event loop
of the fetcher's own thread: the poller that calls it is a plain thread, and a caller that runs
an event loop itself (``asyncio.to_thread`` aside) must not have it taken over.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.http.server_errors import ServerError

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""An 8-GPU exporter with every field is ~100 KiB; a body past this is not a dcgm-exporter."""
_T = TypeVar("_T")


class DcgmFetchError(Exception):
    """The exporter could not be read (refused, timed out, not 200, too large)."""


class DcgmFetcher:
    """Keep-alive GETs to dcgm-exporters, several at once; :meth:`close` ends them.

    Callable as a single fetch, ``fetcher(url, timeout_s, max_bytes) -> body``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._clients: dict[tuple[str, float], ServerClient] = {}

    def __call__(self, url: str, timeout_s: float, max_bytes: int) -> str:
        """One exporter's body.

        Raises:
            DcgmFetchError: With a short reason.
        """
        body = self.fetch_all([url], timeout_s, max_bytes)[0]
        if isinstance(body, DcgmFetchError):
            raise body
        return body

    def fetch_all(
        self, urls: Sequence[str], timeout_s: float, max_bytes: int
    ) -> list[str | DcgmFetchError]:
        """Each exporter's body (or why not), fetched concurrently, in the order of ``urls``."""

        async def all_of() -> list[str | DcgmFetchError]:
            gets = (self._fetch(url, timeout_s, max_bytes) for url in urls)
            return list(await asyncio.gather(*gets))

        return self._run(all_of())

    def close(self) -> None:
        """Close the connections and stop the thread (a later fetch starts them again)."""
        with self._lock:
            loop, thread, clients = self._loop, self._thread, list(self._clients.values())
            self._loop, self._thread, self._clients = None, None, {}
        if loop is None or thread is None:
            return

        async def close_all() -> None:
            for client in clients:
                await client.aclose()

        asyncio.run_coroutine_threadsafe(close_all(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _run(self, work: Coroutine[Any, Any, _T]) -> _T:
        with self._lock:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="specwatch-dcgm-http", daemon=True
                )
                self._thread.start()
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    async def _fetch(self, url: str, timeout_s: float, max_bytes: int) -> str | DcgmFetchError:
        parts = urlsplit(url)
        key = (f"{parts.scheme}://{parts.netloc}", timeout_s)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = ServerClient(exporter_endpoint(url), timeout_s=timeout_s)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            response = await client.get(path, check=False, limit=max_bytes, deadline_s=timeout_s)
        except ServerError as exc:
            if exc.kind in ("deadline", "hung"):
                return DcgmFetchError(f"no complete answer within {timeout_s:g} s")
            if exc.kind == "too_large":
                return DcgmFetchError(f"answer larger than {max_bytes} bytes")
            return DcgmFetchError(str(exc))
        if response.status_code != 200:
            return DcgmFetchError(f"HTTP {response.status_code} {response.reason_phrase}")
        return response.text


def exporter_endpoint(url: str) -> Endpoint:
    """The endpoint of an exporter URL: ``user:pass@`` leaves the address (so no message
    shows it) and becomes HTTP basic auth."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    auth = None
    if parts.username is not None or parts.password is not None:
        auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    return Endpoint(f"{parts.scheme}://{host}", basic_auth=auth)


def fetch_metrics(
    url: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = DEFAULT_MAX_BYTES
) -> str:
    """GET ``url`` once within a wall-clock deadline and a size limit (a fetcher of its own).

    Raises:
        DcgmFetchError: With a short reason.
    """
    fetcher = DcgmFetcher()
    try:
        return fetcher(url, timeout_s, max_bytes)
    finally:
        fetcher.close()


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT_S",
    "DcgmFetchError",
    "DcgmFetcher",
    "exporter_endpoint",
    "fetch_metrics",
]
