"""Lean GET answers in ``httpx``'s terms: the headers a lean GET sends, and the response or
text ``httpx`` would have made of what came back (:mod:`specwatch.sources.http.lean_get` reads it).
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator

import httpx

from specwatch.sources.http.lean_get import Answer

LEAN_ACCEPT_ENCODING = b"identity"
"""What lean GETs accept: compressing each scrape would cost the watched server CPU, and
decompressing it ours; a server that compresses anyway is still decoded."""
_DROPPED_HEADERS = frozenset((b"content-encoding", b"content-length", b"transfer-encoding"))


def compressed(answer: Answer) -> bool:
    """Whether the server compressed the body anyway (``httpx`` then decodes it)."""
    return any(k.lower() == b"content-encoding" for k, _ in answer.headers)


def plain_headers(answer: Answer) -> list[tuple[bytes, bytes]]:
    """An uncompressed answer's headers as ``httpx`` keeps them for a body it was given."""
    return [(k, v) for k, v in answer.headers if k.lower() not in _DROPPED_HEADERS]


def plain_response(answer: Answer, request: httpx.Request) -> httpx.Response:
    """The ``httpx.Response`` of an uncompressed answer, its body already in."""
    response = httpx.Response(
        answer.status,
        headers=plain_headers(answer),
        content=answer.body,
        request=request,
        extensions={"reason_phrase": answer.reason},
    )
    # what .text would work out from Content-Type on every scrape, looked up instead
    response.encoding = encoding_for(response.headers.get("content-type"))
    return response


def compressed_response(answer: Answer, request: httpx.Request) -> httpx.Response:
    """A compressed answer as a streamed ``httpx.Response``, for ``httpx``'s decoders."""
    return httpx.Response(
        answer.status,
        headers=answer.headers,
        stream=_Chunks(answer.body),
        request=request,
        extensions={"reason_phrase": answer.reason},
    )


class _Chunks(httpx.AsyncByteStream):
    """A body already read, handed to ``httpx``'s decoders in 64 KiB pieces (as read)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), 65536):
            yield self.body[start : start + 65536]


_ENCODINGS: dict[str | None, str] = {}


def encoding_for(content_type: str | None) -> str:
    """The text encoding ``httpx`` gives a response with this ``Content-Type`` (remembered:
    a server sends the same one every time, and working it out parses the header)."""
    known = _ENCODINGS.get(content_type)
    if known is None:
        headers = {} if content_type is None else {"content-type": content_type}
        known = httpx.Response(200, headers=headers).encoding or "utf-8"
        if len(_ENCODINGS) < 64:
            _ENCODINGS[content_type] = known
    return known


def proxied() -> bool:
    """Whether ``httpx`` would send plain-http requests through a proxy from the environment."""
    proxies = urllib.request.getproxies()
    return "http" in proxies or "all" in proxies


def lean_headers(http: httpx.AsyncClient) -> list[tuple[bytes, bytes]]:
    """The headers ``httpx`` sends (the API key among them), ``Host`` first."""
    url = httpx.URL(str(http.base_url))
    headers = [(b"Host", url.netloc)]
    for key, value in http.headers.raw:
        if key.lower() == b"accept-encoding":
            value = LEAN_ACCEPT_ENCODING
        headers.append((key, value))
    return headers


__all__ = [
    "LEAN_ACCEPT_ENCODING",
    "compressed",
    "compressed_response",
    "encoding_for",
    "lean_headers",
    "plain_headers",
    "plain_response",
    "proxied",
]
