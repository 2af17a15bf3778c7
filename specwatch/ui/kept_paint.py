"""Widgets that hand the compositor their last lines when nothing marked them dirty since.

Textual's compositor repaints the box that covers all of a screen's changes, and asks every
widget under that box for its lines: a redraw that changes the GPU pane and the load pane asks
the screen, the lower row's container, the footer and the unchanged panes in between as well
(~0.1-0.2 ms each, at every redraw). Textual says a widget's lines may have changed in one
place, ``_set_dirty`` (a refresh, a resize and a restyle all pass there); a restyle is also
seen in ``notify_style_update``. Between those, the same crop gets the same lines.
"""

from __future__ import annotations

from textual.containers import Horizontal
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer


class KeptPaint(Widget):
    """A widget whose lines for a crop are kept until Textual marks it dirty or restyles it.

    Mixed into one of Textual's widgets it goes second (``class KeptFooter(Footer,
    KeptPaint)``): Textual finds a widget's CSS type names along its first bases, so the
    footer must still be a ``Footer`` there.
    """

    _paint_generation: int = 0
    _painted: tuple[tuple[Region, int], list[Strip]] | None = None

    def _set_dirty(self, *regions: Region) -> None:
        self._paint_generation += 1
        super()._set_dirty(*regions)

    def notify_style_update(self) -> None:
        """A restyle paints the widget again."""
        super().notify_style_update()
        self._paint_generation += 1

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of ``crop``; the last ones again when nothing marked the widget dirty."""
        key = (crop, self._paint_generation)
        painted = self._painted
        if painted is not None and painted[0] == key:
            return list(painted[1])
        lines = self._paint(crop)
        self._painted = (key, lines)
        return list(lines)

    def _paint(self, crop: Region) -> list[Strip]:
        """Draw the lines of ``crop`` (Textual's own drawing unless overridden)."""
        return super().render_lines(crop)


class KeptScreen(Screen[object], KeptPaint):
    """The main screen (its background sits under every pane)."""


class KeptHorizontal(Horizontal, KeptPaint):
    """A row of panes."""


class KeptFooter(Footer, KeptPaint):
    """The key footer."""


__all__ = ["KeptFooter", "KeptHorizontal", "KeptPaint", "KeptScreen"]
