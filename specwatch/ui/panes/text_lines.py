"""A pane's Rich ``Text`` as lines of segments, cut to the pane's width.

A pane's text built by ``append`` (plain runs, one after another) is split without Rich's
``split`` and ``render``; anything else goes to Rich. Lines that did not change since the last
call keep their segments.
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

LineKey = tuple[object, ...]

_NULL = Style()

Piece = tuple[str, Style | None]
"""Words and their style (``None``: words outside every span)."""


def text_pieces(text: Text) -> list[list[Piece]] | None:
    """The lines of ``text`` as ``(words, style)`` runs, as Rich would render them, when the
    text has no style of its own and its spans are styles that follow one another without
    overlapping (a pane's text, built by ``append``); ``None`` for any other text.

    Rich's ``split`` and ``render`` build a ``Text`` per line and walk a style stack per span:
    most of a text pane's cost per redraw, for a text made of plain runs.
    """
    if text.style:
        return None
    plain = text.plain
    lines: list[list[Piece]] = [[]]
    pos = 0

    def add(words: str, style: Style | None) -> None:
        if "\n" not in words:
            lines[-1].append((words, style))
            return
        first, *rest = words.split("\n")
        if first:
            lines[-1].append((first, style))
        lines.extend([(part, style)] if part else [] for part in rest)

    for start, end, style in text.spans:
        if start < pos or not isinstance(style, Style):
            return None
        if start > pos:
            add(plain[pos:start], None)
        if end > start:
            add(plain[start:end], style)
        pos = end
    if pos < len(plain):
        add(plain[pos:], None)
    return lines


def _piece_segments(runs: list[Piece]) -> list[Segment]:
    """A line's runs as Rich renders them: words outside every span get the null style, or no
    style on a line that no span touches."""
    if all(style is None for _, style in runs):
        return [Segment(words) for words, _ in runs if words]
    return [Segment(words, _NULL if style is None else style) for words, style in runs if words]


def text_lines(
    text: Text,
    width: int,
    console: Console,
    rendered: dict[LineKey, list[Segment]] | None = None,
) -> list[list[Segment]]:
    """A Rich ``Text`` as lines of segments, each cut to ``width`` with an ellipsis.

    About twenty times cheaper than handing the ``Text`` to Textual to lay out on every frame.
    ``rendered`` (words, style and spans of a line at this width -> its segments) carries the
    lines of the previous call: when one number of a pane moves, only its line is rendered
    again. It is replaced by this call's lines.
    """
    before = rendered if rendered is not None else {}
    now: dict[LineKey, list[Segment]] = {}
    out: list[list[Segment]] = []
    pieces = text_pieces(text)
    if pieces is None:
        for line in text.split("\n", allow_blank=True):
            key: LineKey = (line.plain, line.style, tuple(line.spans))
            segments = before.get(key)
            if segments is None:
                segments = _render_line(line, width, console)
            now[key] = segments
            out.append(segments)
    else:
        for runs in pieces:
            key = tuple(runs)
            segments = before.get(key)
            if segments is None:
                segments = _piece_segments(runs)
                if sum(seg.cell_length for seg in segments) > width:
                    line = Text()
                    for words, style in runs:
                        line.append(words, style)
                    segments = _render_line(line, width, console)
            now[key] = segments
            out.append(segments)
    if rendered is not None:
        rendered.clear()
        rendered.update(now)
    return out


def _render_line(line: Text, width: int, console: Console) -> list[Segment]:
    if line.cell_len > width:
        line.truncate(width, overflow="ellipsis")
    return [s for s in line.render(console, end="") if s.text]


__all__ = ["LineKey", "Piece", "text_lines", "text_pieces"]
