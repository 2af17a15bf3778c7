"""The HTTP client for one inference server: the only place that creates ``httpx`` clients.

Every failure becomes a :class:`ServerError` whose ``str`` is one clear line, e.g.
``cannot connect to http://127.0.0.1:8000: connection refused``; the API key is never in it.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import httpx
import orjson

from specwatch.sources.endpoint import Endpoint, redact

_TLS_HINTS = {
    "WRONG_VERSION_NUMBER": " (the server speaks plain http? use http://)",
    "CERTIFICATE_VERIFY_FAILED": " (certificate not trusted; SSL_CERT_FILE can name a CA bundle)",
}

ERROR_KINDS = ("refused", "resolve", "timeout", "hung", "closed", "tls", "http", "garbage", "other")


class ServerError(Exception):
    """A server could not be reached or answered badly; ``str(e)`` is one clear line.

    Attributes:
        kind: One of ``refused``, ``resolve``, ``timeout`` (connecting), ``hung`` (no answer
            in time), ``closed`` (connection dropped), ``tls``, ``http`` (an error status),
            ``garbage`` (not the expected format), ``other``.
        status: The HTTP status for ``http`` errors.
        url: The URL that failed (never carries credentials).
    """

    def __init__(self, message: str, kind: str = "other", status: int | None = None, url: str = ""):
        super().__init__(" ".join(message.split()))
        self.kind = kind
        self.status = status
        self.url = url

    @property
    def loading(self) -> bool:
        """The server is up but not ready (HTTP 503)."""
        return self.kind == "http" and self.status == 503

    @property
    def retryable(self) -> bool:
        """Waiting may help (refused, loading, hung...); not for bad keys or TLS trouble."""
        if self.kind == "tls":
            return False
        return not (self.kind == "http" and self.status in (401, 403))


def _body_excerpt(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _dropped(exc: httpx.RemoteProtocolError) -> bool:
    """Whether a protocol error means the peer closed the connection (not a malformed answer)."""
    text = str(exc).lower()
    return not text or "disconnect" in text or "closed" in text or "incomplete" in text


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


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
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.http = httpx.AsyncClient(
            base_url=endpoint.base_url,
            headers=endpoint.headers(),
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=True,
            transport=transport,
        )

    async def __aenter__(self) -> ServerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    def error_for(self, exc: BaseException, path: str, during: str = "") -> ServerError:
        """Translate an ``httpx`` (or socket) exception into a one-line :class:`ServerError`."""
        url = self.endpoint.url(path)
        where = f"{url}{' ' + during if during else ''}"
        chain = _exception_chain(exc)
        if any(isinstance(e, ssl.SSLError) for e in chain):
            ssl_err = next(e for e in chain if isinstance(e, ssl.SSLError))
            reason = getattr(ssl_err, "reason", None) or type(ssl_err).__name__
            hint = _TLS_HINTS.get(str(reason), "")
            message = f"TLS error talking to {where}: {reason}{hint}"
            kind = "tls"
        elif isinstance(exc, httpx.ConnectTimeout):
            message = f"cannot connect to {url}: timed out after {self.timeout_s:g} s"
            kind = "timeout"
        elif isinstance(exc, httpx.ConnectError):
            text = " ".join(str(e) for e in chain).lower()
            if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
                message, kind = f"cannot connect to {url}: connection refused", "refused"
            elif "name or service" in text or "nodename" in text or "getaddrinfo" in text:
                message, kind = f"cannot resolve the host of {url}", "resolve"
            else:
                detail = _body_excerpt(str(exc) or type(exc).__name__, 100)
                message, kind = f"cannot connect to {url}: {detail}", "other"
        elif isinstance(exc, httpx.TimeoutException):
            message = f"no answer from {where} within {self.timeout_s:g} s (server hung?)"
            kind = "hung"
        elif isinstance(exc, httpx.RemoteProtocolError) and not _dropped(exc):
            # e.g. "illegal status line": something that is not an HTTP server (ssh, redis)
            detail = _body_excerpt(str(exc), 60)
            message = f"{where}: the answer is not valid HTTP ({detail})"
            if "status line" in detail:
                message += "; another program on that port?"
            kind = "garbage"
        elif isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            message = f"connection to {where} closed by the server mid-response"
            kind = "closed"
        elif isinstance(exc, httpx.HTTPError):
            detail = _body_excerpt(str(exc) or type(exc).__name__, 100)
            message, kind = f"request to {where} failed: {detail}", "other"
        else:
            detail = _body_excerpt(str(exc) or type(exc).__name__, 100)
            message, kind = f"request to {where} failed: {type(exc).__name__}: {detail}", "other"
        return ServerError(redact(message, self.endpoint), kind=kind, url=url)

    def status_error(self, status: int, reason: str, body: str, path: str) -> ServerError:
        """The error for an HTTP error status, with a short excerpt of the body."""
        url = self.endpoint.url(path)
        hint = ""
        if status in (401, 403):
            hint = " (API key missing or wrong? use --api-key or SPECWATCH_API_KEY)"
        excerpt = redact(_body_excerpt(body), self.endpoint)
        key = self.endpoint.api_key
        if key:
            hint = hint.replace(key, "***")  # a key that is a plain word is still never shown
        # The hint is not passed through redact(): its "--api-key X" rule would mask the "or".
        message = redact(f"{url}: HTTP {status} {reason}", self.endpoint) + hint
        message += f": {excerpt}" if excerpt else ""
        return ServerError(message, kind="http", status=status, url=url)

    async def get(self, path: str, *, check: bool = True) -> httpx.Response:
        """GET ``path``; with ``check``, an error status raises :class:`ServerError`.

        Raises:
            ServerError: Unreachable, hung, dropped, or (with ``check``) an HTTP error status.
        """
        try:
            try:
                response = await self.http.get(path)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                # a kept-alive connection the server closed (e.g. it restarted): a GET is
                # safe to send once more, on a fresh connection
                response = await self.http.get(path)
        except (httpx.HTTPError, OSError) as exc:
            raise self.error_for(exc, path) from None
        if check and response.status_code >= 400:
            raise self.status_error(
                response.status_code, response.reason_phrase, response.text, path
            )
        return response

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
            excerpt = _body_excerpt(content.decode("utf-8", "replace"), 60)
            message = f"{url}: the answer is not JSON ({excerpt or 'empty body'})"
            raise ServerError(redact(message, self.endpoint), kind="garbage", url=url) from None

    @asynccontextmanager
    async def stream_post(
        self, path: str, payload: dict[str, Any]
    ) -> AsyncIterator[httpx.Response]:
        """POST ``payload`` as JSON and yield the streaming response (status already checked).

        Raises:
            ServerError: Unreachable, or an HTTP error status (the body excerpt is in the message).
        """
        request = self.http.build_request(
            "POST",
            path,
            content=orjson.dumps(payload),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        try:
            response = await self.http.send(request, stream=True)
        except (httpx.HTTPError, OSError) as exc:
            raise self.error_for(exc, path) from None
        try:
            if response.status_code >= 400:
                try:
                    body = (await response.aread()).decode("utf-8", "replace")
                except (httpx.HTTPError, OSError):
                    body = ""
                raise self.status_error(response.status_code, response.reason_phrase, body, path)
            yield response
        finally:
            await response.aclose()


__all__ = ["ERROR_KINDS", "ServerClient", "ServerError"]
