"""What can go wrong talking to a server, as one clear line: :class:`ServerError`.

The translation from an ``httpx`` exception or an error status to that line lives here; the
client (:mod:`specwatch.sources.http.client`) calls it. The API key is never in a message.
"""

from __future__ import annotations

import ssl

import httpx

from specwatch.core.sanitize import sanitize_line
from specwatch.sources.http.endpoint import Endpoint, redact

_TLS_HINTS = {
    "WRONG_VERSION_NUMBER": " (the server speaks plain http? use http://)",
    "CERTIFICATE_VERIFY_FAILED": " (certificate not trusted; SSL_CERT_FILE can name a CA bundle)",
}

MESSAGE_LIMIT = 600
"""The longest error line (server text inside it is cut long before)."""


class ServerError(Exception):
    """A server could not be reached or answered badly; ``str(e)`` is one clear line.

    Attributes:
        kind: One of ``refused``, ``resolve``, ``timeout`` (connecting), ``hung`` (no answer
            in time), ``deadline`` (the answer did not complete in time), ``closed``
            (connection dropped), ``tls``, ``http`` (an error status), ``garbage`` (not the
            expected format, or not HTTP at all), ``too_large``, ``redirect`` (to another
            origin, not followed), ``other``.

    The message is sanitised (:func:`specwatch.core.sanitize.sanitize_line`): server text in
    it can never act on a terminal.
        status: The HTTP status for ``http`` errors.
        url: The URL that failed (never carries credentials).
    """

    def __init__(self, message: str, kind: str = "other", status: int | None = None, url: str = ""):
        super().__init__(sanitize_line(" ".join(message.split()), MESSAGE_LIMIT))
        self.kind = kind
        self.status = status
        self.url = url

    @property
    def loading(self) -> bool:
        """The server is up but not ready (HTTP 503)."""
        return self.kind == "http" and self.status == 503

    @property
    def unauthorised(self) -> bool:
        """The server wants a (different) API key (HTTP 401 or 403)."""
        return self.kind == "http" and self.status in (401, 403)

    @property
    def retryable(self) -> bool:
        """Waiting may help (refused, loading, hung...); not for bad keys, TLS, redirects."""
        if self.kind in ("tls", "redirect", "too_large"):
            return False
        return not (self.kind == "http" and self.status in (401, 403))


def body_excerpt(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _dropped(exc: httpx.RemoteProtocolError) -> bool:
    """Whether a protocol error means the peer closed the connection (not a malformed answer)."""
    text = str(exc).lower()
    return not text or "disconnect" in text or "closed" in text or "incomplete" in text


def nothing_answered(exc: httpx.HTTPError) -> bool:
    """Whether the connection ended before the answer's head was whole: httpcore's words for
    an end of stream while the answer is awaited, or a reset while reading it."""
    if isinstance(exc, httpx.ReadError):
        return True
    return "without sending a response" in str(exc)


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def error_for_exception(
    endpoint: Endpoint, timeout_s: float, exc: BaseException, path: str, during: str = ""
) -> ServerError:
    """Translate an ``httpx`` (or socket) exception into a one-line :class:`ServerError`."""
    url = endpoint.url(path)
    where = f"{url}{' ' + during if during else ''}"
    chain = _exception_chain(exc)
    if any(isinstance(e, ssl.SSLError) for e in chain):
        ssl_err = next(e for e in chain if isinstance(e, ssl.SSLError))
        reason = getattr(ssl_err, "reason", None) or type(ssl_err).__name__
        hint = _TLS_HINTS.get(str(reason), "")
        message = f"TLS error talking to {where}: {reason}{hint}"
        kind = "tls"
    elif isinstance(exc, httpx.ConnectTimeout):
        message = f"cannot connect to {url}: timed out after {timeout_s:g} s"
        kind = "timeout"
    elif isinstance(exc, httpx.ConnectError):
        text = " ".join(str(e) for e in chain).lower()
        if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
            message, kind = f"cannot connect to {url}: connection refused", "refused"
        elif "name or service" in text or "nodename" in text or "getaddrinfo" in text:
            message, kind = f"cannot resolve the host of {url}", "resolve"
        else:
            detail = body_excerpt(str(exc) or type(exc).__name__, 100)
            message, kind = f"cannot connect to {url}: {detail}", "other"
    elif isinstance(exc, httpx.TimeoutException):
        message = f"no answer from {where} within {timeout_s:g} s (server hung?)"
        kind = "hung"
    elif isinstance(exc, httpx.RemoteProtocolError) and not _dropped(exc):
        # e.g. "illegal status line": something that is not an HTTP server (ssh, redis)
        detail = body_excerpt(str(exc), 60)
        message = f"{where}: the answer is not valid HTTP ({detail})"
        if "status line" in detail:
            message += "; another program on that port?"
        kind = "garbage"
    elif isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        message = f"connection to {where} closed by the server mid-response"
        kind = "closed"
    elif isinstance(exc, httpx.HTTPError):
        detail = body_excerpt(str(exc) or type(exc).__name__, 100)
        message, kind = f"request to {where} failed: {detail}", "other"
    else:
        detail = body_excerpt(str(exc) or type(exc).__name__, 100)
        message, kind = f"request to {where} failed: {type(exc).__name__}: {detail}", "other"
    return ServerError(redact(message, endpoint), kind=kind, url=url)


def error_for_status(
    endpoint: Endpoint, status: int, reason: str, body: str, path: str
) -> ServerError:
    """The error for an HTTP error status, with a short excerpt of the body."""
    url = endpoint.url(path)
    hint = lead = ""
    # What to do comes first where it is the user's to fix: a status line cuts the tail.
    if status in (401, 403) and not endpoint.named:
        lead = (
            "authorisation required: no API key is sent to an address only Prometheus names;"
            f" run specwatch --url {endpoint.base_url} --api-key … — "
        )
    elif status in (401, 403):
        lead = "API key missing or wrong: use --api-key, or SPECWATCH_API_KEY — "
    elif status == 503:
        hint = " (the server is loading or overloaded)"
    excerpt = redact(body_excerpt(body), endpoint)
    key = endpoint.api_key
    if key:  # a key that is a plain word is still never shown
        hint, lead = hint.replace(key, "***"), lead.replace(key, "***")
    # The hints are not passed through redact(): its "--api-key X" rule would mask "X". The
    # comma keeps a snapshot's or a recording's redaction of the message from masking the "or".
    message = lead + redact(f"{url}: HTTP {status} {reason}", endpoint) + hint
    message += f": {excerpt}" if excerpt else ""
    return ServerError(message, kind="http", status=status, url=url)


__all__ = [
    "MESSAGE_LIMIT",
    "ServerError",
    "body_excerpt",
    "error_for_exception",
    "error_for_status",
    "nothing_answered",
]
