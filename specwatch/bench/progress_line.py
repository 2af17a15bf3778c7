"""One line of progress updated in place on a terminal (``\\r``), plain lines elsewhere.

``specwatch bench`` shows each run's tokens so far and tok/s while it streams, and
``bench --wait`` its attempts, on one line that the next update overwrites. When the stream is
not a terminal (a pipe, a file, CI logs) nothing is drawn in place: the in-place updates are
dropped and only the final lines are printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

MIN_REDRAW_S = 0.1
"""Redraw at most ten times a second: a fast stream sends hundreds of chunks per second."""


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (``False`` when it cannot say)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class ProgressLine:
    """A line redrawn in place on a terminal.

    Args:
        stream: Where to write.
        live: Draw in place; default: when ``stream`` is a terminal.
        clock: Monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        stream: TextIO,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.live = is_terminal(stream) if live is None else live
        self.clock = clock
        self._shown = 0
        self._last = -MIN_REDRAW_S

    def show(self, text: str, *, force: bool = False) -> None:
        """Draw ``text`` over the previous one (throttled unless ``force``); nothing off a TTY."""
        if not self.live:
            return
        now = self.clock()
        if not force and now - self._last < MIN_REDRAW_S:
            return
        self._last = now
        pad = " " * max(0, self._shown - len(text))
        self._write("\r" + text + pad)
        self._shown = len(text)

    @property
    def drawn(self) -> bool:
        """Whether a line stands on the terminal now."""
        return self._shown > 0

    def clear(self) -> None:
        """Remove the drawn line, so the next ordinary line starts clean."""
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.live = False  # the terminal went away: the runs matter more than the line


__all__ = ["MIN_REDRAW_S", "ProgressLine", "is_terminal"]
