"""Read a whole file, pipe or FIFO, bounded in size and in time.

A FIFO nobody writes to, or a pipe that stalls, ends in one clear line instead of a hang, while
process substitution (``<(ssh box cat a.json)``) keeps working.
"""

from __future__ import annotations

import os
import select
import stat
import time
from pathlib import Path


class BoundedReadError(Exception):
    """Too large, too slow, or a directory; ``str(e)`` is the reason, without the path."""

    def __init__(self, reason: str, too_large: bool = False) -> None:
        super().__init__(reason)
        self.too_large = too_large
        """The content is over the size limit (the other reasons are a failure to read)."""


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def read_bounded(p: Path, max_bytes: int, timeout_s: float, what: str = "a file") -> bytes:
    """The bytes of ``p``, at most ``max_bytes``, within ``timeout_s`` for a pipe or FIFO.

    Opened non-blocking: opening a FIFO for reading otherwise waits for a writer forever.

    Args:
        p: A regular file, a pipe (``/dev/fd/N`` from process substitution) or a FIFO.
        max_bytes: Refuse anything larger.
        timeout_s: Longest wait for a pipe or FIFO to deliver everything.
        what: How to call the content in messages (``"a snapshot"``).

    Raises:
        BoundedReadError: Too large, too slow, or a directory (one line).
        OSError: It cannot be opened or read.
    """
    too_big = f"larger than the {_mib(max_bytes)} {what} can be; refusing to read it"
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BoundedReadError("it is a directory")
        if stat.S_ISREG(st.st_mode):
            if st.st_size > max_bytes:
                raise BoundedReadError(
                    f"{_mib(st.st_size)} is larger than the {_mib(max_bytes)} "
                    f"{what} can be; refusing to read it",
                    too_large=True,
                )
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as f:
                # Sized by the file, not the limit: ``read(n)`` allocates ``n`` bytes first.
                data = f.read(st.st_size + 1)
                if len(data) > st.st_size:  # it grew after fstat
                    data += f.read(max_bytes + 1 - len(data))
            if len(data) > max_bytes:
                raise BoundedReadError(too_big, too_large=True)
            return data
        deadline = time.monotonic() + timeout_s
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                got = f"{_mib(size)} so far" if size else "nothing arrived"
                raise BoundedReadError(
                    f"not complete after {timeout_s:g} s ({got}); a FIFO or pipe with no writer?"
                )
            # Linux reports hang-up on a FIFO only once a writer came and went, so a FIFO
            # nobody ever opens waits here until the deadline instead of reading as empty.
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise BoundedReadError(too_big, too_large=True)
    finally:
        os.close(fd)


__all__ = ["BoundedReadError", "read_bounded"]
