"""Where two versions of a pane's lines differ: the cells of each changed line, as regions to
repaint (Textual repaints and writes each dirty line, so only changed lines are marked)."""

from __future__ import annotations

from rich.segment import Segment
from textual.geometry import Region
from textual.strip import Strip

from specwatch.ui.renderables.cells import segment_cells


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share (bisected with C-speed slice
    comparisons: a graph row is ~150 characters, compared from both ends on every redraw)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def changed_span(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The cells ``[start, end)`` where two lines differ, or ``None`` when they are equal.

    Only the first and the last differing segments are compared cell by cell (to narrow the
    span inside them); the equal segments around them are skipped by tuple comparison.
    """
    if old is new:
        return None
    a_segs, b_segs = list(old), list(new)
    if a_segs == b_segs:
        return None
    n = len(a_segs)
    if n != len(b_segs):
        return (0, max(old.cell_length, new.cell_length))
    first = 0
    while a_segs[first] == b_segs[first]:
        first += 1
    last = n - 1
    while a_segs[last] == b_segs[last]:
        last -= 1
    x = sum(map(segment_cells, a_segs[:first]))
    spans: list[tuple[int, int]] = []
    for a, b in zip(a_segs[first : last + 1], b_segs[first : last + 1], strict=True):
        la = segment_cells(a)
        if la != segment_cells(b):
            return (0, max(old.cell_length, new.cell_length))
        if a != b:
            spans.append((x, x + la))
        x += la
    (lo, _), (_, hi) = spans[0], spans[-1]
    a, b = a_segs[first], b_segs[first]
    if _narrowable(a, b):
        lo += _common_prefix(a.text, b.text)
    a, b = a_segs[last], b_segs[last]
    if _narrowable(a, b):
        hi -= _common_prefix(a.text[::-1], b.text[::-1])
    return (lo, max(lo, hi))


def _narrowable(a: Segment, b: Segment) -> bool:
    """Whether two segments can be compared character by character (same style, one cell each)."""
    return (
        a.style == b.style and len(a.text) == segment_cells(a) and len(b.text) == segment_cells(b)
    )


def changed_regions(old: list[Strip], new: list[Strip]) -> list[Region]:
    """One region per changed line (content coordinates), covering that line's changed cells.

    Textual repaints each dirty line of a widget in full and writes each changed line to the
    terminal, so marking only the changed lines (not the box around them) is what saves work:
    a graph whose newest column and top-right reading moved repaints a few lines, not all.
    """
    out: list[Region] = []
    blank = Strip([])
    n_old = len(old)
    n_new = len(new)
    for y in range(max(n_old, n_new)):
        a = old[y] if y < n_old else blank
        b = new[y] if y < n_new else blank
        span = changed_span(a, b)
        if span is not None:
            out.append(Region(span[0], y, max(1, span[1] - span[0]), 1))
    return out


def changed_box(old: list[Strip], new: list[Strip]) -> Region | None:
    """The smallest box (content coordinates) covering every changed cell, or ``None``."""
    regions = changed_regions(old, new)
    return Region.from_union(regions) if regions else None


__all__ = ["changed_box", "changed_regions", "changed_span"]
