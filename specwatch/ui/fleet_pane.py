"""The fleet pane: a thin widget over :class:`~specwatch.ui.fleet_table.FleetTable`."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from textual.reactive import reactive
from textual.widget import Widget

from specwatch.core.fleet import FleetTotals
from specwatch.core.fleet_rows import FleetRow
from specwatch.ui.fleet_table import FleetStyles, FleetTable
from specwatch.ui.renderables import TableStyles

MAX_DRAWN_ROWS = 200
"""Rows drawn at once; taller than any terminal, so a fleet that fits is drawn whole."""


class FleetPane(Widget):
    """A row per server, the totals row, and the cursor; draws only what it is given."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "fleet--header",
        "fleet--dim",
        "fleet--warn",
        "fleet--bad",
        "fleet--cursor",
        "fleet--totals",
    }

    DEFAULT_CSS = """
    FleetPane {
        height: auto;
        border-top: solid $primary;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
    }
    FleetPane > .fleet--header { color: $text-muted; text-style: bold; }
    FleetPane > .fleet--dim { color: $text-muted; }
    FleetPane > .fleet--warn { color: $warning; }
    FleetPane > .fleet--bad { color: $error; text-style: bold; }
    FleetPane > .fleet--cursor { background: $primary 30%; text-style: bold; }
    FleetPane > .fleet--totals { text-style: bold; }
    """

    rows: reactive[tuple[FleetRow, ...]] = reactive((), layout=True)
    """The servers, in display order (gone ones last, marked stale)."""
    totals: reactive[FleetTotals | None] = reactive(None, layout=True)
    """Exact fleet aggregates of the latest reading."""
    gpus: reactive[int] = reactive(0)
    """How many GPUs the latest reading has."""
    selected: reactive[int] = reactive(0, layout=True)
    """The cursor row."""

    def on_mount(self) -> None:
        """Title the pane."""
        self.border_title = "servers"

    def _styles(self) -> FleetStyles:
        def style(name: str) -> Style:
            return self.get_component_rich_style(f"fleet--{name}")

        table = TableStyles(
            header=style("header"),
            normal=self.rich_style,
            dim=style("dim"),
            warn=style("warn"),
            bad=style("bad"),
        )
        return FleetStyles(table=table, cursor=style("cursor"), totals=style("totals"))

    def window(self) -> tuple[int, int]:
        """The first and past-the-last rows drawn: at most :data:`MAX_DRAWN_ROWS`, around the
        cursor (drawing ten thousand rows took seconds a frame and froze the keys)."""
        n = len(self.rows)
        if n <= MAX_DRAWN_ROWS:
            return 0, n
        first = min(max(0, self.selected - MAX_DRAWN_ROWS // 2), n - MAX_DRAWN_ROWS)
        return first, first + MAX_DRAWN_ROWS

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """The header, a row per server drawn (or one line), the lines saying how many more,
        and the rule and totals."""
        first, end = self.window()
        more = (first > 0) + (end < len(self.rows))
        return 1 + max(1, end - first) + more + (2 if self.rows and self.totals else 0)

    def render(self) -> RenderableType:
        """The table at the pane's width."""
        first, end = self.window()
        selected = self.selected - first if self.rows else None
        return FleetTable(
            self.rows[first:end],
            self.totals,
            self.gpus,
            selected,
            self._styles(),
            above=first,
            below=len(self.rows) - end,
        )


__all__ = ["MAX_DRAWN_ROWS", "FleetPane"]
