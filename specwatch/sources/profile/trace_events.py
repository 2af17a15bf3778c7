"""A trace file's events, read streaming with ijson's C backend, gzipped or not (by its magic
bytes), within bounds on the bytes read and the nesting, so that no file makes the reader hold
more than a few events."""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import ijson

from specwatch.core.sanitize import sanitize_line

MAX_BYTES = 8 * 1024**3
"""Uncompressed bytes read of one trace (a gzip bomb stops here)."""
MAX_DEPTH = 1000
"""Nesting read; ijson's item builder needs memory quadratic in the depth."""
MAX_NAME = 160
"""Characters kept of a kernel, span or file name."""


class TraceError(Exception):
    """A trace that cannot be read; ``str()`` is one line naming the file."""


class _TooMuch(Exception):
    pass


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SENTINEL = b'x"A"B'
"""Appended to a chunk: after the strings go, the bytes end in ``xB`` when the chunk ended
outside a string and in ``A"B`` when inside one (its quote closes that string)."""
_STRING_END = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class _Guarded:
    """The trace's bytes, stopped past :data:`MAX_BYTES` or :data:`MAX_DEPTH`.

    Depth is counted from the bracket bytes outside strings (strings removed by one regex
    substitution a chunk, C speed, no byte looked at twice); a string that runs past a chunk
    is followed by state, not bytes."""

    def __init__(self, raw: IO[bytes], max_bytes: int, depth: bool) -> None:
        self.raw = raw
        self.max_bytes = max_bytes
        self.check_depth = depth
        self.read_bytes = 0
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.read_bytes += len(data)
        if self.read_bytes > self.max_bytes:
            raise _TooMuch(f"larger than {self.max_bytes / 1e6:,.0f} MB uncompressed")
        if self.check_depth:
            self._scan(data)
        return data

    def _scan(self, data: bytes) -> None:
        at = 0
        if self.in_string:
            at = 1 if self.escaped else 0
            self.escaped = False
            m = _STRING_END.match(data, at)
            if m is None:
                self.escaped = _odd_backslashes(data[at:])
                return
            at = m.end()
            self.in_string = False
        rest = data[at:] if at else data
        bare = _STRING.sub(b"", rest + _SENTINEL)
        if bare.endswith(b'A"B'):
            self.in_string = True
            self.escaped = _odd_backslashes(rest)
            bare = bare[:-3]
        else:
            bare = bare[:-2]
        self.depth = _depth(bare, self.depth)


def _odd_backslashes(data: bytes) -> bool:
    return (len(data) - len(data.rstrip(b"\\"))) % 2 == 1


def _depth(bare: bytes, depth: int, piece: int = 65536) -> int:
    """The nesting after ``bare`` (JSON without its strings).

    Raises:
        _TooMuch: Deeper than :data:`MAX_DEPTH` anywhere in it.
    """
    for at in range(0, len(bare), piece):
        chunk = bare[at : at + piece]
        opens = chunk.count(b"[") + chunk.count(b"{")
        if depth + opens <= MAX_DEPTH:
            depth += opens - chunk.count(b"]") - chunk.count(b"}")
        elif piece > 64:
            depth = _depth(chunk, depth, piece // 16)
        else:
            for byte in chunk:
                if byte in (0x5B, 0x7B):
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise _TooMuch(f"nested deeper than {MAX_DEPTH} levels")
                elif byte in (0x5D, 0x7D):
                    depth -= 1
    return max(0, depth)


def _open(path: Path) -> IO[bytes]:
    f = path.open("rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        f.close()
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    return f


def events(path: Path, max_bytes: int = MAX_BYTES, depth: bool = False) -> Iterator[dict[str, Any]]:
    """The trace's events that are JSON objects (anything else in the list is skipped); the
    first pass checks the nesting (the second reads the same bytes)."""
    name = sanitize_line(path.name, MAX_NAME)
    try:
        with _open(path) as f:
            for e in ijson.items(_Guarded(f, max_bytes, depth), "traceEvents.item", use_float=True):
                if isinstance(e, dict):
                    yield e
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TraceError(f"{name}: truncated or corrupt gzip ({exc})") from None
    except ijson.JSONError as exc:
        raise TraceError(f"{name}: not a JSON trace ({sanitize_line(str(exc), 80)})") from None
    except UnicodeDecodeError:
        raise TraceError(f"{name}: not a JSON trace (bytes that are not UTF-8)") from None
    except _TooMuch as exc:
        raise TraceError(f"{name}: {exc}, not read") from None
    except OSError as exc:
        raise TraceError(f"{name}: cannot read ({exc.strerror or exc})") from None
