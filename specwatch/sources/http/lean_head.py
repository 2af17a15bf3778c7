"""The plain answer head a ``/metrics`` GET nearly always gets, read without ``h11``.

``h11`` costs about 70 µs of state machine per exchange. :func:`read_plain_head` accepts only
a head ``h11`` would read the same way and that needs none of its machinery: ``HTTP/1.1 200
OK``, CRLF lines, header names that are tokens and values of visible ASCII, one
``Content-Length``, no ``Transfer-Encoding``, no ``Content-Encoding``, no ``Connection`` other
than ``keep-alive``. Anything else goes to ``h11``, which reads (or refuses) it as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import h11

_STATUS = b"HTTP/1.1 200 OK\r\n"
_BLANK = re.compile(b"\n\r?\n")
"""Where ``h11`` ends a head."""
_HEADER = re.compile(
    rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*"
    rb"((?:[\x21-\x7e](?:[ \t\x21-\x7e]*[\x21-\x7e])?)?)[ \t]*"
)
"""A header line ``h11`` takes as it is (its field name and value, OWS stripped)."""
_DIGITS = re.compile(rb"[0-9]+")
_NOT_PLAIN = (b"transfer-encoding", b"content-encoding")


@dataclass(frozen=True, slots=True)
class PlainHead:
    """A plain ``200 OK`` head: its headers as ``h11`` gives them, the body's size and start."""

    headers: list[tuple[bytes, bytes]]
    """Raw names (as ``h11``'s ``raw_items``) and values."""
    size: int
    body_at: int


def read_plain_head(data: bytes | bytearray, max_head: int) -> PlainHead | bool:
    """The head at the start of ``data`` when it is plain (see the module); ``True`` when more
    bytes are needed to tell; ``False`` when ``h11`` must read it."""
    if not data.startswith(_STATUS):
        return len(data) < len(_STATUS) and _STATUS.startswith(data)
    found = _BLANK.search(data)
    if found is None:
        return len(data) <= max_head
    end = found.start()
    if found.end() > max_head or found.end() - end != 3 or data[end - 1] != 13:
        return False  # lines not ended by CRLF, or a head h11 may find too long
    size = -1
    headers: list[tuple[bytes, bytes]] = []
    for line in bytes(data[len(_STATUS) : end - 1]).split(b"\r\n"):
        match = _HEADER.fullmatch(line)
        if match is None:
            return False
        name, value = match.groups()
        lower = name.lower()
        if lower == b"content-length":
            if size >= 0 or not _DIGITS.fullmatch(value):
                return False
            size = int(value)
        elif lower in _NOT_PLAIN or (lower == b"connection" and value.lower() != b"keep-alive"):
            return False
        headers.append((name, value))
    if size < 0:
        return False
    return PlainHead(headers, size, found.end())


_REQUESTS: dict[tuple[bytes, tuple[tuple[bytes, bytes], ...]], tuple[h11.Request, bytes]] = {}


def request_for(target: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[h11.Request, bytes]:
    """The GET event for ``target`` and its bytes (``h11`` validates headers on each new
    event: made once)."""
    key = (target, tuple(headers))
    known = _REQUESTS.get(key)
    if known is None:
        request = h11.Request(method="GET", target=target, headers=headers)
        known = (request, request_bytes(request))
        if len(_REQUESTS) < 256:
            _REQUESTS[key] = known
    return known


def request_bytes(request: h11.Request) -> bytes:
    """What ``h11`` sends for ``request`` and its end (the same bytes every time)."""
    conn = h11.Connection(h11.CLIENT)
    return (conn.send(request) or b"") + (conn.send(h11.EndOfMessage()) or b"")


__all__ = ["PlainHead", "read_plain_head", "request_bytes", "request_for"]
