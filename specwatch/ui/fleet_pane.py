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
from specwatch.ui.renderables.gpu_table import TableStyles


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
    selected: reactive[int] = reactive(0)
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

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """The header, a row per server (or one line), and the rule and totals."""
        return 1 + max(1, len(self.rows)) + (2 if self.rows and self.totals else 0)

    def render(self) -> RenderableType:
        """The table at the pane's width."""
        selected = self.selected if self.rows else None
        return FleetTable(self.rows, self.totals, self.gpus, selected, self._styles())


__all__ = ["FleetPane"]
