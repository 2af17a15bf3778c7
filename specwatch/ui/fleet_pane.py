"""The fleet pane: a thin widget over :class:`FleetTable`, the table as a pure renderable (a
row per server, the totals row, a cursor), which tests draw without an app. Every server string
(instance, model) passes through :func:`specwatch.core.sanitize.sanitize_line` before it reaches
the screen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.widget import Widget

from specwatch.core.fleet import FleetRow, FleetTotals
from specwatch.core.sanitize import sanitize_line
from specwatch.ui.renderables import Cell, Column, TableStyles, choose_columns, fit, fmt_num

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


# --- the table as a pure renderable, drawn without an app -------------------------------------


FLEET_COLUMNS: tuple[Column, ...] = (
    Column("instance", "server", 15, 0, "left"),
    Column("dialect", "dialect", 8, 5, "left"),
    Column("model", "model", 12, 3, "left"),
    Column("tok_s", "tok/s", 7, 0),
    Column("accept", "accept", 6, 1),
    Column("step", "step ms", 7, 2),
    Column("load", "run/wait", 8, 2),
    Column("clock", "SM clk", 6, 1),
    Column("temp", "hot", 4, 1),
    Column("gpus", "GPUs", 7, 4, "left"),
)
"""Display order; ``instance`` and ``model`` share the width left over."""
SLOW_CLOCK = 0.85
"""A node whose slowest SM clock is under this share of the maximum is marked."""
HOT_C = 85.0
NO_STYLE = Style()


@dataclass(frozen=True, slots=True)
class FleetStyles:
    """Styles of the fleet table: the GPU table's tones plus the cursor row."""

    table: TableStyles = field(default_factory=TableStyles)
    cursor: Style = NO_STYLE
    totals: Style = NO_STYLE


def _count(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}"


def _dim(yes: bool) -> str:
    return "dim" if yes else ""


def row_cells(row: FleetRow) -> dict[str, Cell]:
    """The cells of one server's row (tones: ``dim`` stale or absent, ``warn`` slow or hot)."""
    s, w = row.server, row.server.window
    tone = "dim" if row.stale else ""
    step_ms = None if w.step_latency_s is None else w.step_latency_s * 1000.0
    clock = "–" if row.slowest_clock is None else f"{row.slowest_clock * 100:.0f}%"
    slow = row.slowest_clock is not None and row.slowest_clock < SLOW_CLOCK
    hot = row.hottest_c is not None and row.hottest_c >= HOT_C
    temp = "–" if row.hottest_c is None else f"{row.hottest_c:.0f}°"
    via = f"{len(row.gpus)} {row.joined_by}" if row.joined_by else "none"
    name = sanitize_line(s.instance) + (" (gone)" if row.stale else "")
    return {
        "instance": Cell(name, tone),
        "dialect": Cell(s.dialect.value, tone or "dim"),
        "model": Cell(sanitize_line(s.model or s.model_note or "–"), tone or _dim(not s.model)),
        "tok_s": Cell(fmt_num(w.gen_tok_s), tone),
        "accept": Cell(fmt_num(w.accept_length, 2), tone),
        "step": Cell(fmt_num(step_ms), tone),
        "load": Cell(f"{_count(w.requests_running)}/{_count(w.requests_waiting)}", tone),
        "clock": Cell(clock, tone or ("warn" if slow else "")),
        "temp": Cell(temp, tone or ("warn" if hot else "")),
        "gpus": Cell(via, tone or ("" if row.joined_by else "dim")),
    }


def totals_cells(t: FleetTotals, gpus: int) -> dict[str, Cell]:
    """The totals row: sums of rates and ratios of sums (never a mean of means)."""
    return {
        "instance": Cell(f"all {t.servers} servers"),
        "tok_s": Cell(fmt_num(t.gen_tok_s)),
        "accept": Cell(fmt_num(t.accept_length, 2)),
        "load": Cell(f"{_count(t.requests_running)}/{_count(t.requests_waiting)}"),
        "gpus": Cell(f"{gpus} GPUs"),
    }


@dataclass(frozen=True, slots=True)
class FleetTable:
    """The header, a row per server (the selected one highlighted), a rule and the totals."""

    rows: Sequence[FleetRow]
    totals: FleetTotals | None
    gpus: int = 0
    selected: int | None = None
    styles: FleetStyles = field(default_factory=FleetStyles)
    above: int = 0
    """Servers before the first row given (a long fleet is drawn a window at a time)."""
    below: int = 0
    """Servers after the last row given."""

    def widths(self, width: int) -> list[tuple[Column, int]]:
        """The columns that fit and their widths (spare cells to the instance and model)."""
        cols = choose_columns(width, FLEET_COLUMNS)
        spare = max(0, width - (sum(c.width for c in cols) + len(cols) - 1))
        flex = [c.key for c in cols if c.key in ("instance", "model")]
        out: list[tuple[Column, int]] = []
        for c in cols:
            extra = 0
            if c.key in flex:
                extra = spare // len(flex) + (spare % len(flex) if c.key == flex[0] else 0)
            out.append((c, c.width + extra))
        return out

    def _line(
        self, cells: dict[str, Cell], cols: list[tuple[Column, int]], width: int, base: Style | None
    ) -> list[Segment]:
        st = self.styles.table
        segs: list[Segment] = []
        for i, (c, w) in enumerate(cols):
            cell = cells.get(c.key, Cell(""))
            style = st.tone(cell.tone)
            if base is not None:
                style = style + base
            if i:
                segs.append(Segment(" ", base or st.normal))
            text = cell.text
            cut = text if len(text) <= w else text[: w - 1] + "…"
            segs.append(Segment(cut.rjust(w) if c.align == "right" else cut.ljust(w), style))
        pad = width - Segment.get_line_length(segs)
        if pad > 0:
            segs.append(Segment(" " * pad, base or st.normal))
        return segs

    def lines(self, width: int) -> list[list[Segment]]:
        """The table as lines of segments, each exactly ``width`` cells wide."""
        cols = self.widths(width)
        st = self.styles
        header = " ".join(
            (c.header.rjust(w) if c.align == "right" else c.header.ljust(w)) for c, w in cols
        )
        out = [[Segment(fit(header, width), st.table.header)]]
        if not self.rows:
            out.append([Segment(fit("  no servers yet", width), st.table.dim)])
        if self.above:
            out.append([Segment(fit(f"  … {self.above} more servers above", width), st.table.dim)])
        for i, row in enumerate(self.rows):
            base = st.cursor if i == self.selected else None
            out.append(self._line(row_cells(row), cols, width, base))
        if self.below:
            out.append([Segment(fit(f"  … {self.below} more servers below", width), st.table.dim)])
        if self.totals is not None and self.rows:
            out.append([Segment("─" * width, st.table.dim)])
            out.append(self._line(totals_cells(self.totals, self.gpus), cols, width, st.totals))
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        for line in self.lines(options.max_width):
            yield from line
            yield new_line


__all__ = [
    "FLEET_COLUMNS",
    "MAX_DRAWN_ROWS",
    "FleetPane",
    "FleetStyles",
    "FleetTable",
    "row_cells",
    "totals_cells",
]
