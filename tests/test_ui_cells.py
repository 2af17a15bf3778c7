"""Pane text is measured as Rich measures it, without keeping graph rows in Rich's cache."""

from __future__ import annotations

from rich.cells import cached_cell_len, cell_len
from rich.segment import ControlType, Segment

from specwatch.ui.renderables.cells import cells, segment_cells
from specwatch.ui.renderables.text import BLOCKS, HBLOCKS


def test_widths_agree_with_rich() -> None:
    for text in (
        "",
        "tok/s 200.5 ± 4.2 · 72 °C",
        BLOCKS * 20,
        HBLOCKS + "│├─┤",
        "⣿⣀⡇ braille",
        "模型 wide",  # two cells each: Rich's answer
        "e\u0301",  # a combining accent: Rich's answer
        "🚀 emoji",
    ):
        assert cells(text) == cell_len(text), text
    assert segment_cells(Segment("▁▂▃")) == 3
    assert segment_cells(Segment("\x1b[2J", None, [(ControlType.CLEAR,)])) == 0  # a control


def test_a_graph_row_is_not_kept_in_richs_cache() -> None:
    before = cached_cell_len.cache_info().currsize
    for i in range(200):
        assert cells(BLOCKS[1 + i % 8] * 150 + str(i)) == 150 + len(str(i))
    assert cached_cell_len.cache_info().currsize - before < 10
