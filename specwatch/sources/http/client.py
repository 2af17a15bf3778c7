"""The HTTP client for one inference server: the only place that creates ``httpx`` clients, and
how long and how much it will take from a server (deadlines and size limits).

Every failure becomes a :class:`ServerError` whose ``str`` is one clear line, e.g.
``cannot connect to http://127.0.0.1:8000: connection refused``; the API key is never in it.

Every request has a wall-clock deadline besides the read timeout (``--timeout`` bounds each
read; a server dripping one byte a second never trips it). The defaults fit each use and
``--deadline`` overrides them:

==============================  =====================================================
use                             deadline
==============================  =====================================================
``probe``                       60 s for each request, the stream included
the TUI's polls                 5 s for each request (detection and ``/metrics``)
a benchmark run's stream        60 s + 0.25 s × ``max_tokens`` (2048 tokens: 572 s)
any other request               60 s
==============================  =====================================================

Every body is read as a stream and reading stops past its limit, so memory stays bounded
whatever the server sends: JSON answers 16 MiB, one ``/metrics`` scrape 8 MiB,
llama.cpp's ``/slots`` read at every scrape 1 MiB, one SSE line
1 MiB; of an error answer only the first 64 KiB are read (an excerpt is all that is shown). A
``Content-Length`` over the limit is refused before reading a byte. A gzip or deflate body is
inflated here, at most :data:`INFLATE_CHUNK` bytes at a time (httpx inflates each network chunk
whole: 64 KiB of a gzip bomb is 64 MB), so inflating stops at the limit too.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import zlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit
from urllib.request import getproxies

import httpx
import orjson

from specwatch.core.sanitize import sanitize_line
from specwatch.core.values import as_int
from specwatch.sources.http.banner import banner_message, sniff_banner
from specwatch.sources.http.endpoint import Endpoint, redact
from specwatch.sources.http.server_errors import (
    ServerError,
    body_excerpt,
    error_for_exception,
    error_for_status,
    nothing_answered,
)

MIB = 1024 * 1024

BODY_LIMIT_BYTES = 16 * MIB
"""A JSON answer (``/v1/models``, ``/server_info``, ``/version``...)."""
METRICS_LIMIT_BYTES = 8 * MIB
"""One ``/metrics`` scrape (real servers send well under 1 MiB)."""
SLOTS_LIMIT_BYTES = 1 * MIB
"""llama.cpp's ``/slots``, read beside every scrape (a few KiB a slot without ``--slots-debug``)."""
SSE_LINE_LIMIT_BYTES = 1 * MIB
"""One line (event) of a stream."""
ERROR_BODY_LIMIT_BYTES = 64 * 1024
"""What is read of an error answer; the rest is not needed for the excerpt."""

REQUEST_DEADLINE_S = 60.0
"""Any request without a more specific deadline."""
PROBE_DEADLINE_S = 60.0
"""``specwatch probe``: each request, the stream included."""
POLL_DEADLINE_S = 5.0
"""The live session's (TUI's) requests: a poll must never hold the monitor for long."""
RUN_FIXED_S = 60.0
"""A benchmark stream's fixed allowance (queueing, prefill)..."""
RUN_PER_TOKEN_S = 0.25
"""...plus this per requested token (a server slower than 4 tokens/s is reported)."""


def run_deadline(max_tokens: int) -> float:
    """The default wall-clock deadline of one stream of ``max_tokens`` tokens."""
    return RUN_FIXED_S + RUN_PER_TOKEN_S * max(0, max_tokens)


def mib(n: float) -> str:
    """``n`` bytes in MiB, e.g. ``"47.7"`` or ``"8"``."""
    value = n / MIB
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def too_large(what: str, size: int | None, limit: int) -> str:
    """The one line for an answer over its limit; ``size`` is ``None`` when unknown."""
    shown = f"{mib(size)} MiB" if size is not None else f"over {mib(limit)} MiB"
    return f"{what}: answer too large ({shown}, limit {mib(limit)} MiB)"


def deadline_hint(deadline_s: float) -> str:
    """The end of a deadline message: how long, and how to allow more."""
    return f"within the {deadline_s:g} s deadline (--deadline S allows more)"


class TooLarge(Exception):
    """A body or line went over its limit; ``size`` is the announced size when known."""

    def __init__(self, size: int | None, limit: int) -> None:
        super().__init__(f"{size} > {limit}")
        self.size = size
        self.limit = limit


INFLATE_CHUNK = 1 << 20
"""Most bytes one step of inflating produces."""
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


async def decoded_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The decoded body of a streamed ``response``, gzip and deflate inflated in chunks of at
    most :data:`INFLATE_CHUNK` bytes (other encodings as ``httpx`` decodes them).

    Raises:
        httpx.DecodingError: The body is not what its ``Content-Encoding`` says.
        httpx.HTTPError: Reading failed.
    """
    encoding = response.headers.get("content-encoding", "").strip().lower()
    wbits = _WBITS.get(encoding)
    if wbits is None or response.is_stream_consumed:  # read already (a test's mock): decoded
        async for chunk in response.aiter_bytes():
            yield chunk
        return
    inflater = zlib.decompressobj(wbits)
    first = True
    async for raw in response.aiter_raw():
        pending = raw
        while pending and not inflater.eof:
            try:
                out = inflater.decompress(pending, INFLATE_CHUNK)
            except zlib.error as exc:
                if first and encoding == "deflate":  # raw deflate, without the zlib header
                    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise httpx.DecodingError(f"bad {encoding} body: {exc}") from None
            first = False
            pending = inflater.unconsumed_tail
            if out:
                yield out
        if inflater.eof:
            return


def announced_size(response: httpx.Response) -> int | None:
    """The ``Content-Length`` of ``response`` (``None`` when absent or not a number)."""
    if "content-encoding" in response.headers:
        return None  # the decoded size is what counts
    return as_int(response.headers.get("content-length"), digits=True)


async def read_limited(response: httpx.Response, limit: int, *, truncate: bool = False) -> bytes:
    """The (decoded) body of a streamed ``response``, at most ``limit`` bytes.

    Raises:
        TooLarge: The body is longer than ``limit`` (unless ``truncate``: then the first
            ``limit`` bytes are returned).
        httpx.HTTPError: Reading failed.
    """
    size = announced_size(response)
    if size is not None and size > limit and not truncate:
        raise TooLarge(size, limit)
    parts: list[bytes] = []
    got = 0
    async for chunk in decoded_chunks(response):
        parts.append(chunk)
        got += len(chunk)
        if got > limit:
            if truncate:
                return b"".join(parts)[:limit]
            raise TooLarge(size, limit)
    return b"".join(parts)


def detached(response: httpx.Response, body: bytes) -> httpx.Response:
    """A plain response with ``body`` as its (already decoded) content."""
    headers = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=body,
        request=response.request,
        extensions={"reason_phrase": response.reason_phrase.encode("latin-1", "replace")},
    )


async def bounded_lines(response: httpx.Response, limit: int) -> AsyncIterator[str]:
    """The lines of a streamed body (``\\n``, ``\\r\\n`` or ``\\r`` ended), each under ``limit``.

    Raises:
        TooLarge: One line grew past ``limit`` bytes before its end arrived.
    """
    pending = b""
    async for chunk in decoded_chunks(response):
        pending += chunk
        # A chunk ending in \r may be half of a \r\n: wait for the next byte before splitting,
        # or the \n that follows would end one more (empty) line.
        held = pending.endswith(b"\r")
        if held:
            pending = pending[:-1]
        if b"\r" in pending:
            pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if len(line) > limit:
                raise TooLarge(len(line), limit)
            yield line.decode("utf-8", "replace")
        if len(pending) > limit:
            raise TooLarge(None, limit)
        if held:
            pending += b"\r"
    if pending.endswith(b"\r"):
        yield pending[:-1].decode("utf-8", "replace")
    elif pending:
        yield pending.decode("utf-8", "replace")


MAX_REDIRECTS = 5
ACCEPT_ENCODING = "identity"
"""What requests accept: compressing each scrape would cost the watched server CPU, and
decompressing it ours; a server that compresses anyway is still decoded."""
MAX_KEPT_REQUESTS = 16
"""GET requests kept for reuse (a client asks a handful of paths again and again; a Prometheus
client's queries differ, and the least recent go)."""
SNIFF_AFTER_S = 1.0
"""A request still unanswered after this long makes the client listen for a non-HTTP greeting."""
_T = TypeVar("_T")


class ServerClient:
    """An async HTTP client bound to one :class:`Endpoint`.

    Use as ``async with ServerClient(endpoint) as client:``. ``timeout_s`` bounds connecting and
    each read (a hung server is reported after that long without a byte). ``transport`` is for
    tests (``httpx.MockTransport``).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        deadline_s: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        """Wall-clock limit of each request (``--deadline``); ``None``: the default per use
        (the deadlines above)."""
        headers = {**endpoint.headers(), "Accept-Encoding": ACCEPT_ENCODING}
        if endpoint.basic_auth is not None:
            headers["Authorization"] = _basic_auth(*endpoint.basic_auth)
        plain = urlsplit(endpoint.base_url).scheme == "http"
        # Plain http never does TLS (requests stay on base_url, redirects on its origin): no CA
        # bundle loaded for it (~1-3 MiB resident per client).
        verify = not plain
        proxied = transport is None and bool(getproxies())
        self.transport: httpx.AsyncBaseTransport | None = (
            None if proxied else transport or httpx.AsyncHTTPTransport(verify=verify)
        )
        """Where requests are sent. The client's own layers (auth flow, redirects, cookie jar,
        logging) are not wanted: redirects are followed here, same origin only; the key and
        basic auth are headers. Sending on the transport saves CPU on every scrape
        (docs/costs.md). ``None`` where the environment names a proxy
        (``HTTP_PROXY``, ``NO_PROXY``...): then the client sends, and routes, as httpx does."""
        self.http = httpx.AsyncClient(
            base_url=endpoint.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            transport=self.transport,
            verify=verify,
        )
        """Builds the requests (base URL, headers, timeouts) and closes the transport."""
        self._get_request = functools.lru_cache(maxsize=MAX_KEPT_REQUESTS)(self._build_get)
        """A GET is the same request every time (no body, no cookie): built once a path
        (joining and parsing its URL and merging headers took 34 µs of a 0.6 ms scrape here)."""
        self._sniffed = transport is not None or not plain
        self.route: str | None = None
        """The model a llama-server router forwards this client's GETs to (each asks
        ``?model=…&autoload=false``: a read never makes the router load a model); ``None``: the
        server is not a router. Set by detection."""
        self.routed: str | None = None
        """The router's model this client was routed to last: detection again (the model was
        unloaded, the router restarted) waits for it rather than watching another."""

    async def __aenter__(self) -> ServerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        self._get_request.cache_clear()
        await self.http.aclose()

    def error_for(self, exc: BaseException, path: str, during: str = "") -> ServerError:
        """Translate an ``httpx`` (or socket) exception into a one-line :class:`ServerError`."""
        return error_for_exception(self.endpoint, self.timeout_s, exc, path, during)

    def status_error(self, status: int, reason: str, body: str, path: str) -> ServerError:
        """The error for an HTTP error status, with a short excerpt of the body."""
        return error_for_status(self.endpoint, status, reason, body, path)

    def deadline_error(self, path: str, deadline_s: float, during: str = "") -> ServerError:
        """The error for a request that did not complete within its wall-clock deadline."""
        url = self.endpoint.url(path)
        message = f"no complete answer from {url}{during} {deadline_hint(deadline_s)}"
        return ServerError(redact(message, self.endpoint), kind="deadline", url=url)

    def too_large_error(self, path: str, exc: TooLarge) -> ServerError:
        """The error for a body over its limit."""
        url = self.endpoint.url(path)
        message = too_large(url, exc.size, exc.limit)
        return ServerError(redact(message, self.endpoint), kind="too_large", url=url)

    def _too_many_redirects(self, path: str) -> ServerError:
        url = self.endpoint.url(path)
        return ServerError(f"{url}: more than {MAX_REDIRECTS} redirects", kind="redirect", url=url)

    def redirect_target(self, response: httpx.Response, path: str) -> str:
        """Where a same-origin redirect points (a path for the next request).

        Raises:
            ServerError: ``redirect``: the target is another origin (or unusable).
        """
        location = response.headers.get("location", "")
        target = response.url.join(location)
        base = httpx.URL(self.endpoint.base_url)
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            url = self.endpoint.url(path)
            shown = sanitize_line(str(target), 120)
            message = (
                f"{url} redirects to {shown} (HTTP {response.status_code}), another origin:"
                " not followed; give that address with --url if it is the server"
            )
            raise ServerError(redact(message, self.endpoint), kind="redirect", url=url)
        return str(target)

    async def send(self, request: httpx.Request, path: str) -> httpx.Response:
        """Send ``request`` with a streamed body (the caller closes the response).

        The first request that is slow to answer makes the client listen for a greeting on
        the port: a non-HTTP program (sshd) is named at once instead of timing out.

        Raises:
            ServerError: Unreachable, hung, dropped, or not HTTP.
        """
        return await self._sniffing(self._send_retrying(request), path)

    async def _sniffing(self, work: Awaitable[_T], path: str) -> _T:
        """Await ``work``; the first time, name a non-HTTP program that answers meanwhile.

        Raises:
            ServerError: ``work`` failed (``httpx`` or socket error), or the port is not HTTP.
        """
        if self._sniffed:
            try:
                return await work
            except (httpx.HTTPError, OSError) as exc:
                raise self.error_for(exc, path) from None
        task = asyncio.ensure_future(work)
        try:
            if not self._sniffed:
                done, _ = await asyncio.wait({task}, timeout=SNIFF_AFTER_S)
                if not done:
                    self._sniffed = True
                    named = await self._not_http(path)
                    if named is not None:
                        raise named
            result = await task
        except (httpx.HTTPError, OSError) as exc:
            if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError) and not self._sniffed:
                # sshd greets, then hangs up on the request: closed mid-response, but SSH
                self._sniffed = True
                named = await self._not_http(path)
                if named is not None:
                    raise named from None
            raise self.error_for(exc, path) from None
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._sniffed = True
        return result

    async def _not_http(self, path: str) -> ServerError | None:
        """The error naming a program on the port that greets first (``None``: none does)."""
        url = httpx.URL(self.endpoint.base_url)
        banner = await sniff_banner(url.host, url.port or 80)
        if banner is None:
            return None
        message = banner_message(self.endpoint.url(path), banner)
        return ServerError(message, kind="garbage", url=self.endpoint.url(path))

    async def _send_retrying(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._send_once(request)
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if request.method != "GET" and not nothing_answered(exc):
                raise
            # a kept-alive connection the server closed (it restarted; llama-server closes one
            # unannounced after every streamed answer): a GET is safe to send once more on a
            # fresh connection, and so is any request the server hung up on before answering,
            # as curl does (a server that took the request and died refuses the second one)
            return await self._send_once(request)

    async def _send_once(self, request: httpx.Request) -> httpx.Response:
        if self.transport is None:
            return await self.http.send(request, stream=True)
        response = await self.transport.handle_async_request(request)
        response.request = request
        return response

    async def get(
        self,
        path: str,
        *,
        check: bool = True,
        limit: int = BODY_LIMIT_BYTES,
        deadline_s: float | None = None,
    ) -> httpx.Response:
        """GET ``path`` (body read in full, at most ``limit`` bytes, within the deadline).

        With ``check``, an error status raises :class:`ServerError`. Redirects are followed
        within the same origin only.

        Raises:
            ServerError: Unreachable, hung, dropped, too large, past the deadline (``deadline_s``,
                else the client's, else 60 s), redirected elsewhere, or (with ``check``) an
                HTTP error status.
        """
        deadline = deadline_s or self.deadline_s or REQUEST_DEADLINE_S
        try:
            async with asyncio.timeout(deadline):
                response = await self._get(path, limit)
        except TimeoutError:
            raise self.deadline_error(path, deadline) from None
        if check and response.status_code >= 400:
            raise self.status_error(
                response.status_code, response.reason_phrase, response.text, path
            )
        return response

    async def _get(self, path: str, limit: int) -> httpx.Response:
        target = path
        if self.route is not None:
            joint = "&" if "?" in path else "?"
            target += joint + urlencode({"model": self.route, "autoload": "false"})
        for _ in range(MAX_REDIRECTS + 1):
            response = await self.send(self._get_request(target), path)
            try:
                if response.is_redirect:
                    target = self.redirect_target(response, path)
                    continue
                return await self._read_body(response, path, limit)
            finally:
                await response.aclose()
        raise self._too_many_redirects(path)

    def _build_get(self, target: str) -> httpx.Request:
        return self.http.build_request("GET", target)

    async def answer(
        self, request: httpx.Request, path: str, *, limit: int, deadline_s: float
    ) -> httpx.Response:
        """Send ``request`` (a redirect is not followed) and read its answer in full, at most
        ``limit`` bytes (an error answer's cut to its excerpt), within ``deadline_s``.

        Raises:
            ServerError: As :meth:`send`, ``too_large``, or ``deadline``.
        """
        try:
            async with asyncio.timeout(deadline_s):
                response = await self.send(request, path)
                try:
                    return await self._read_body(response, path, limit)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise self.deadline_error(path, deadline_s) from None

    async def _read_body(self, response: httpx.Response, path: str, limit: int) -> httpx.Response:
        """``response`` with its body read (an error answer's cut to its excerpt limit).

        Raises:
            ServerError: ``too_large``, or the connection failed while reading.
        """
        error = response.status_code >= 400
        try:
            body = await read_limited(
                response, ERROR_BODY_LIMIT_BYTES if error else limit, truncate=error
            )
        except TooLarge as exc:
            raise self.too_large_error(path, exc) from None
        except (httpx.HTTPError, OSError) as exc:
            raise self.error_for(exc, path) from None
        return detached(response, body)

    async def get_json(self, path: str) -> Any:
        """GET ``path`` and decode its JSON body.

        Raises:
            ServerError: As :meth:`get`, or ``garbage`` when the body is not JSON.
        """
        response = await self.get(path)
        return self.decode_json(response.content, path)

    def decode_json(self, content: bytes, path: str) -> Any:
        """Decode a JSON body or raise a ``garbage`` :class:`ServerError`."""
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            url = self.endpoint.url(path)
            excerpt = body_excerpt(content.decode("utf-8", "replace"), 60)
            message = f"{url}: the answer is not JSON ({excerpt or 'empty body'})"
            raise ServerError(redact(message, self.endpoint), kind="garbage", url=url) from None

    @asynccontextmanager
    async def stream_post(
        self, path: str, payload: dict[str, Any]
    ) -> AsyncIterator[httpx.Response]:
        """POST ``payload`` as JSON and yield the streaming response (status already checked).

        Raises:
            ServerError: Unreachable, redirected, or an HTTP error status (the body excerpt is in
                the message).
        """
        request = self.http.build_request(
            "POST",
            path,
            content=orjson.dumps(payload),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        response = await self.send(request, path)
        try:
            if response.is_redirect:
                # a POST is never re-sent to another address (it carries the prompt)
                target = self.redirect_target(response, path)
                url = self.endpoint.url(path)
                message = f"{url} redirects to {sanitize_line(target, 120)}: not followed"
                raise ServerError(message, kind="redirect", url=url)
            if response.status_code >= 400:
                try:
                    raw = await read_limited(response, ERROR_BODY_LIMIT_BYTES, truncate=True)
                    body = raw.decode("utf-8", "replace")
                except (httpx.HTTPError, OSError):
                    body = ""
                raise self.status_error(response.status_code, response.reason_phrase, body, path)
            yield response
        finally:
            await response.aclose()


def _basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` value of HTTP basic auth, as ``httpx.BasicAuth`` makes it."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return f"Basic {token}"


__all__ = [
    "BODY_LIMIT_BYTES",
    "ERROR_BODY_LIMIT_BYTES",
    "METRICS_LIMIT_BYTES",
    "MIB",
    "POLL_DEADLINE_S",
    "PROBE_DEADLINE_S",
    "REQUEST_DEADLINE_S",
    "RUN_FIXED_S",
    "RUN_PER_TOKEN_S",
    "SLOTS_LIMIT_BYTES",
    "SSE_LINE_LIMIT_BYTES",
    "ServerClient",
    "TooLarge",
    "announced_size",
    "bounded_lines",
    "deadline_hint",
    "decoded_chunks",
    "detached",
    "mib",
    "read_limited",
    "run_deadline",
    "too_large",
]
