"""The mark row under the token-rate graph: loading, warmup, restarts, lost, benchmark runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style

from specwatch.ui.renderables.text import fit

NO_STYLE = Style()


@dataclass(frozen=True, slots=True)
class GraphMark:
    """A mark placed on the graph's columns."""

    col0: int
    col1: int
    kind: str
    label: str


LABEL_ORDER = {"bench": 0, "restart": 1, "lost": 1, "loading": 2, "down": 2, "warmup": 3}
"""Which labels claim room on the mark row first."""
MARK_GLYPH = {"loading": "╌", "down": "┄", "warmup": "·", "bench": "━", "restart": "│", "lost": "│"}


@dataclass(frozen=True, slots=True)
class MarkStyles:
    """Rich styles for the mark row."""

    axis: Style = NO_STYLE
    mark: Style = NO_STYLE
    bench: Style = NO_STYLE
    alert: Style = NO_STYLE

    def of(self, kind: str | None) -> Style:
        """The style of a mark kind (``None``: an empty cell)."""
        if kind == "bench":
            return self.bench
        if kind in ("restart", "lost"):
            return self.alert
        return self.mark


def label_choices(m: GraphMark) -> tuple[str, ...]:
    """The labels a mark may show, longest first (the first that fits wins)."""
    if m.kind == "restart":
        return ("R",)
    if m.kind == "lost":
        return ("✕",)
    if m.kind == "loading":
        return (m.label, m.label.replace("loading ", "L"), "L")
    if m.kind == "down":
        return (m.label, m.label.replace("down ", "D"), "D")
    if m.kind == "warmup":
        return (m.label, "warmup", "W")
    return (m.label, m.label[:1])


def place_labels(marks: Sequence[GraphMark], width: int) -> list[tuple[int, str, str]]:
    """Where each label goes: ``(start column, text, kind)``; labels never touch each other.

    A label keeps one free cell on either side of every other label (so ``B1`` and ``warmup``
    never read as ``B1warmup``); a mark whose labels all collide gets none (its glyphs remain).
    """
    taken = [False] * width
    placed: list[tuple[int, str, str]] = []
    for m in sorted(marks, key=lambda m: (LABEL_ORDER.get(m.kind, 9), m.col0)):
        c0 = max(0, m.col0)
        if c0 >= width:
            continue
        done = False
        for label in label_choices(m):
            for start in range(c0, min(width, c0 + 3)):
                end = start + len(label)
                if end > width or any(taken[max(0, start - 1) : min(width, end + 1)]):
                    continue
                for j in range(start, end):
                    taken[j] = True
                placed.append((start, label, m.kind))
                done = True
                break
            if done:
                break
    return placed


def mark_row(
    marks: Sequence[GraphMark],
    window_label: str,
    chart_width: int,
    gutter: int,
    label_width: int,
    styles: MarkStyles,
) -> list[Segment]:
    """One line: the window's name in the gutter, the marks on the chart's columns, ``now``."""
    cw = chart_width
    cells = [" "] * cw
    kinds: list[str | None] = [None] * cw
    for m in sorted(marks, key=lambda m: (m.kind == "bench", m.col0)):
        glyph = MARK_GLYPH.get(m.kind, "·")
        for c in range(max(0, m.col0), min(cw - 1, m.col1) + 1):
            cells[c] = glyph
            kinds[c] = m.kind
    for start, label, kind in place_labels(marks, cw):
        for j, ch in enumerate(label):
            cells[start + j] = ch
            kinds[start + j] = kind
    segs = [Segment(fit(window_label, gutter), styles.axis)]
    run_kind: str | None = kinds[0] if kinds else None
    run: list[str] = []
    for ch, k in zip(cells, kinds, strict=True):
        if k != run_kind and run:
            segs.append(Segment("".join(run), styles.of(run_kind)))
            run = []
        run_kind = k
        run.append(ch)
    if run:
        segs.append(Segment("".join(run), styles.of(run_kind)))
    segs.append(Segment(" " + fit("now", label_width - 1), styles.axis))
    return segs
