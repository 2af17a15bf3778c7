"""Keep-alive HTTP/1.1 GETs to one plain ``http://`` origin: ``h11`` on an asyncio Protocol.

The live watch GETs ``/metrics`` every second; through ``httpx`` + ``httpcore`` + ``anyio`` one
19 KB GET cost about 2.9 ms of CPU (six event-loop iterations, cancel scopes, URL and model
objects), against 0.3 ms for the socket work itself. Here ``h11`` (the parser ``httpcore`` uses,
so malformed answers fail with the same words) is fed straight from ``data_received`` and the
waiting request is woken once: when the answer is complete, or earlier only when it must stop
(an announced size over the limit, a redirect, a failure).

Failures are raised as the ``httpx`` exceptions ``httpcore`` would raise for the same event, so
:func:`specwatch.sources.http.server_errors.error_for_exception` words them the same. The client
(:mod:`specwatch.sources.http.client`) keeps retries, redirects, deadlines and banner sniffing.
"""

from __future__ import annotations

import asyncio
import builtins
import socket
import time
from dataclasses import dataclass

import h11
import httpx

from specwatch.sources.http.lean_head import PlainHead, read_plain_head, request_for

MAX_HEAD_BYTES = 100 * 1024
"""Longest answer head accepted (``httpcore``'s limit)."""
KEEPALIVE_S = 5.0
"""An idle connection older than this is not reused (``httpx``'s default expiry)."""
MAX_IDLE = 4
"""Idle connections kept for reuse."""
_REDIRECTS = frozenset((301, 302, 303, 307, 308))


@dataclass(slots=True)
class Answer:
    """One answer: its head and (unless ``stopped``) its raw body.

    ``stopped`` says why the body was not read to its end: ``"redirect"``, ``"announced"``
    (``Content-Length`` over the limit) or ``"over"`` (more body than the limit).
    """

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    stopped: str = ""
    size: int | None = None
    """The announced size (``Content-Length``) when known."""


class _Exchange(asyncio.Protocol):
    """One connection; one request at a time."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.loop = asyncio.get_running_loop()
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.head_arrived = False
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0
        self._limit = 0
        self._truncate = False
        self._head: h11.Response | None = None
        self._parts: list[bytes] = []
        self._got = 0
        self._stopped = ""
        self._size: int | None = None
        self._failure: httpx.HTTPError | None = None
        self._plain_ok = True
        """Answers are read by :func:`read_plain_head` until one is not plain; then ``h11``."""
        self._request: h11.Request | None = None
        self._buffer = bytearray()
        self._plain: PlainHead | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.close()  # bytes nobody asked for: this connection cannot be trusted again
            return
        self._last = self.loop.time()
        if self._plain_ok:
            self._buffer += data
            self._read_plain()
            return
        self.h11.receive_data(data)
        self._pump()

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._plain_ok:
            self._to_h11()  # h11 words what went wrong with what arrived
            if waiter.done():
                return
        if exc is not None:
            self._fail(httpx.ReadError(str(exc)))
        elif self.h11.their_state is h11.SEND_RESPONSE:
            self._fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))
        else:
            self.h11.receive_data(b"")
            self._pump()
            if not waiter.done():
                self._fail(httpx.RemoteProtocolError("Server disconnected mid-response."))

    # --- the exchange --------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (an unfinished answer fails as closed)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def get(
        self, target: bytes, headers: list[tuple[bytes, bytes]], limit: int, error_limit: int
    ) -> Answer:
        """Send one GET and wait for its answer (see :class:`Answer`).

        Raises:
            httpx.HTTPError: The connection failed, hung or the answer is not HTTP
                (``head_arrived`` says whether before or after the answer's head).
        """
        self._limit, self._error_limit = limit, error_limit
        self._head, self._parts, self._got, self._stopped, self._size = None, [], 0, "", None
        self._failure = None
        self.head_arrived = False
        waiter = self._waiter = self.loop.create_future()
        assert self.transport is not None
        request, plain_data = request_for(target, headers)
        if self._plain_ok:
            self._request, self._buffer, self._plain = request, bytearray(), None
            data = plain_data
        else:
            data = self.h11.send(request) or b""
            data += self.h11.send(h11.EndOfMessage()) or b""
        self._last = self.loop.time()
        self._timer = self.loop.call_at(self._last + self.timeout_s, self._check_idle)
        done = False
        try:
            self.transport.write(data)
            await waiter
            done = True
        finally:
            self._timer.cancel()
            self._waiter = None
            if not done:
                self.close()
        if self._failure is not None:
            self.close()
            raise self._failure
        plain = self._plain
        if plain is not None:
            return self._plain_answer(plain)
        head = self._head
        assert head is not None
        if self._stopped:
            self.close()
        elif self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            self.idle_since = time.monotonic()
        else:
            self.close()
        body = b"".join(self._parts)
        if self._truncate and len(body) > self._limit:
            body = body[: self._limit]
        return Answer(
            head.status_code,
            head.reason,
            list(head.headers.raw_items()),
            body,
            self._stopped,
            self._size,
        )

    def _read_plain(self) -> None:
        """Read what arrived as a plain answer; hand it all to ``h11`` when it is not one."""
        plain = self._plain
        if plain is None:
            got = read_plain_head(self._buffer, MAX_HEAD_BYTES)
            if got is True:
                return
            if got is False:
                self._to_h11()
                return
            assert isinstance(got, PlainHead)
            self._plain = plain = got
            self.head_arrived = True
            self._size = plain.size
            if plain.size > self._limit:
                self._finish("announced")
                return
        have = len(self._buffer) - plain.body_at
        if have == plain.size:
            self._finish()
        elif have > plain.size:
            self._to_h11()  # more than the answer: h11 keeps the rest, as it always did

    def _to_h11(self) -> None:
        """From now on this connection is read by ``h11``, starting with what arrived."""
        self._plain_ok = False
        self._plain = None
        if self._request is None:
            return
        self.h11.send(self._request)  # already sent: this only brings h11's state along
        self.h11.send(h11.EndOfMessage())
        data, self._buffer = bytes(self._buffer), bytearray()
        if data:
            self.h11.receive_data(data)
            self._pump()

    def _plain_answer(self, plain: PlainHead) -> Answer:
        self._plain = None
        if self._stopped:
            self.close()
            return Answer(200, b"OK", plain.headers, b"", self._stopped, self._size)
        self.idle_since = time.monotonic()
        body = bytes(self._buffer[plain.body_at :])
        self._buffer = bytearray()
        return Answer(200, b"OK", plain.headers, body, "", self._size)

    def _check_idle(self) -> None:
        due = self._last + self.timeout_s
        if self.loop.time() >= due:
            self._fail(httpx.ReadTimeout("timed out"))
        else:
            self._timer = self.loop.call_at(due, self._check_idle)

    def _fail(self, error: httpx.HTTPError) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._failure = error
            self._waiter.set_result(None)

    def _finish(self, stopped: str = "") -> None:
        self._stopped = stopped
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _pump(self) -> None:
        try:
            while True:
                event = self.h11.next_event()
                kind = type(event)
                if kind is h11.Data:
                    assert isinstance(event, h11.Data)
                    self._parts.append(event.data)
                    self._got += len(event.data)
                    if self._got > self._limit:
                        # an error answer is cut to its excerpt; anything else is refused
                        self._finish("" if self._truncate else "over")
                        return
                elif kind is h11.Response:
                    assert isinstance(event, h11.Response)
                    if self._on_head(event):
                        return
                elif kind is h11.EndOfMessage:
                    self._finish()
                    return
                elif event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                elif kind is h11.ConnectionClosed:
                    self._finish()
                    return
        except h11.RemoteProtocolError as exc:
            self._fail(httpx.RemoteProtocolError(str(exc)))

    def _on_head(self, head: h11.Response) -> bool:
        """Take the head; ``True`` when the body is not wanted."""
        self._head = head
        self.head_arrived = True
        headers = head.headers
        if head.status_code in _REDIRECTS and any(k == b"location" for k, _ in headers):
            self._finish("redirect")
            return True
        if head.status_code >= 400:
            self._limit, self._truncate = self._error_limit, True
            return False
        self._truncate = False
        if any(k == b"content-encoding" for k, _ in headers):
            return False  # the decoded size is what counts
        for key, value in headers:
            if key == b"content-length" and value.isdigit():
                self._size = int(value)
                if self._size > self._limit:
                    self._finish("announced")
                    return True
        return False


class LeanGetter:
    """Keep-alive GETs to one ``http://host:port`` origin, a few idle connections pooled."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._idle: list[_Exchange] = []

    async def get(
        self, target: bytes, headers: list[tuple[bytes, bytes]], limit: int, error_limit: int
    ) -> Answer:
        """GET ``target`` on an idle connection, else a new one (see :meth:`_Exchange.get`).

        ``limit`` bounds the body of a good answer, ``error_limit`` (cut, not refused) that of
        an error status.
        """
        exchange = self._take() or await self._connect()
        try:
            return await self._get_on(exchange, target, headers, limit, error_limit)
        except (httpx.RemoteProtocolError, httpx.ReadError):
            if exchange.head_arrived:
                raise
        # a kept-alive connection the server closed (e.g. it restarted): a GET is safe to send
        # once more, on a fresh connection
        fresh = await self._connect()
        return await self._get_on(fresh, target, headers, limit, error_limit)

    async def _get_on(
        self,
        exchange: _Exchange,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        limit: int,
        error_limit: int,
    ) -> Answer:
        answer = await exchange.get(target, headers, limit, error_limit)
        if not exchange.closed and len(self._idle) < MAX_IDLE:
            self._idle.append(exchange)
        return answer

    def close(self) -> None:
        """Close every idle connection."""
        for exchange in self._idle:
            exchange.close()
        self._idle.clear()

    def _take(self) -> _Exchange | None:
        now = time.monotonic()
        while self._idle:
            exchange = self._idle.pop()
            if not exchange.closed and now - exchange.idle_since < KEEPALIVE_S:
                return exchange
            exchange.close()
        return None

    async def _connect(self) -> _Exchange:
        """A new connection, addresses tried in turn, failures chained as ``anyio`` does.

        Raises:
            httpx.ConnectError: Not resolved or no address accepted.
            httpx.ConnectTimeout: Not connected within the timeout.
        """
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout_s):
                try:
                    infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
                except OSError as exc:
                    raise httpx.ConnectError(str(exc)) from exc
                errors: list[OSError] = []
                for family, kind, proto, _name, address in infos:
                    try:
                        sock = socket.socket(family, kind, proto)
                    except OSError as exc:
                        errors.append(exc)
                        continue
                    try:
                        sock.setblocking(False)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        await loop.sock_connect(sock, address)
                    except BaseException as exc:
                        sock.close()
                        if not isinstance(exc, OSError):
                            raise
                        errors.append(exc)
                        continue
                    _, exchange = await loop.create_connection(
                        lambda: _Exchange(self.timeout_s), sock=sock
                    )
                    return exchange
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out") from exc
        group = getattr(builtins, "ExceptionGroup", None)
        cause: BaseException | None = errors[0] if errors else None
        if len(errors) > 1 and group is not None:
            cause = group("multiple connection attempts failed", errors)
        raise httpx.ConnectError("All connection attempts failed") from cause


def split_origin(url: httpx.URL) -> tuple[str, int] | None:
    """``(host, port)`` of a plain ``http://`` URL, else ``None``."""
    if url.scheme != "http" or not url.host:
        return None
    return url.host, url.port or 80


__all__ = ["Answer", "LeanGetter", "split_origin"]
