"""A pane's finished lines (padding and line filters applied), kept between paints.

Textual styles every line it repaints (``_styles_cache.render_line``): it pads the content line,
passes it through tint, opacity and hatch, builds a new strip, then runs the app's line filters
(the ANSI-to-truecolor one) on that new strip, so none of it is ever reused. A pane's frame is
plain (a top border and left/right padding, nothing else), so its content lines can be padded
and filtered here once per change of the line and kept: the same segments Textual would build,
one strip per changed line instead of three, and none for the lines that did not change. The
border row is still Textual's, and a pane whose styles do anything more is left to Textual.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.color import Color
from textual.filter import ANSIToTruecolor, LineFilter
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

Frame = tuple[int, int, int]
"""``(rows above the content, padding left, padding right)``."""


def plain_frame(widget: Widget) -> Frame | None:
    """The frame of ``widget`` when its styles add only a top border and left/right padding
    around its content lines (no side or bottom border, outline, vertical padding, tint,
    opacity or hatch), else ``None``."""
    styles = widget.styles
    (top, _), (right, _), (bottom, _), (left, _) = styles.border
    if right or bottom or left or any(edge for edge, _ in styles.outline):
        return None
    pad = styles.padding
    if pad.top or pad.bottom or styles.text_opacity != 1.0 or styles.tint.a:
        return None
    if styles.has_rule("hatch") and styles.hatch != "none":
        return None
    return (1 if top else 0, pad.left, pad.right)


class FramedLines:
    """The finished lines of one pane, rebuilt per line when its content strip changes."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] = ()
        self._pads: tuple[Segment | None, Segment | None] = (None, None)
        self._inner = RichStyle()
        self._lines: dict[int, tuple[Strip, Strip]] = {}
        """Content row -> (the content strip, the finished strip made from it)."""
        self._truecolor: dict[RichStyle | None, bool] = {}
        """Whether the ANSI-to-truecolor filter leaves a style as it is (theme colours do)."""
        self._border: tuple[tuple[Region, object], list[Strip]] | None = None
        """The rows above the content, as Textual drew them for these rows and titles."""

    def clear(self) -> None:
        """Forget every finished line (styles changed)."""
        self._key = ()
        self._lines = {}
        self._border = None

    def render(
        self,
        crop: Region,
        width: int,
        frame: Frame,
        colors: tuple[Color, Color],
        filters: Sequence[LineFilter],
        content_line: Callable[[int], Strip],
        border_rows: Callable[[Region], list[Strip]],
        titles: object = None,
    ) -> list[Strip]:
        """The lines of ``crop`` (widget coordinates), as ``Widget.render_lines`` returns them.

        Args:
            crop: The rows and columns asked for.
            width: The widget's width.
            frame: Its :func:`plain_frame`.
            colors: ``widget.background_colors``.
            filters: The line filters in force.
            content_line: The content strip of a content row.
            border_rows: Textual's own rendering of rows above the content (full width).
            titles: The border's title and subtitle: with the styles, colours and width, what
                the border rows are drawn from (they are drawn again when these change).
        """
        top, pad_left, pad_right = frame
        base_background, background = colors
        key = (width, frame, base_background, background, tuple(filters))
        if key != self._key:
            self._key = key
            self._lines = {}
            self._truecolor = {}
            self._border = None
            self._inner = Style(background=base_background + background).rich_style
            self._pads = (
                Segment(" " * pad_left, self._inner) if pad_left else None,
                Segment(" " * pad_right, self._inner) if pad_right else None,
            )
        y0, y1 = crop.y, crop.bottom
        out: list[Strip] = []
        if y0 < top:
            rows = Region(0, y0, width, min(top, y1) - y0)
            border = self._border
            if border is None or border[0] != (rows, titles):
                border = self._border = ((rows, titles), border_rows(rows))
            out.extend(border[1])
        content_width = width - pad_left - pad_right
        lines = self._lines
        for y in range(max(y0, top), y1):
            line = content_line(y - top)
            kept = lines.get(y)
            if kept is not None and kept[0] is line:
                out.append(kept[1])
                continue
            out.append(self._finish(y, line, content_width, width, filters, background))
        x0, x1 = crop.column_span
        if (x0, x1) != (0, width):
            out = [strip.crop(x0, x1) for strip in out]
        return out

    def _finish(
        self,
        y: int,
        line: Strip,
        content_width: int,
        width: int,
        filters: Sequence[LineFilter],
        background: Color,
    ) -> Strip:
        """Pad and filter one content line as ``_styles_cache.render_line`` does; keep it."""
        fitted = line.adjust_cell_length(content_width, self._inner)
        left, right = self._pads
        segments = list(fitted)
        if left is not None:
            segments.insert(0, left)
        if right is not None:
            segments.append(right)
        strip = Strip(segments, width)
        for line_filter in filters:
            if type(line_filter) is ANSIToTruecolor and self._unchanged_by(
                line_filter, segments, background
            ):
                continue  # it would return equal segments in a new strip
            strip = strip.apply_filter(line_filter, background)
        self._lines[y] = (line, strip)
        return strip

    def _unchanged_by(
        self, line_filter: ANSIToTruecolor, segments: list[Segment], background: Color
    ) -> bool:
        """Whether ``line_filter`` maps every segment to an equal one (no ANSI colour, no dim,
        no control codes): each style is asked once per theme."""
        known = self._truecolor
        back = background.rich_color
        for _text, style, control in segments:
            if control is not None:
                return False
            plain = known.get(style)
            if plain is None:
                plain = style is None or line_filter.truecolor_style(style, back) == style
                known[style] = plain
            if not plain:
                return False
        return True
