"""The httpx-based :class:`ServerClient` against scripted servers (real sockets): keep-alive,
limits, redirects, deadlines and one-line errors."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from specwatch.sources.http.client import METRICS_LIMIT_BYTES, ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.http.server_errors import ServerError

Handler = Callable[[int, bytes], bytes | None]
"""(connection number, request head) -> answer bytes, or ``None`` to close without answering.
An answer ending in :data:`CLOSE` is sent without it and the connection closed after it."""
CLOSE = b"<close>"


def _answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers, "", ""]
    return "\r\n".join(lines).encode() + body


def _body_length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


@asynccontextmanager
async def _server(handler: Handler) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    """Serve ``handler``; yields the URL, the request heads seen and connections opened."""
    heads: list[bytes] = []
    opened: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(len(opened))
        number = len(opened)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                heads.append(head)
                await reader.readexactly(_body_length(head))
                answer = handler(number, head)
                if answer is None:
                    break
                writer.write(answer.removesuffix(CLOSE))
                await writer.drain()
                if answer.endswith(CLOSE):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", heads, opened
    finally:
        server.close()


async def test_keeps_the_connection_and_sends_the_key() -> None:
    async with (
        _server(lambda _n, _h: _answer(b"ok 1\n")) as (url, heads, opened),
        ServerClient(Endpoint(url, "sk-test")) as client,
    ):
        for _ in range(3):
            response = await client.get("/metrics")
            assert response.text == "ok 1\n"
    assert len(opened) == 1
    assert len(heads) == 3
    assert b"authorization: bearer sk-test" in heads[0].lower()
    assert heads[0].startswith(b"GET /metrics HTTP/1.1\r\n")


async def test_a_kept_alive_connection_the_server_closed_is_retried_once() -> None:
    served: dict[int, int] = {}

    def handler(number: int, _head: bytes) -> bytes | None:
        served[number] = served.get(number, 0) + 1
        if number == 1 and served[number] > 1:
            return None  # the first connection closes on its second request
        return _answer(b"fine")

    async with (
        _server(handler) as (url, _heads, opened),
        ServerClient(Endpoint(url)) as client,
    ):
        assert (await client.get("/metrics")).content == b"fine"
        assert (await client.get("/metrics")).content == b"fine"
    assert len(opened) == 2
    assert served == {1: 2, 2: 1}


async def _post_stream(client: ServerClient) -> bytes:
    async with client.stream_post("/completion", {"prompt": "hi", "stream": True}) as response:
        return await response.aread()


async def test_a_post_the_kept_alive_connection_dropped_unanswered_is_sent_once_more() -> None:
    # a real llama-server now and then closes a kept-alive connection after a streamed answer,
    # and the next request on it ends before a byte of answer
    def handler(number: int, head: bytes) -> bytes | None:
        if number == 1 and head.startswith(b"POST"):
            return None
        return _answer(b"data: {}\n\n")

    async with (
        _server(handler) as (url, heads, opened),
        ServerClient(Endpoint(url)) as client,
    ):
        await client.get("/metrics")
        assert await _post_stream(client) == b"data: {}\n\n"
    assert len(opened) == 2
    assert [head.split(b" ", 1)[0] for head in heads] == [b"GET", b"POST", b"POST"]


async def test_a_post_whose_answer_had_begun_is_not_sent_again() -> None:
    # the server took it and answered part: sending it again would run it twice
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ndata: {}" + CLOSE
    async with (
        _server(lambda _n, _h: cut) as (url, heads, opened),
        ServerClient(Endpoint(url)) as client,
    ):
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            await _post_stream(client)
    assert len(heads) == 1 and len(opened) == 1


async def test_an_announced_size_over_the_limit_is_refused() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n"
    async with (
        _server(lambda _n, _h: head) as (url, _heads, _opened),
        ServerClient(Endpoint(url)) as client,
    ):
        with pytest.raises(ServerError) as caught:
            await client.get("/metrics", limit=METRICS_LIMIT_BYTES)
    assert caught.value.kind == "too_large"
    assert "answer too large (954 MiB, limit 8 MiB)" in str(caught.value)


async def test_an_error_answer_is_cut_to_its_excerpt() -> None:
    body = b"x" * 200_000
    answer = _answer(body, status="500 Internal Server Error")
    async with (
        _server(lambda _n, _h: answer) as (url, _heads, _opened),
        ServerClient(Endpoint(url)) as client,
    ):
        response = await client.get("/metrics", check=False)
        assert response.status_code == 500
        assert len(response.content) == 64 * 1024
        with pytest.raises(ServerError) as caught:
            await client.get("/metrics")
    assert "HTTP 500 Internal Server Error: xxx" in str(caught.value)


async def test_a_compressed_answer_is_decoded_anyway() -> None:
    packed = gzip.compress(b"vllm:x 1\n" * 1000)
    answer = _answer(packed, "Content-Encoding: gzip")
    async with (
        _server(lambda _n, _h: answer) as (url, heads, _opened),
        ServerClient(Endpoint(url)) as client,
    ):
        response = await client.get("/metrics")
        assert response.content == b"vllm:x 1\n" * 1000
        assert "content-encoding" not in response.headers
        with pytest.raises(ServerError) as caught:
            await client.get("/metrics", limit=1000)
    assert b"accept-encoding: identity" in heads[0].lower()
    assert "answer too large (over 0.0 MiB" in str(caught.value)


async def test_same_origin_redirect_followed_other_origin_refused() -> None:
    def handler(_n: int, head: bytes) -> bytes:
        if head.startswith(b"GET /old "):
            return _answer(b"", "Location: /metrics", status="307 Temporary Redirect")
        if head.startswith(b"GET /away "):
            return _answer(b"", "Location: http://10.1.2.3/x", status="302 Found")
        return _answer(b"here")

    async with (
        _server(handler) as (url, _heads, _opened),
        ServerClient(Endpoint(url)) as client,
    ):
        assert (await client.get("/old")).content == b"here"
        with pytest.raises(ServerError) as caught:
            await client.get("/away")
    assert caught.value.kind == "redirect"
    assert "redirects to http://10.1.2.3/x (HTTP 302), another origin" in str(caught.value)


async def test_a_silent_server_is_hung_after_the_read_timeout() -> None:
    async with (
        _server(lambda _n, _h: b"HTTP/1.1 200 OK\r\n") as (url, _heads, _opened),
        ServerClient(Endpoint(url), timeout_s=0.3) as client,
    ):
        client._sniffed = True  # not a banner question here
        with pytest.raises(ServerError) as caught:
            await client.get("/metrics")
    assert caught.value.kind == "hung"
    assert "within 0.3 s (server hung?)" in str(caught.value)


async def test_garbage_and_a_dropped_body_are_worded_as_before() -> None:
    def handler(_n: int, head: bytes) -> bytes:
        if head.startswith(b"GET /garbage "):
            return b"NOT HTTP AT ALL\r\n\r\n"
        return b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort" + CLOSE

    async with (
        _server(handler) as (url, _heads, _opened),
        ServerClient(Endpoint(url)) as client,
    ):
        with pytest.raises(ServerError) as garbage:
            await client.get("/garbage")
        with pytest.raises(ServerError) as dropped:
            await client.get("/short")
    assert garbage.value.kind == "garbage"
    assert "the answer is not valid HTTP" in str(garbage.value)
    assert dropped.value.kind == "closed"
    assert "closed by the server mid-response" in str(dropped.value)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain; charset=iso-8859-1",
        "text/plain; version=0.0.4; charset=utf-8",
        "text/plain; charset=no-such-codec",
        None,
    ],
)
async def test_text_is_decoded_by_the_content_type_as_httpx_would(
    content_type: str | None,
) -> None:
    body = "caf\u00e9 1\n".encode("latin-1")
    extra = () if content_type is None else (f"Content-Type: {content_type}",)
    async with (
        _server(lambda _n, _h: _answer(body, *extra)) as (url, _heads, _opened),
        ServerClient(Endpoint(url)) as client,
    ):
        for _ in range(2):  # the second from the remembered encoding
            response = await client.get("/metrics")
            expected = httpx.Response(200, headers=response.headers, content=body)
            assert response.encoding == expected.encoding
            assert response.text == expected.text
    latin = content_type is not None and "iso-8859-1" in content_type
    assert (response.text == "caf\u00e9 1\n") == latin  # else a replacement character


async def test_a_trickling_server_is_cut_at_the_deadline() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        try:
            while True:  # a byte at a time, each well within the read timeout
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(0.02)
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    loop = asyncio.get_running_loop()
    try:
        async with ServerClient(Endpoint(url), timeout_s=5.0, deadline_s=0.3) as client:
            started = loop.time()
            with pytest.raises(ServerError) as caught:
                await client.get("/metrics")
            assert loop.time() - started < 2.0
    finally:
        server.close()
    assert caught.value.kind == "deadline"
    assert str(caught.value).startswith(f"no complete answer from {url}/metrics")


@pytest.mark.parametrize(
    ("answer", "kind", "words"),
    [
        (None, "closed", "closed by the server"),  # dropped before a byte
        (b"HTTP/1.1 200 OK\r\nContent-Le" + CLOSE, "closed", "closed by the server"),
        (b"HTTP/1.1 200 OK\r\nx: " + b"y" * (200 * 1024) + b"\r\n\r\n", "garbage", "not valid"),
    ],
)
async def test_a_dropped_or_oversized_head_is_one_line(
    answer: bytes | None, kind: str, words: str
) -> None:
    async with (
        _server(lambda _n, _h: answer) as (url, _heads, _opened),
        ServerClient(Endpoint(url), timeout_s=0.5) as client,
    ):
        client._sniffed = True  # not a banner question here
        with pytest.raises(ServerError) as caught:
            await client.get("/metrics")
    assert caught.value.kind == kind
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
