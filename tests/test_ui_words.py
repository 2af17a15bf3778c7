"""The screen's words say where things come from (issue 21 item 20)."""

from __future__ import annotations

from dataclasses import replace

from specwatch.core.gpu import GpuInventory, GpuOrigin
from specwatch.ui.panes.status import status_parts
from tests.scene import build_scene


def _texts(model: object) -> list[str]:
    return [text for _p, text, _tone in status_parts(model)]  # type: ignore[arg-type]


def test_the_status_line_names_the_gpu_source_it_times() -> None:
    model = build_scene(seconds=30, with_bench=False)
    assert any(t.startswith("nvml ") for t in _texts(model))
    inv = model.inventory
    assert inv is not None
    model.set_inventory(replace(inv, origin=GpuOrigin("dcgm", nodes=("n1",) * len(inv.gpus))))
    texts = _texts(model)
    assert any(t.startswith("dcgm ") and t.endswith("ms") for t in texts), texts
    assert not any(t.startswith("nvml") for t in texts), texts
    model.set_inventory(GpuInventory(available=False, reason="GPUs not read (--no-gpu)"))
    assert not any(t.endswith("ms") for t in _texts(model))


async def test_m_shows_the_screens_names_and_where_the_gpu_figures_come_from() -> None:
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.modals import TextModal
    from specwatch.ui.settings import AppSettings

    model = build_scene(seconds=60, with_bench=False)
    assert model.window is not None and "gen_tok_s" in model.window.sources
    app = SpecwatchApp(AppSettings(watch_terminal=False, live_cpu=False), model=model)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        body = app.screen.body
    assert "tok/s (generated): " in body and "GPU figures: NVML on this machine" in body, body
    assert not [line for line in body.splitlines() if line.split(":")[0] in ("gen_tok_s", "itl_s")]


def test_the_cpu_figure_says_when_it_includes_a_running_benchmark() -> None:
    from specwatch.ui.model import BenchState

    model = build_scene(seconds=30, with_bench=False)
    model.monitor_cpu_pct = 0.6
    assert "cpu 0.6%" in _texts(model)
    model.bench = BenchState(phase="running")
    model.monitor_cpu_pct = 14.2  # the benchmark's streams run in this process
    assert "cpu 14.2% with bench" in _texts(model)
    model.bench = BenchState(phase="finished")
    assert "cpu 14.2%" in _texts(model)


def test_the_bench_bar_drops_whole_parts_never_cutting_a_figure() -> None:
    """Issue 21 item 11 on the bench bar: at 120 columns the finished run's message was cut
    inside its tok/s ("= 16…"); the message goes first, then the last runs, never a number cut."""
    from rich.style import Style

    from specwatch.ui.model import BenchState
    from specwatch.ui.panes.bench_bar import bench_text

    model = build_scene(seconds=30, with_bench=False)
    model.bench = BenchState(
        phase="running",
        index=5,
        total=5,
        message="Run 5/5: 2048 tokens in 12.69s = 161.4 tok/s",
        last_tok_s=[169.0, 171.5, 172.4, 176.5, 161.4],
    )
    s = {"text": Style(), "bar": Style(), "dim": Style()}
    wide = bench_text(model, 200, s).plain
    assert "= 161.4 tok/s" in wide and "(b: stop)" in wide
    for width in range(30, 200):
        # what fits is never cut at the edge (the ellipsis that cut "= 16…")
        line = bench_text(model, width, s).plain
        assert len(line) <= width, (width, line)
    assert "12.69s" not in bench_text(model, 116, s).plain


def test_the_status_line_says_when_scrapes_come_late() -> None:
    model = build_scene(seconds=30, with_bench=False)
    assert not any("apart" in t for t in _texts(model))
    w = model.window
    assert w is not None
    # A starved monitor: one window of 24 s, then on time again; said for a minute.
    model.add_window(replace(w, t=w.t + 24.0, dt=24.0))
    for i in range(1, 4):
        model.add_window(replace(w, t=w.t + 24.0 + i, dt=1.0))
    assert "scrapes up to 24s apart" in _texts(model)
    model.replay_label = "replay of run.db"  # the recorder read it late, and says so on replay
    assert "recorded scrapes up to 24s apart" in _texts(model)
    model.replay_label = None
    model.metrics_interval_s = 10.0  # asked for: not late
    assert not any("apart" in t for t in _texts(model))
    model.metrics_interval_s = 1.0
    for i in range(4, 64):
        model.add_window(replace(w, t=w.t + 24.0 + i, dt=1.0))
    assert not any("apart" in t for t in _texts(model))


def test_a_window_across_a_reconnection_is_an_outage_not_a_late_read() -> None:
    model = build_scene(seconds=30, with_bench=False)
    w = model.window
    assert w is not None and model.server is not None
    model.set_lost(w.t + 1.0, "connection refused")
    model.set_ready(w.t + 20.0, model.server)
    model.add_window(replace(w, t=w.t + 21.0, dt=21.0))
    assert not any("apart" in t for t in _texts(model))
