"""The app under Pilot: keys, state, messages, sizes, and bad input (no live sources)."""

from __future__ import annotations

from pathlib import Path

from textual.geometry import Region
from textual.widget import Widget

from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick
from specwatch.core.server import MetricsWindow
from specwatch.session.events import (
    GpuInventoryChanged,
    GpuTicked,
    MetricsScraped,
    ServerLost,
    ServerReady,
    ServerWaiting,
)
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.modals import HelpScreen, TextModal
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpus import GpusPane
from specwatch.ui.panes.speculation import SpeculationPane
from specwatch.ui.panes.status import StatusLine
from specwatch.ui.panes.token_rate import TokenRatePane
from specwatch.ui.panes.verify import VerifyPane
from specwatch.ui.settings import AppSettings
from tests.scene import build_scene, scene_inventory, scene_server


def make_app(model: MonitorModel | None = None, **kw: object) -> SpecwatchApp:
    settings = AppSettings(watch_terminal=False, live_cpu=False, **kw)  # type: ignore[arg-type]
    return SpecwatchApp(settings, model=model if model is not None else build_scene())


def text_of(widget: Widget) -> str:
    w, h = widget.region.size
    return "\n".join(s.text for s in widget.render_lines(Region(0, 0, w, h)))


async def test_keys_change_state() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        rate = app.query_one(TokenRatePane)
        assert (app.theme, app.model.interval_s, rate.window) == ("dark", 1.0, "5m")
        await pilot.press("t")
        assert app.theme == "light"
        await pilot.press("t", "t", "t")
        assert app.theme == "dark"
        await pilot.press("i")
        assert app.model.interval_s == 2.0
        await pilot.press("i", "i")
        assert app.model.interval_s == 0.5
        await pilot.press("w")
        assert rate.window == "15m"
        await pilot.pause()
        assert "last 15m" in str(rate.border_title)
        await pilot.press("p")
        assert app.model.paused
        await pilot.pause()
        assert "PAUSED" in text_of(app.query_one(StatusLine))
        await pilot.press("p")
        assert not app.model.paused


async def test_paused_app_does_not_redraw() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        gpus = app.query_one(GpusPane)
        app.redraw()
        await pilot.press("p")
        drawn = gpus._drawn_version
        tick = app.model.tick
        assert tick is not None
        app.receive(GpuTicked(GpuTick(t=tick.t + 1, wall_time=0, samples=tick.samples, cost_ms=1)))
        await pilot.pause()
        app.redraw()
        assert gpus._drawn_version == drawn
        await pilot.press("p")
        assert gpus._drawn_version == app.model.gpu_version


async def test_help_and_reason_legend() -> None:
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        assert "pwrcap" in text_of(app.screen.query_one("Static"))
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)


async def test_screenshot_key_saves_svg(tmp_path: Path) -> None:
    app = make_app(screenshot_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        await pilot.pause()
        files = list(tmp_path.glob("*.svg"))
        assert len(files) == 1 and "<svg" in files[0].read_text()
        assert any("saved" in n.message for n in app._notifications)


async def test_benchmark_without_server_says_so() -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("b")
        await pilot.pause()
        assert any("no server connected" in n.message for n in app._notifications)


async def test_compare_with_too_few_snapshots(tmp_path: Path) -> None:
    app = make_app(snapshot_dir=tmp_path)
    async with app.run_test() as pilot:
        app.action_compare()
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        assert "need two snapshots" in app.screen.body


async def test_quit_key_exits() -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("q")
    assert app.return_code == 0


async def test_messages_reach_the_model_and_are_recorded() -> None:
    app = make_app(MonitorModel())
    async with app.run_test(size=(100, 30)) as pilot:
        app.receive(GpuInventoryChanged(scene_inventory(2)))
        app.receive(ServerWaiting(1.0, "loading", 3, 2.0, ""))
        await pilot.pause()
        assert "attempt 3" in app.model.connection
        app.receive(ServerReady(2.0, scene_server()))
        sample = GpuSample(index=0, t=2.0, sm_clock_mhz=1500, temp_c=60)
        app.receive(GpuTicked(GpuTick(t=2.0, wall_time=0, samples=(sample,), cost_ms=0.2)))
        app.receive(MetricsScraped(MetricsWindow(t=3.0, dt=1.0, gen_tok_s=82.7, accept_length=2.4)))
        app.receive(ServerLost(4.0, "connection refused"))
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert app.message_counts == {
            "inventory": 1,
            "server_waiting": 1,
            "server_ready": 1,
            "gpu_tick": 1,
            "metrics": 1,
            "server_lost": 1,
        }
        assert app.model.tok_s.last() == 82.7
        assert "lost: connection refused" in text_of(app.query_one(StatusLine))
        assert "2.40" in text_of(app.query_one(SpeculationPane))


async def test_bad_sample_is_skipped_not_fatal() -> None:
    app = make_app(MonitorModel())
    async with app.run_test() as pilot:
        app.receive(GpuInventoryChanged(scene_inventory(1)))
        bad = GpuTick(t=1.0, wall_time=0, samples=None, cost_ms=0.1)  # type: ignore[arg-type]
        app.receive(GpuTicked(bad))
        app.receive(MetricsScraped(MetricsWindow(t=2.0, dt=1.0, gen_tok_s="x")))  # type: ignore[arg-type]
        await pilot.pause()
        assert app.sample_errors >= 1
        good = GpuSample(index=0, t=3.0, sm_clock_mhz=1500)
        app.receive(GpuTicked(GpuTick(t=3.0, wall_time=0, samples=(good,), cost_ms=0.1)))
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert app.is_running and app.model.tick is not None and app.model.tick.t == 3.0
        assert "1500" in text_of(app.query_one(GpusPane))


async def test_nvml_unavailable_gpu_pane_says_why() -> None:
    app = make_app(MonitorModel())
    async with app.run_test() as pilot:
        reason = "NVML unavailable: NVML Shared Library Not Found"
        app.receive(GpuInventoryChanged(GpuInventory(available=False, reason=reason)))
        app.receive(MetricsScraped(MetricsWindow(t=2.0, dt=1.0, gen_tok_s=50.0)))
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert "Shared Library Not Found" in text_of(app.query_one(GpusPane))
        assert app.model.tok_s.last() == 50.0


async def test_lost_gpu_row() -> None:
    model = build_scene(seconds=60)
    tick = model.tick
    assert tick is not None
    samples = list(tick.samples)
    samples[3] = GpuSample(index=3, t=tick.t, lost=True)
    model.add_tick(GpuTick(t=tick.t + 1, wall_time=0, samples=tuple(samples), cost_ms=0.5))
    app = make_app(model)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "lost: fell off the bus" in text_of(app.query_one(GpusPane))


async def test_eight_gpus_fit_80x24_and_degrade_to_60x20() -> None:
    for size in ((80, 24), (60, 20)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            gpus = app.query_one(GpusPane)
            # Eight rows would leave the graph two tok/s rows: they collapse to a summary.
            assert gpus.summarised() and gpus.region.height == 3, size
            text = text_of(gpus)
            assert "slowest GPU 5◂" in text and "hottest" in text
            assert app.query_one(TokenRatePane).region.height >= 7
            assert app.query_one(VerifyPane).region.height >= 3
            assert app.query_one(TokenRatePane).strips is (size[1] >= 22)
            bottom = max(w.region.bottom for w in (gpus, app.query_one(VerifyPane)))
            assert bottom <= size[1] - 1


async def test_incremental_redraws_match_a_full_redraw() -> None:
    """After many incremental updates (lines rebuilt from the strip cache) the panes hold what a
    fresh draw shows."""
    import dataclasses
    import random

    rng = random.Random(7)
    model = build_scene(seconds=200)
    app = make_app(model)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        for _ in range(12):
            tick, w = model.tick, model.window
            assert tick is not None and w is not None and w.gen_tok_s is not None
            t = tick.t + 1
            samples = tuple(
                dataclasses.replace(
                    s, t=t, sm_clock_mhz=(s.sm_clock_mhz or 0) + rng.randint(-40, 40)
                )
                for s in tick.samples
            )
            model.add_tick(GpuTick(t=t, wall_time=0, samples=samples, cost_ms=0.4))
            model.add_window(
                dataclasses.replace(w, t=t + 0.2, gen_tok_s=w.gen_tok_s * rng.uniform(0.8, 1.2))
            )
            await settle(pilot)
        rebuilt = {type(p).__name__: p.builds for p in app._panes}
        incremental = app.export_screenshot()
        incremental_text = {type(p).__name__: text_of(p) for p in app._panes}
    assert rebuilt["GpusPane"] >= 12 and rebuilt["TokenRatePane"] >= 12, rebuilt
    fresh = make_app(model)
    async with fresh.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        full = fresh.export_screenshot()
        full_text = {type(p).__name__: text_of(p) for p in fresh._panes}
    assert incremental_text == full_text  # the readable difference, when there is one
    assert incremental == full


async def settle(pilot: object) -> None:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    app = pilot.app
    assert isinstance(app, SpecwatchApp)
    app.redraw()
    await pilot.pause()


async def test_keys_and_resize_while_a_modal_is_open() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("w")  # the modal holds the keys: nothing changes underneath
        await pilot.resize_terminal(70, 20)
        await pilot.pause()
        assert app.is_running and app.rate_pane.window == "5m"
        assert app.rate_pane.strips is False
        await pilot.press("escape", "w")
        assert app.rate_pane.window == "15m"


async def test_a_window_longer_than_the_history_says_how_much_it_holds() -> None:
    # issue 21 item 8: the 1 h window over minutes of readings showed three columns, no word why.
    from specwatch.ui.panes.token_rate import duration_words

    model = build_scene(seconds=200, with_bench=False)
    app = SpecwatchApp(AppSettings(watch_terminal=False, live_cpu=False, window="1h"), model=model)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        title = str(app.query_one(TokenRatePane).border_title)
        assert "last 1h · 3m of history" in title, title
        await pilot.press("w")  # 1m: wholly covered by the history
        await pilot.pause()
        assert "of history" not in str(app.query_one(TokenRatePane).border_title)
    assert [duration_words(s) for s in (4, 45, 190, 3900)] == ["4s", "40s", "3m", "1h05m"]
