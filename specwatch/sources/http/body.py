"""Reading an ``httpx`` response body within a byte limit, and SSE lines within a line limit.

Bodies are read as a stream and reading stops past the limit, so a 500 MB answer costs at most
the limit in memory. A ``Content-Length`` over the limit is refused before reading a byte. A
gzip or deflate body is inflated here, at most :data:`INFLATE_CHUNK` bytes at a time (httpx
inflates each network chunk whole: 64 KiB of a gzip bomb is 64 MB), so inflating stops at the
limit too.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx

from specwatch.core.values import as_int


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


__all__ = [
    "TooLarge",
    "announced_size",
    "bounded_lines",
    "decoded_chunks",
    "detached",
    "read_limited",
]
