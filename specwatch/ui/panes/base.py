"""The base of every pane: redraw only when the part of the model it shows has changed.

Two kinds of pane share it. Small text panes return a Rich renderable from :meth:`render_pane`.
The large ones (the GPU table, the token-rate graph) implement :meth:`build_lines` instead: their
lines are built once per change, kept as strips (a line equal to the last draw's keeps its
strip), and handed to Textual line by line, which skips Rich's console pipeline on every frame
(the cost that matters for a monitor left open all day).
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from specwatch.ui.model import MonitorModel


class ModelPane(Widget):
    """A widget that draws one section of a :class:`MonitorModel`.

    The app calls :meth:`sync` from its redraw timer; the pane refreshes only when the section's
    version number moved since its last draw, and never while it is not displayed.
    """

    VERSION: ClassVar[str] = "status_version"
    """The model attribute whose change triggers a redraw."""

    LINE_API: ClassVar[bool] = True
    """Whether the pane draws through :meth:`build_lines` (cached strips) instead of ``render``."""

    def __init__(self, model: MonitorModel, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self._drawn_version = -1
        self.draw_errors = 0
        """How many draws failed (shown in place of the pane, counted for tests)."""
        self.builds = 0
        """How many times the lines were rebuilt (for tests and the overhead script)."""
        self._pane_styles_key: str | None = None
        self._pane_styles: dict[str, Style] = {}
        self._strips: list[Strip] | None = None
        self._strips_key: tuple[int, int] = (0, 0)
        self._sources: list[list[Segment]] = []
        """The segments each cached strip was made from (to keep the strips of equal lines)."""
        self._text_key: tuple[object, ...] = ()
        self._text_lines: list[list[Segment]] = []
        self._title_text: str | None = None
        self._blank: Strip = Strip([])

    def set_title(self, title: str) -> None:
        """Set the border title, only when its text changed (setting it repaints the pane)."""
        if title != self._title_text:
            self._title_text = title
            self.border_title = title

    def sync(self) -> bool:
        """Refresh if the model moved since the last draw; returns whether it did.

        Line panes rebuild their lines here and repaint only when one of them changed.
        """
        if not self.display or not self.is_mounted:
            return False
        version = int(getattr(self.model, self.VERSION))
        if version == self._drawn_version:
            return False
        self._drawn_version = version
        old = self._strips
        size = self.content_size
        if not self.LINE_API or old is None or (size.width, size.height) != self._strips_key:
            self._strips = None
            self.refresh()
            return True
        new = self._build(size.width, size.height, old)
        self._strips = new
        if len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True)):
            return False  # every line kept its strip: nothing to repaint
        self.refresh()
        return True

    def rows_besides_chart(self) -> int | None:
        """For a pane that takes the rows left over (a chart): the rows it needs besides the
        chart itself; ``None`` for a pane of its own height."""
        return None

    def force_sync(self) -> None:
        """Redraw at the next opportunity regardless of versions (e.g. after a resize)."""
        self._drawn_version = -1
        self._strips = None
        self.refresh()

    def component_styles(self, *names: str) -> dict[str, Style]:
        """Rich styles of the component classes, computed once per theme.

        ``"normal"`` maps to the widget's own style.
        """
        key = f"{self.app.theme}|{self.app.current_theme.ansi}"
        if key != self._pane_styles_key:
            self._pane_styles = {"normal": self.rich_style}
            self._pane_styles_key = key
        missing = [n for n in names if n not in self._pane_styles]
        for name in missing:
            self._pane_styles[name] = self.get_component_rich_style(name)
        return self._pane_styles

    def tone_styles(self) -> dict[str, Style]:
        """Component-class styles keyed by tone (``spec--value`` -> ``value``; ``-`` -> ``_``)."""
        c = self.component_styles(*self.COMPONENT_CLASSES)
        return {
            name.split("--", 1)[1].replace("-", "_"): c[name] for name in self.COMPONENT_CLASSES
        }

    def notify_style_update(self) -> None:
        """A theme or CSS change invalidates the cached styles and strips."""
        super().notify_style_update()
        self._pane_styles_key = None
        self._strips = None
        self._text_key = ()

    # --- renderable panes ---------------------------------------------------------------------

    def render(self) -> RenderableType:
        """Draw the pane; a failure to draw is shown in the pane instead of ending the app."""
        try:
            return self.render_pane()
        except Exception as e:  # one bad value must not take the monitor down
            self.draw_errors += 1
            return Text(f"cannot draw: {type(e).__name__}: {e}", no_wrap=True, overflow="ellipsis")

    def render_pane(self) -> RenderableType:
        """The pane's renderable; text panes implement this."""
        return Text("")

    # --- line panes -----------------------------------------------------------------------------

    def build_lines(self, width: int, height: int) -> list[list[Segment]]:
        """The pane's content lines: by default :meth:`render_pane`'s text, line by line."""
        renderable = self.render_pane()
        if not isinstance(renderable, Text):
            return []
        # Most redraws word the pane the same (its numbers are rounded): skip Rich's render.
        key = (width, renderable.plain, str(renderable.style), tuple(renderable.spans))
        if key != self._text_key:
            console = self.app.console
            lines = []
            for line in renderable.split("\n", allow_blank=True):
                if cell_len(line.plain) > width:
                    line.truncate(width, overflow="ellipsis")
                lines.append([s for s in line.render(console, end="") if s.text])
            self._text_lines = lines
            self._text_key = key
        return self._text_lines

    def render_lines(self, crop: Region) -> list[Strip]:
        """Check the cached strips against the pane's size once per paint, not once per line."""
        if self.LINE_API:
            self._check_strips()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        """One content line from the cached strips (rebuilt after a change or resize)."""
        if not self.LINE_API:
            return super().render_line(y)
        strips = self._strips
        if strips is None:
            strips = self._check_strips()
        if 0 <= y < len(strips):
            return strips[y]
        return self._blank

    def _check_strips(self) -> list[Strip]:
        size = self.content_size
        key = (size.width, size.height)
        if self._strips is None or key != self._strips_key:
            self._strips = self._build(size.width, size.height)
            self._strips_key = key
            self._blank = Strip.blank(size.width, self.component_styles()["normal"])
        return self._strips

    def _build(self, width: int, height: int, old: list[Strip] | None = None) -> list[Strip]:
        """The pane's lines as strips; a line whose segments equal its predecessor's in ``old``
        (built at the same size) keeps that strip: most lines of a redraw are unchanged, and a
        strip is costly to make (Textual gives each its own caches)."""
        self.builds += 1
        base = self.component_styles()["normal"]
        try:
            lines = self.build_lines(width, height)
        except Exception as e:  # one bad value must not take the monitor down
            self.draw_errors += 1
            lines = [[Segment(f"cannot draw: {type(e).__name__}: {e}")]]
        before = self._sources if old is not None else []
        kept = min(len(before), len(old or ()))
        strips = []
        for y, segs in enumerate(lines):
            if y < kept and before[y] == segs:
                assert old is not None
                strips.append(old[y])
                continue
            length = Segment.get_line_length(segs)
            if length == width:  # the renderables fill the width exactly: no copy needed
                strips.append(Strip(segs, width))
            elif length < width:  # what crop_extend does, without its two intermediate strips
                strips.append(Strip([*segs, Segment(" " * (width - length), base)], width))
            else:
                strips.append(Strip(segs, length).crop_extend(0, width, base))
        self._sources = lines
        return strips


class TextPane(ModelPane):
    """A bordered, titled pane of text lines drawn by a pure function from the model.

    Subclasses name their component classes ``<prefix>--<tone>``; :meth:`tone_styles` hands the
    pure function a ``tone -> Style`` map. The title says when the numbers are stale (the server
    went away after they were measured).
    """

    TITLE: ClassVar[str] = ""
    """The border title."""

    DEFAULT_CSS = """
    TextPane {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 100%;
        border-top: solid $primary;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
    }
    """

    def on_mount(self) -> None:
        """Title the pane."""
        self.set_title(self._title())

    def _title(self) -> str:
        m = self.model
        if m.window is not None and not m.connection_ok:
            return f"{self.TITLE} · stale"
        return self.TITLE

    def sync(self) -> bool:
        """Redraw on change, and retitle (stale or live)."""
        if self.display and self.is_mounted:
            self.set_title(self._title())
        return super().sync()
