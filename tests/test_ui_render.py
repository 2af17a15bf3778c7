"""Pure renderables and helpers, printed without an app."""

from __future__ import annotations

import io

from rich.console import Console

from specwatch.ui.panes.token_rate import GraphMark, TokenRateGraph
from specwatch.ui.renderables import (
    GPU_COLUMNS,
    Cell,
    GpuTable,
    area_rows,
    bucket_sorted,
    choose_columns,
    column_of,
    hbar,
    nice_ceiling,
    sparkline,
)


def render_text(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text().splitlines()


def test_bucket_means_per_column_and_gaps() -> None:
    pts = [(-5.0, 99.0), (1.0, 10.0), (1.5, 20.0), (3.5, None), (4.0, 40.0)]
    assert bucket_sorted(pts, t_end=4.0, span_s=4.0, width=4) == [None, 15.0, None, 40.0]
    assert bucket_sorted(pts, 4.0, 4.0, 0) == []


def test_column_of_maps_the_window_edges() -> None:
    assert column_of(0.5, 4.0, 4.0, 4) == 0
    assert column_of(3.99, 4.0, 4.0, 4) == 3
    assert column_of(-1.0, 4.0, 4.0, 4) < 0


def test_sparkline_levels_and_gaps() -> None:
    assert sparkline([0.0, 5.0, 10.0, None], 0.0, 10.0) == "▁▅█ "
    assert sparkline([3.0, 3.0], 3.0, 3.0) == "██"


def test_hbar_eighths() -> None:
    assert hbar(1.0, 4) == "████"
    assert hbar(0.0, 4) == "    "
    assert hbar(0.5, 3) == "█▌ "
    assert hbar(None, 2) == "  "


def test_area_rows_stack_top_first() -> None:
    rows = area_rows([1.0, 0.5, None, 0.0], height=2, hi=1.0)
    assert rows == ["█   ", "██  "]


def test_nice_ceiling() -> None:
    assert nice_ceiling(82.7) == 100.0
    assert nice_ceiling(5640.8) == 6000.0
    assert nice_ceiling(0.0) == 1.0


def test_columns_drop_by_priority_as_width_shrinks() -> None:
    wide = {c.key for c in choose_columns(200)}
    assert wide == {c.key for c in GPU_COLUMNS}
    at80 = {c.key for c in choose_columns(78)}
    assert {"gpu", "deficit", "sm", "temp", "power", "reasons", "pcie", "util"} <= at80
    assert "memclk" not in at80
    at60 = {c.key for c in choose_columns(58)}
    assert {"gpu", "sm", "temp", "power", "reasons"} <= at60
    assert "trend" not in at60 and "hbm" not in at60


def test_gpu_table_lines_fill_the_width_exactly() -> None:
    rows = [
        {
            "gpu": Cell("0"),
            "deficit": Cell("−7%", "flag"),
            "sm": Cell("990"),
            "reasons": Cell("pwrcap", "warn"),
        },
        {"gpu": Cell("1◂", "mark"), "deficit": Cell("")},
    ]
    for width in (58, 78, 158):
        lines = GpuTable(rows).lines(width)
        assert len(lines) == 3
        assert all(sum(s.cell_length for s in line) == width for line in lines)
    text = render_text(GpuTable(rows), 78)
    assert "pwrcap" in text[1] and "990" in text[1]


def test_graph_has_exact_size_marks_and_labels() -> None:
    cw = TokenRateGraph.chart_width(60)
    tok = [float(i) for i in range(cw)]
    marks = [
        GraphMark(0, 5, "loading", "loading #8 7s"),
        GraphMark(10, 12, "bench", "B1"),
        GraphMark(20, 20, "restart", "restart"),
    ]
    g = TokenRateGraph(tok, [90.0] * cw, [70.0] * cw, marks, height=7, window_label="5m")
    lines = g.lines(60)
    assert len(lines) == 7
    assert all(sum(s.cell_length for s in line) == 60 for line in lines)
    text = render_text(g, 60)
    assert "tok/s" in text[0]
    assert text[1].rstrip().endswith(f"{cw - 1:.1f}")
    assert text[4].startswith("clk%") and "90%" in text[4]
    assert text[5].startswith("hot°C") and "70°" in text[5]
    # The run label claims its room first; the loading label falls back to its short form.
    assert "L#8 7s" in text[6] and "B1━" in text[6] and "R" in text[6]


def test_graph_without_strips_on_short_panes() -> None:
    g = TokenRateGraph([1.0], [], [], [], height=3, window_label="1m", strips=False)
    text = render_text(g, 40)
    assert len(text) == 3 and not any(t.startswith("clk%") for t in text)


def test_pane_text_functions_take_their_arguments_in_one_order() -> None:
    import inspect

    from specwatch.ui.panes.speculation import speculation_text
    from specwatch.ui.panes.verify import verify_text

    def params(f: object) -> list[tuple[str, object]]:
        sig = inspect.signature(f)  # type: ignore[arg-type]
        return [(p.name, p.default) for p in sig.parameters.values()]

    assert params(speculation_text) == params(verify_text)
    assert [name for name, _ in params(verify_text)] == ["model", "s", "width", "height"]
