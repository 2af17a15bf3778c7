"""The UI's data model: histories, marks, straggler (pure, no app)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.core.server import MetricsWindow
from specwatch.ui.model import MonitorModel, straggler
from specwatch.ui.renderables import TimeSeries
from tests.scene import build_scene, scene_inventory, scene_server


def test_series_keeps_the_newest_points() -> None:
    s = TimeSeries(3)
    assert s.latest is None and s.first is None and s.last() is None
    for t in range(5):
        s.append(float(t), float(t) * 10)
    assert len(s) == 3 and s.maxlen == 3
    assert s.after(2.0) == [(3.0, 30.0), (4.0, 40.0)]
    assert s.last() == 40.0 and s.latest == (4.0, 40.0) and s.first == (2.0, 20.0)
    assert s.values(2) == [30.0, 40.0]
    assert s.values(0) == []
    assert s.values(9) == s.values() == [20.0, 30.0, 40.0]
    assert s.points() == [(2.0, 20.0), (3.0, 30.0), (4.0, 40.0)]
    s.append(5.0, None)
    assert s.last() is None and s.values() == [30.0, 40.0, None]
    s.clear()
    assert len(s) == 0 and s.latest is None
    assert isinstance(MonitorModel().tok_s, TimeSeries)
    with pytest.raises(ValueError):
        TimeSeries(0)


@given(
    times=st.lists(st.integers(0, 50), max_size=60).map(sorted),
    t0=st.integers(-1, 51),
    maxlen=st.integers(1, 40),
)
def test_after_is_the_tail_past_t0(times: list[int], t0: int, maxlen: int) -> None:
    """By bisection, equal to the plain scan, on a full series that dropped its oldest too."""
    ts = TimeSeries(maxlen)
    for i, t in enumerate(times):
        ts.append(float(t), None if i % 5 == 4 else float(i))
    assert ts.after(float(t0)) == [p for p in ts.points() if p[0] > t0]


def test_straggler_is_lowest_clock_then_hottest() -> None:
    a = GpuSample(index=0, t=0, sm_clock_mhz=1900, temp_c=60)
    b = GpuSample(index=1, t=0, sm_clock_mhz=1800, temp_c=55)
    c = GpuSample(index=2, t=0, sm_clock_mhz=1800, temp_c=70)
    assert straggler([a, b, c]) == 2
    assert straggler([a, a]) is None
    assert straggler([a]) is None
    lost = GpuSample(index=3, t=0, lost=True)
    assert straggler([a, b, lost]) == 1
    # Two GPUs tied for worst: marking one of them would be an arbitrary pick.
    c2 = GpuSample(index=4, t=0, sm_clock_mhz=1800, temp_c=70)
    assert straggler([a, b, c, c2]) is None


def test_tick_feeds_clock_percent_and_hottest() -> None:
    m = MonitorModel()
    m.set_inventory(scene_inventory(2))
    s0 = GpuSample(index=0, t=1.0, sm_clock_mhz=1980, temp_c=50)
    s1 = GpuSample(index=1, t=1.0, sm_clock_mhz=990, temp_c=70)
    m.add_tick(GpuTick(t=1.0, wall_time=0.0, samples=(s0, s1), cost_ms=0.3))
    assert m.clock_pct.last() == 75.0
    assert m.hottest_c.last() == 70.0
    assert m.gpu_version == 2 and m.now == 1.0


def test_loading_ready_warmup_and_restart_marks() -> None:
    m = MonitorModel()
    m.set_waiting(1.0, "refused", 1, 0.0, "")
    m.set_waiting(2.0, "loading", 2, 1.0, "")
    assert "attempt 2" in m.connection and not m.connection_ok
    m.set_ready(3.0, scene_server())
    kinds = [(mk.kind, mk.t0, mk.t1) for mk in m.marks]
    # Refused at first (down), then the server said it was loading: one mark, now "loading".
    assert kinds == [("loading", 1.0, 3.0), ("warmup", 3.0, None)]
    assert m.marks[0].label == "loading #2 1s"
    # Warmup closes once two windows with traffic agree within 15%.
    for t, rate in ((4.0, 30.0), (5.0, 80.0), (6.0, 85.0)):
        m.add_window(MetricsWindow(t=t, dt=1.0, gen_tok_s=rate))
    assert m.marks[1].t1 == 6.0
    m.add_window(MetricsWindow(t=7.0, dt=1.0, gen_tok_s=80.0, restarted=True))
    assert [mk.kind for mk in m.marks][-2:] == ["restart", "warmup"]


def test_first_scrape_without_interval_adds_no_point() -> None:
    m = MonitorModel()
    m.add_window(MetricsWindow(t=1.0, dt=0.0, lifetime_accept_length=2.0))
    assert len(m.tok_s) == 0 and m.window is None and m.last_scrape is not None


def test_a_late_read_draws_its_rate_over_the_span_it_covers() -> None:
    m = MonitorModel()
    m.set_ready(0.0, scene_server())
    for t in range(1, 6):
        m.add_window(MetricsWindow(t=float(t), dt=1.0, gen_tok_s=300.0))
    m.add_window(MetricsWindow(t=15.0, dt=10.0, gen_tok_s=370.0))  # a starved monitor
    assert [p for p in m.tok_s.points() if p[0] > 5.0] == [(float(t), 370.0) for t in range(6, 16)]
    # Across the server's reconnection the span is its outage: one point, the gap stays.
    m.set_lost(16.0, "connection refused")
    m.set_ready(30.0, scene_server())
    m.add_window(MetricsWindow(t=31.0, dt=16.0, gen_tok_s=300.0))
    assert [p for p in m.tok_s.points() if p[0] > 15.0] == [(31.0, 300.0)]


def test_a_replay_seek_keeps_the_recordings_interval() -> None:
    """A seek empties the model; windows of a recording made every 5 s must stay on time
    after it, not turn into late reads drawn five times over."""
    from specwatch.ui.replay_app import reset_model

    m = MonitorModel()
    m.metrics_interval_s = 5.0
    reset_model(m)
    m.add_window(MetricsWindow(t=10.0, dt=5.0, gen_tok_s=300.0))
    assert m.metrics_interval_s == 5.0 and len(m.tok_s) == 1


def test_bench_events_mark_runs() -> None:
    m = MonitorModel()
    m.bench_event(1.0, "started", 0, 2, "warming up", None)
    m.bench_event(2.0, "warmup_done", 2, 2, "", None)
    m.bench_event(3.0, "run_start", 1, 2, "", None)
    m.bench_event(5.0, "run_done", 1, 2, "", 82.4)
    m.bench_event(5.0, "run_start", 2, 2, "", None)
    m.bench_event(7.0, "run_done", 2, 2, "", 82.5)
    m.bench_event(7.0, "finished", 2, 2, "", None)
    m.bench_event(7.1, "finished", 2, 2, "", None)
    assert m.bench is not None and m.bench.phase == "finished"
    assert m.bench.last_tok_s == [82.4, 82.5]
    runs = [(mk.label, mk.t0, mk.t1) for mk in m.marks if mk.kind == "bench"]
    assert runs == [("B1", 3.0, 5.0), ("B2", 5.0, 7.0)]


def test_lost_marks_once_and_says_why() -> None:
    m = MonitorModel()
    m.set_ready(1.0, scene_server())
    m.set_lost(2.0, "connection refused")
    m.set_lost(3.0, "connection refused")
    assert [mk.kind for mk in m.marks].count("lost") == 1
    assert m.connection == "lost: connection refused"
    never = MonitorModel()
    never.set_lost(1.0, "HTTP 401 Unauthorized")
    assert never.connection == "error: HTTP 401 Unauthorized" and not never.marks


def test_scene_is_deterministic() -> None:
    a, b = build_scene(seed=3), build_scene(seed=3)
    assert a.tok_s.points() == b.tok_s.points() != []
    assert a.tick == b.tick
    assert {mk.kind for mk in a.marks} >= {"loading", "warmup", "restart", "lost", "bench"}


def test_a_server_watched_without_its_key_says_so_while_connected() -> None:
    from specwatch.core.server import KEYLESS_NOTE, Dialect, ServerInfo
    from specwatch.ui.source_words import sources_text

    refusal = "API key missing or wrong: use --api-key … HTTP 401"
    info = ServerInfo("http://h:8000", Dialect.VLLM, notes={KEYLESS_NOTE: refusal})
    m = MonitorModel()
    m.set_ready(1.0, info)
    assert m.connection == "connected · metrics only: API key missing or wrong"
    m.add_window(MetricsWindow(t=2.0, dt=1.0, gen_tok_s=10.0))
    assert m.connection == "connected · metrics only: API key missing or wrong"
    m.set_ready(3.0, ServerInfo("http://h:8000", Dialect.VLLM))
    assert m.connection == "connected"
    assert f"server figures: /metrics only: {refusal}" in sources_text(None, None, info)
    assert "server figures" not in sources_text(None, None, m.server)
