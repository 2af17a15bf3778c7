"""The GPU summary: a few lines in place of the GPU table when the terminal is short."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment

from specwatch.ui.renderables.gpu_table import Cell, TableStyles


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """Lines of toned cells, each line cut to the width (later cells go first)."""

    lines_of_cells: Sequence[Sequence[Cell]]
    styles: TableStyles = field(default_factory=TableStyles)

    def lines(self, width: int) -> list[list[Segment]]:
        """Each line exactly ``width`` cells wide; a cell that does not fit whole is dropped."""
        out: list[list[Segment]] = []
        for cells in self.lines_of_cells:
            segs: list[Segment] = []
            used = 0
            for cell in cells:
                if used + len(cell.text) > width:
                    break
                segs.append(Segment(cell.text, self.styles.tone(cell.tone)))
                used += len(cell.text)
            if used < width:
                segs.append(Segment(" " * (width - used), self.styles.normal))
            out.append(segs)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        for line in self.lines(options.max_width):
            yield from line
            yield new_line
