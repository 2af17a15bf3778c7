"""The fleet screen without live sources: rows, totals, cursor, stale markers, snapshot."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from textual.geometry import Region
from textual.pilot import Pilot

from specwatch.core.fleet import fleet_rows, node_pace, with_gone
from specwatch.ui.fleet_app import FleetApp, FleetChoice, FleetFailed, FleetUpdated
from specwatch.ui.fleet_pane import FleetPane, FleetTable
from specwatch.ui.themes import repo_theme_dir
from tests.fleet_scene import SCENE_T, scene_reading

SnapCompare = Callable[..., bool]


def table_text(table: FleetTable, width: int) -> list[str]:
    return ["".join(s.text for s in line) for line in table.lines(width)]


def test_rows_carry_the_node_pace() -> None:
    r = scene_reading()
    rows = {row.server.instance: row for row in fleet_rows(r.servers, r.gpus, r.joins)}
    one, two, three = rows["node1:8000"], rows["node2:30000"], rows["node3:8080"]
    assert one.slowest_clock == pytest.approx(1755 / 1980) and one.hottest_c == 66
    assert two.slowest_clock == pytest.approx(1410 / 1980) and two.hottest_c == 87
    assert (one.joined_by, len(one.gpus)) == ("host", 2)
    assert three.gpus == () and three.joined_by is None and three.slowest_clock is None
    lost = replace(r.gpus[1], sample=replace(r.gpus[1].sample, lost=True))
    assert node_pace([r.gpus[0], lost]) == (1.0, 61)  # a lost GPU sets no pace


def test_table_figures_and_exact_totals() -> None:
    r = scene_reading()
    rows = fleet_rows(r.servers, r.gpus, r.joins)
    lines = table_text(FleetTable(rows, r.totals, len(r.gpus), 0), 120)
    assert all(len(line) == 120 for line in lines)
    assert lines[0].split()[:3] == ["server", "dialect", "model"]
    node2 = next(line for line in lines if line.startswith("node2:30000"))
    assert node2.split() == [
        "node2:30000", "sglang", "Qwen/Qwen3-32B", "405.2", "2.60", "35.8", "4/2", "71%", "87°",
        "2", "host",
    ]  # fmt: skip
    total = lines[-1].split()
    # tok/s summed; accept length = Σ step tokens / Σ steps (1330/460), not a mean of means
    assert total[:5] == ["all", "3", "servers", "1313.6", "2.89"]
    assert total[5] == "11/2" and "4 GPUs" in lines[-1]


def test_table_narrow_keeps_the_figures() -> None:
    r = scene_reading()
    lines = table_text(FleetTable(fleet_rows(r.servers, r.gpus, r.joins), r.totals, 4), 60)
    assert all(len(line) == 60 for line in lines)
    assert "tok/s" in lines[0] and "SM clk" in lines[0] and "dialect" not in lines[0]


def test_gone_servers_stay_marked_stale() -> None:
    r = scene_reading()
    before = fleet_rows(r.servers, r.gpus, r.joins)
    now = with_gone(before[:2], before)
    assert [row.stale for row in now] == [False, False, True]
    lines = table_text(FleetTable(now, r.totals, 4), 100)
    assert "node3:8080 (gone)" in lines[3]


def fleet_app(clock: Callable[[], float] = lambda: SCENE_T + 1.0) -> FleetApp:
    return FleetApp(
        None, "http://prom:9090", clock=clock, theme_dirs=[repo_theme_dir()], watch_terminal=False
    )


def pane_text(app: FleetApp) -> str:
    pane = app.query_one(FleetPane)
    w, h = pane.region.size
    return "\n".join(s.text for s in pane.render_lines(Region(0, 0, w, h)))


async def test_cursor_and_enter_choose_a_server() -> None:
    app = fleet_app()
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.press("enter")
        assert app.is_running  # no rows yet: nothing to choose
        app.post_message(FleetUpdated(scene_reading()))
        await pilot.pause()
        assert "node2:30000" in pane_text(app) and "1313.6" in pane_text(app)
        await pilot.press("down", "down", "down", "up")
        assert app.selected_row() is not None
        assert app.selected_row().server.instance == "node2:30000"  # type: ignore[union-attr]
        await pilot.press("enter")
    choice = app.return_value
    assert isinstance(choice, FleetChoice)
    assert (choice.instance, choice.dialect, choice.model) == (
        "node2:30000",
        "sglang",
        "Qwen/Qwen3-32B",
    )
    assert len(choice.gpus) == 2 and choice.exporters == ("node2:9400",)


async def test_stale_reading_and_errors_are_said() -> None:
    now = [SCENE_T + 1.0]
    app = fleet_app(lambda: now[0])
    async with app.run_test(size=(100, 20)) as pilot:
        app.post_message(FleetUpdated(scene_reading()))
        await pilot.pause()
        assert "STALE" not in str(app.status.render()) and not app.status.has_class("-stale")
        now[0] += 60.0
        app.post_message(FleetFailed("history", "range query refused"))
        later = replace(scene_reading(), servers=scene_reading().servers[:2])
        later = replace(later, t=SCENE_T + 1.0, errors=("server gauges: HTTP 503",))
        app.post_message(FleetUpdated(later))
        await pilot.pause()
        assert app.status.has_class("-stale") and "STALE" in str(app.status.render())
        errors = str(app.errors.render())
        assert "range query refused" in errors and "HTTP 503" in errors
        assert "node3:8080 (gone)" in pane_text(app)


async def _settle(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, FleetApp)
    app.show(scene_reading())
    await pilot.press("down")
    await pilot.pause()


def test_fleet_snapshot_100x16(snap_compare: SnapCompare) -> None:
    assert snap_compare(fleet_app(), terminal_size=(100, 16), run_before=_settle)


def test_cli_several_urls_or_prometheus_open_the_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    from specwatch.commands.main import build_parser
    from specwatch.commands.tui import run_tui
    from specwatch.session.fleet_probe import FleetOptions
    from specwatch.ui import fleet_run

    seen: list[FleetOptions] = []

    async def fake(options: FleetOptions, *args: object, **kwargs: object) -> int:
        seen.append(options)
        close = kwargs.get("built")
        assert isinstance(close, tuple)
        await close[1]()
        return 0

    monkeypatch.setattr(fleet_run, "run_fleet_async", fake)
    argv = ["--url", "a:8000", "--url", "b:8000", "--node", "a:8000=a:9400"]
    assert run_tui(build_parser().parse_args(argv)) == 0
    assert (
        run_tui(build_parser().parse_args(["--prometheus", "prom", "--gpu-match", '{a="b"}'])) == 0
    )
    assert seen[0].urls == ("a:8000", "b:8000") and seen[0].nodes == ("a:8000=a:9400",)
    assert seen[1].prometheus == "prom" and seen[1].gpu_match == '{a="b"}'


def test_cli_bad_fleet_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from specwatch.commands.main import build_parser
    from specwatch.commands.tui import run_tui

    argv = ["--url", "a:8000", "--url", "b:8000", "--node", "a:8000"]
    assert run_tui(build_parser().parse_args(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert "SERVER_URL=DCGM_URL" in err and "\n" not in err


def test_cli_one_url_stays_the_single_server_screen() -> None:
    from specwatch.commands.main import build_parser
    from specwatch.commands.tui import build_session

    session = build_session(build_parser().parse_args(["--url", "localhost:1"]))
    assert [e.base_url for e in session.endpoints] == ["http://localhost:1"]
    session.stop()


async def test_drill_app_escape_goes_back_after_closing_a_modal() -> None:
    from specwatch.ui.fleet_run import BACK, DrillApp
    from specwatch.ui.modals import HelpScreen
    from specwatch.ui.settings import AppSettings
    from tests.scene import build_scene

    settings = AppSettings(watch_terminal=False, live_cpu=False, theme_dirs=[repo_theme_dir()])
    app = DrillApp(settings, model=build_scene())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen) and app.is_running
        await pilot.press("escape")
    assert app.return_value == BACK


async def test_one_idle_sample_under_load_does_not_show_as_the_nodes_pace() -> None:
    # issue 21 item 7: the fleet showed "SM clk 17%" for one refresh (a single idle sample).
    def reading(t: float, idle: bool) -> Any:
        r = scene_reading(t)
        gpus = []
        for g in r.gpus:
            busy = replace(g.sample, t=t, util_gpu_pct=100, clock_event_reasons=0)
            if idle and g.key == r.gpus[0].key:
                busy = replace(busy, sm_clock_mhz=345, util_gpu_pct=0, clock_event_reasons=0x1)
            gpus.append(replace(g, sample=busy))
        return replace(r, gpus=tuple(gpus))

    app = fleet_app(clock=lambda: SCENE_T + 9.0)
    async with app.run_test(size=(100, 20)) as pilot:
        for i, idle in enumerate((False, True, False)):
            app.post_message(FleetUpdated(reading(SCENE_T + 2.0 * i, idle)))
            await pilot.pause()
            row = next(r for r in app.rows if r.server.instance == "node1:8000")
            assert row.slowest_clock == pytest.approx(1755 / 1980), (i, row.slowest_clock)
            assert "17%" not in pane_text(app)
        # a GPU idle for longer than the hold is idle
        app.post_message(FleetUpdated(reading(SCENE_T + 10.0, True)))
        await pilot.pause()
        row = next(r for r in app.rows if r.server.instance == "node1:8000")
        assert row.slowest_clock == pytest.approx(345 / 1980)


async def test_help_on_the_fleet_screen_shows_the_fleets_keys_only() -> None:
    # issue 21 item 20: ? on the fleet screen listed b, i, w, m... which do nothing there.
    from specwatch.ui.modals import HelpScreen

    app = fleet_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = html.unescape(app.export_screenshot()).replace("\xa0", " ")
    assert "open the chosen server's own screen" in text, text
    assert "benchmark with the current settings" not in text
    assert "next graph window" not in text
