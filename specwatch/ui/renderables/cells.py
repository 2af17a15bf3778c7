"""Terminal cell widths of pane text, without filling Rich's width cache with graph rows.

Rich's ``cell_len`` remembers the width of every string under 512 characters (4,096 of them).
A graph row is a new 160-character string at every redraw: each one missed that cache, was
measured character by character and then kept there, so the cache filled with dead rows
(tracemalloc: about 480 KiB more every two minutes until full). Text made only of characters one
cell wide is measured by its length instead. Textual's compositor measures a line through that
cache too where it cuts the line at a repaint's edges, which is why panes repaint whole lines
(:meth:`specwatch.ui.panes.base.ModelPane.sync`; ``ui_redraw_cost.py --caches``).
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.segment import Segment

_ONE_CELL = re.compile(r"[ -~\u00a0-\u00ff\u2500-\u259f\u2800-\u28ff]*")
"""Printable ASCII and Latin-1, box drawing, block elements and braille: one cell each."""


def cells(text: str) -> int:
    """The cells ``text`` takes in a terminal (as Rich's ``cell_len``)."""
    if _ONE_CELL.fullmatch(text):
        return len(text)
    return cell_len(text)


def segment_cells(segment: Segment) -> int:
    """The cells of a segment (a control segment takes none), as ``Segment.cell_length``."""
    return 0 if segment.control else cells(segment.text)


__all__ = ["cells", "segment_cells"]
