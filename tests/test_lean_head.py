"""Plain answers read without ``h11`` come out exactly as ``h11`` reads them; others go to it."""

from __future__ import annotations

import asyncio

import h11
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specwatch.sources.http.lean_get import Answer, _Exchange
from specwatch.sources.http.lean_head import PlainHead, read_plain_head

BODY = b"a_total 1\n" * 50
PLAIN = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n" % len(BODY)
HEADERS = [(b"Host", b"x")]


class _Transport(asyncio.Transport):
    """Answers each request with the next script: chunks, then ``None`` to drop the line."""

    def __init__(self, exchange: _Exchange, scripts: list[list[bytes | None]]) -> None:
        super().__init__()
        self.exchange, self.scripts = exchange, scripts

    def write(self, data: bytes | bytearray | memoryview) -> None:
        loop = asyncio.get_running_loop()
        for chunk in self.scripts.pop(0):
            if chunk is None:
                loop.call_soon(self.exchange.connection_lost, None)
            else:
                loop.call_soon(self.exchange.data_received, chunk)

    def close(self) -> None:
        self.exchange.closed = True


async def _run(scripts: list[list[bytes | None]], plain: bool) -> list[object]:
    """Each answer (or the error's type and words) with the connection's state after it."""
    exchange = _Exchange(5.0)
    exchange._plain_ok = plain
    exchange.connection_made(_Transport(exchange, scripts))
    out: list[object] = []
    for _ in range(len(scripts)):
        if exchange.closed:
            break
        try:
            answer = await exchange.get(b"/metrics", HEADERS, 1 << 20, 1 << 10)
        except httpx.HTTPError as exc:
            out.append((type(exc), str(exc), exchange.head_arrived))
            break
        out.append((_fields(answer), exchange.closed))
    return out


def _fields(answer: Answer) -> tuple[object, ...]:
    return (answer.status, answer.reason, answer.headers, answer.body, answer.stopped)


def _same_as_h11(scripts: list[list[bytes | None]]) -> list[object]:
    lean = asyncio.run(_run([list(s) for s in scripts], plain=True))
    assert lean == asyncio.run(_run([list(s) for s in scripts], plain=False))
    return lean


def _bytewise(data: bytes) -> list[bytes | None]:
    return [data[i : i + 1] for i in range(len(data))]


def test_a_plain_answer_skips_h11_in_any_pieces() -> None:
    exchange_states: list[object] = []

    async def run() -> None:
        exchange = _Exchange(5.0)
        exchange.connection_made(_Transport(exchange, [[PLAIN + BODY], _bytewise(PLAIN + BODY)]))
        for _ in range(2):
            answer = await exchange.get(b"/metrics", HEADERS, 1 << 20, 1 << 10)
            assert answer.body == BODY and answer.status == 200 and not exchange.closed
        exchange_states.append(exchange.h11.our_state)

    asyncio.run(run())
    assert exchange_states == [h11.IDLE]  # h11 never saw a thing
    assert _same_as_h11([[PLAIN + BODY], _bytewise(PLAIN + BODY), [PLAIN[:7], PLAIN[7:] + BODY]])


@pytest.mark.parametrize(
    "script",
    [
        [PLAIN.replace(b"\r\n", b"\n") + BODY],  # LF line ends
        [PLAIN + BODY + PLAIN],  # more than the answer: h11 keeps the rest
        [PLAIN.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n") + BODY],
        [PLAIN.replace(b"\r\n\r\n", b"\r\nConnection: Keep-Alive\r\n\r\n") + BODY],
        [PLAIN.replace(b"content-type: text/plain", b"x:  \tspaced value\t ") + BODY],
        [PLAIN.replace(b"content-type: text/plain", b"x: caf\xe9") + BODY],
        [PLAIN.replace(b"content-type: text/plain", b" folded") + BODY],
        [PLAIN.replace(b"content-length: 500", b"content-length: 500, 500") + BODY],
        [PLAIN.replace(b"content-length: 500", b"content-length: 400\r\ncontent-length: 500")],
        [PLAIN.replace(b"200 OK", b"404 Not Found") + BODY],
        [b"HTTP/1.1 100 Continue\r\n\r\n" + PLAIN + BODY],
        [b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"],
        [PLAIN + BODY[:100], None],  # dropped mid-body
        [PLAIN[:20], None],  # dropped mid-head
        [None],  # dropped before a byte
        [b"SSH-2.0-OpenSSH_9.6\r\n", None],
        [PLAIN.replace(b"content-length: 500", b"content-length: 99999999") + BODY],
        [b"HTTP/1.1 200 OK\r\n" + b"x: " + b"y" * (200 * 1024) + b"\r\n\r\n"],
    ],
)
def test_answers_that_are_not_plain_are_read_as_h11_reads_them(
    script: list[bytes | None],
) -> None:
    assert _same_as_h11([script, [PLAIN + BODY]])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text("abcXYZ-_!~ :\t\x7f\x00é", min_size=0, max_size=6),
            st.text('ab Z\t,;="\x01\x7fé', min_size=0, max_size=8),
        ),
        max_size=4,
    ),
    st.sampled_from([b"\r\n", b"\n"]),
)
def test_a_head_read_plain_is_the_head_h11_reads(
    extra: list[tuple[str, str]], newline: bytes
) -> None:
    lines = [b"HTTP/1.1 200 OK", *(f"{k}:{v}".encode("latin-1") for k, v in extra)]
    lines.append(b"Content-Length: 3")
    data = newline.join(lines) + newline + newline + b"abc"
    got = read_plain_head(data, 1 << 16)
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        assert got is False  # h11 refuses it: it must be h11 that says so
        return
    if isinstance(got, PlainHead):
        assert isinstance(event, h11.Response)
        assert (event.status_code, event.reason) == (200, b"OK")
        assert list(event.headers.raw_items()) == got.headers
        assert got.size == 3 and data[got.body_at :] == b"abc"
    else:
        assert got is False


def test_a_partial_head_waits_and_a_foreign_greeting_goes_to_h11() -> None:
    assert read_plain_head(PLAIN[:5], 1 << 16) is True
    assert read_plain_head(PLAIN[:-2], 1 << 16) is True
    assert read_plain_head(bytearray(PLAIN[:30]), 1 << 16) is True
    assert read_plain_head(b"SSH-2.0", 1 << 16) is False
    assert read_plain_head(PLAIN[:-2], 10) is False
    assert isinstance(read_plain_head(PLAIN, 1 << 16), PlainHead)
