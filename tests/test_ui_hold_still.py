"""The screen holds still and shows the GPU signal: pure renderables and the model, no app."""

from __future__ import annotations

import itertools

from rich.style import Style

from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.core.server import MetricsWindow
from specwatch.core.window_mean import STEADY_HOLD_S
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpus import deficit_cell, sm_trends, summary_lines
from specwatch.ui.panes.speculation import SOURCES_HINT, speculation_text
from specwatch.ui.panes.token_rate import (
    AxisHold,
    GraphMark,
    Reading,
    TokenRateGraph,
    graph_for,
    place_labels,
)
from specwatch.ui.renderables import bucket_sorted
from tests.scene import build_scene, scene_inventory, scene_server
from tests.test_ui_render import render_text

MAX = 1980
STYLES = {k: Style() for k in ("label", "value", "dim", "trend")}


def _sample(i: int, clock: int, reasons: int | None = 0, temp: int = 60) -> GpuSample:
    return GpuSample(i, 1.0, sm_clock_mhz=clock, clock_event_reasons=reasons, temp_c=temp)


def test_one_sample_per_column_draws_a_line_not_a_comb() -> None:
    # 1 s samples over 60 s in 80 columns: some columns get none.
    pts = [(float(t), 100.0) for t in range(1, 61)]
    comb = bucket_sorted(pts, 60.0, 60.0, 80)
    assert None in comb[2:]
    assert None not in bucket_sorted(pts, 60.0, 60.0, 80, hold_s=3.0)[2:]


def test_a_real_outage_still_shows_as_a_gap() -> None:
    pts = [(float(t), 100.0) for t in (*range(1, 20), *range(40, 61))]
    cols = bucket_sorted(pts, 60.0, 60.0, 60, hold_s=3.0)
    assert cols[30] is None and cols[23] is None and cols[21] == 100.0


def test_mark_labels_never_touch() -> None:
    marks = [
        GraphMark(0, 3, "bench", "B1"),
        GraphMark(2, 4, "warmup", "warmup"),
        GraphMark(4, 6, "bench", "B2"),
        GraphMark(6, 8, "bench", "B3"),
    ]
    placed = sorted(place_labels(marks, 40))
    for (a, la, _), (b, _, _) in itertools.pairwise(placed):
        assert a + len(la) < b, placed  # at least one free cell between two labels
    assert ("B1" in {p[1] for p in placed}) and "B1warmup" not in "".join(p[1] for p in placed)


def test_axis_grows_at_once_and_never_shrinks() -> None:
    # Issue 21 item 8: an axis that shrank after 30 quiet seconds read 600 <-> 800.
    axis = AxisHold()
    assert axis.update(780.0, 0.0) == 800.0
    assert axis.update(1400.0, 1.0) == 1500.0  # at once
    assert axis.update(500.0, 2.0) == 1500.0  # held
    assert axis.update(500.0, 3600.0) == 1500.0  # still, an hour later


def _window(t: float, tok: float | None, accept: float | None = 2.5) -> MetricsWindow:
    return MetricsWindow(t=t, dt=1.0, gen_tok_s=tok, accept_length=accept)


def test_a_missing_reading_is_held_with_its_age_then_dropped() -> None:
    m = MonitorModel()
    m.add_window(_window(1.0, 743.0))
    assert m.reading("gen_tok_s") == (743.0, None)
    m.add_window(_window(2.0, None, None))  # llama.cpp: no request ended in this window
    m.add_window(_window(5.0, None, None))
    assert m.reading("gen_tok_s") == (743.0, 4.0)
    assert m.reading("accept_length") == (2.5, 4.0)
    assert m.tok_s.last() == 743.0  # the graph holds the line too
    m.add_window(_window(6.0 + STEADY_HOLD_S, None))
    assert m.reading("gen_tok_s") == (None, None) and m.tok_s.last() is None


def test_held_value_is_dimmed_with_its_age_on_the_graph() -> None:
    cw = TokenRateGraph.chart_width(60)
    cur = (Reading(743.0, 12.0), Reading(95.0), Reading(70.0))
    g = TokenRateGraph([743.0] * cw, [95.0] * cw, [70.0] * cw, [], 7, "5m", current=cur)
    text = render_text(g, 60)
    assert "743.0 12s" in text[1]
    assert "95% 0–100" in text[4] and "70° 65–75" in text[5]


def test_speculation_rows_keep_their_places() -> None:
    m = MonitorModel()
    m.set_ready(0.0, scene_server())
    m.add_window(_window(1.0, 700.0))
    first = speculation_text(m, STYLES, 80, 5).plain.split("\n")
    m.add_window(
        MetricsWindow(t=2.0, dt=1.0, gen_tok_s=None, accept_length=None, notes={"x": "why"})
    )
    second = speculation_text(m, STYLES, 80, 5).plain.split("\n")
    assert [r.split()[0] for r in first[:3]] == [r.split()[0] for r in second[:3]]
    assert first[3] == SOURCES_HINT and second[3] == "note: why"
    assert "2.50" in second[0] and "held 1s" in second[0]


def test_per_position_acceptance_is_held_with_its_age_like_the_accept_length() -> None:
    # A real llama-server (draft, K=4) moves its per-position counters only when a request ends:
    # the row read "92% 72% 57% 42%" for one second, then "not reported" while the accept length
    # above it held 3.63 with its age.
    m = MonitorModel()
    m.set_ready(0.0, scene_server())
    m.add_window(
        MetricsWindow(t=1.0, dt=1.0, accept_length=3.63, per_position_acceptance=(0.92, 0.72))
    )
    assert m.per_position() == ((0.92, 0.72), None)
    m.add_window(MetricsWindow(t=3.0, dt=1.0, accept_length=None))
    assert m.per_position() == ((0.92, 0.72), 2.0)
    rows = speculation_text(m, STYLES, 80, 5).plain.split("\n")
    assert "held 2s" in rows[0] and rows[2].split()[2:] == ["92%", "72%", "held", "2s"], rows
    m.add_window(MetricsWindow(t=4.0 + STEADY_HOLD_S, dt=1.0))
    assert m.per_position() == (None, None)
    assert "not reported" in speculation_text(m, STYLES, 80, 5).plain.split("\n")[2]
    m.add_window(MetricsWindow(t=5.0 + STEADY_HOLD_S, dt=1.0, per_position_acceptance=(0.5,)))
    m.add_window(MetricsWindow(t=6.0 + STEADY_HOLD_S, dt=1.0, restarted=True))
    assert m.per_position() == (None, None)  # a restarted server's old figures are not held


def test_benchmarks_are_numbered_across_the_session() -> None:
    m = MonitorModel()
    for start in (0.0, 100.0):
        m.bench_event(start, "started", 0, 1, "", None)
        for k in (1, 2):
            m.bench_event(start + 10 * k, "run_start", k, 2, "", None)
            m.bench_event(start + 10 * k + 5, "run_done", k, 2, "", 500.0)
    assert [mk.label for mk in m.marks if mk.kind == "bench"] == ["B1", "B2", "B3", "B4"]


def test_a_refused_server_is_down_not_loading() -> None:
    m = MonitorModel()
    m.set_waiting(1.0, "refused", 1, 0.0, "")
    m.set_waiting(7.0, "refused", 2, 6.0, "")  # past DOWN_MARK_S: an outage, not a start-up
    assert [(mk.kind, mk.label) for mk in m.marks] == [("down", "down #2 6s")]


def test_deficit_is_flagged_only_without_a_reason() -> None:
    st = scene_inventory(1).gpus[0]
    assert deficit_cell(_sample(0, round(MAX * 0.93)), st).text == "−7%"
    assert deficit_cell(_sample(0, round(MAX * 0.93)), st).tone == "flag"
    assert deficit_cell(_sample(0, round(MAX * 0.93), reasons=0x004), st).tone == ""
    assert deficit_cell(_sample(0, MAX), st).text == "max"
    assert deficit_cell(_sample(0, round(MAX * 0.99)), st).tone == ""  # within the noise


def test_summary_names_the_slowest_and_hottest_and_the_ranges() -> None:
    m = MonitorModel()
    m.set_inventory(scene_inventory(3))
    samples = (_sample(0, 1900, temp=60), _sample(1, 1800, temp=61), _sample(2, 1850, temp=75))
    m.add_tick(GpuTick(1.0, 1.0, samples, 0.1))
    first, second = ("".join(c.text for c in line) for line in summary_lines(m))
    assert "slowest GPU 1◂ 1800 MHz −9%" in first and "hottest GPU 2 75°C" in first
    assert "SM 1800–1900 MHz" in second and "temp 60–75°C" in second


def test_gpu_trend_spans_the_graph_window() -> None:
    m = build_scene(seconds=300)
    m.graph_window = "5m"
    five = sm_trends(m)[0]
    assert all(v is not None for v in five)
    m.graph_window = "1m"
    one = sm_trends(m)[0]
    assert one != five  # the 1 m trend is the last minute only
    g = graph_for(m, "1m", 80, 10)
    assert g.window_label == "1m"
