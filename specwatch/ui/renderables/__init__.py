"""Pure renderables: each draws one thing from plain data and Rich styles.

Nothing here knows about widgets or the app: a pane hands in data and styles (taken from its
component classes, so only theme variables decide colours) and gets back lines of segments.
Tests print these to a plain ``rich.console.Console``.
"""

from __future__ import annotations

from specwatch.ui.renderables.columns import bucket_sorted
from specwatch.ui.renderables.gpu_summary import GpuSummary
from specwatch.ui.renderables.gpu_table import (
    GPU_COLUMNS,
    SPAN,
    Cell,
    Column,
    GpuTable,
    TableStyles,
    choose_columns,
)
from specwatch.ui.renderables.graph import GraphStyles, Reading, TokenRateGraph, strip_range
from specwatch.ui.renderables.marks import GraphMark, mark_row, place_labels
from specwatch.ui.renderables.text import (
    BLOCKS,
    GAP,
    HBLOCKS,
    area_rows,
    column_of,
    fill_gaps,
    fit,
    fmt_num,
    hbar,
    nice_ceiling,
    sparkline,
)

__all__ = [
    "BLOCKS",
    "GAP",
    "GPU_COLUMNS",
    "HBLOCKS",
    "SPAN",
    "Cell",
    "Column",
    "GpuSummary",
    "GpuTable",
    "GraphMark",
    "GraphStyles",
    "Reading",
    "TableStyles",
    "TokenRateGraph",
    "area_rows",
    "bucket_sorted",
    "choose_columns",
    "column_of",
    "fill_gaps",
    "fit",
    "fmt_num",
    "hbar",
    "mark_row",
    "nice_ceiling",
    "place_labels",
    "sparkline",
    "strip_range",
]
