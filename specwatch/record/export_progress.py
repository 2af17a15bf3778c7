"""Progress and throughput of ``specwatch export`` on stderr.

On a terminal one line is redrawn in place (share of the range read, rows, megabytes written
and MB/s); whatever stderr is, an export that took a while ends with one line saying what it
wrote and how fast, so a quarter of an hour is never silent; a progress line once drawn is
always replaced by that line, so what a terminal showed never vanishes without a figure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TextIO, TypeVar

from specwatch.bench.progress_line import ProgressLine
from specwatch.record.reader import Reader

REPORT_AFTER_S = 1.0
"""An export that took at least this long says its throughput when it ends."""
_EVERY_ROWS = 2000
_R = TypeVar("_R")


class CountingWriter:
    """A text stream that counts the characters written through it (bytes, for ASCII)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


class ExportProgress:
    """Watches an export of ``reader``'s rows ``span`` (first and last id) into ``written``.

    Args:
        err: Where the progress goes (stderr).
        reader: The recording being read (its :attr:`~Reader.position` is the progress).
        span: The first and last row ids of the range, ``None`` when it is empty.
        written: The output, counted.
        live: Draw in place; default: when ``err`` is a terminal.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        err: TextIO,
        reader: Reader,
        span: tuple[int, int] | None,
        written: CountingWriter,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.line = ProgressLine(err, live=live, clock=clock)
        self.err = err
        self.reader = reader
        self.span = span
        self.written = written
        self.clock = clock
        self.started = clock()
        self.rows = 0

    def watch(self, rows: Iterator[_R]) -> Iterator[_R]:
        """``rows`` unchanged, counted, with the line redrawn now and then."""
        for row in rows:
            self.rows += 1
            if self.rows % _EVERY_ROWS == 0:
                self.line.show(self._text())
            yield row

    def finish(self) -> None:
        """Clear the line; say the throughput when the export took a while or drew the line."""
        drawn = self.line.drawn
        self.line.clear()
        seconds = self.clock() - self.started
        if seconds < REPORT_AFTER_S and not drawn:
            return
        mb = self.written.chars / 1e6
        self.err.write(
            f"specwatch export: {self.rows:,} rows, {mb:,.1f} MB in {seconds:,.1f} s "
            f"({mb / seconds:,.1f} MB/s, {self.rows / seconds:,.0f} rows/s)\n"
        )
        self.err.flush()

    def _text(self) -> str:
        seconds = max(self.clock() - self.started, 1e-9)
        mb = self.written.chars / 1e6
        share = ""
        if self.span is not None and self.span[1] > self.span[0]:
            lo, hi = self.span
            done = min(1.0, max(0.0, (self.reader.position - lo) / (hi - lo)))
            share = f"{done:.0%} · "
        return f"export: {share}{self.rows:,} rows · {mb:,.1f} MB · {mb / seconds:,.1f} MB/s"


__all__ = ["REPORT_AFTER_S", "CountingWriter", "ExportProgress"]
