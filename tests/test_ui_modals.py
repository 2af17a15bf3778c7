"""Modals fitted to their content, the command palette listing each command once, and a help that
explains every word the screens show."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.binding import Binding
from textual.command import CommandPalette
from textual.containers import ScrollableContainer
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from specwatch.bench.snapshot import write_snapshot
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.fleet_app import FleetApp
from specwatch.ui.fleet_pane import FLEET_COLUMNS
from specwatch.ui.help_text import help_renderable
from specwatch.ui.modals import HelpScreen, ScrollModal, TextModal, fitted_width, is_table_row
from specwatch.ui.panes.load import LATENCY_ROWS
from specwatch.ui.renderables import GPU_COLUMNS
from specwatch.ui.replay_app import JumpModal
from specwatch.ui.settings import AppSettings
from specwatch.ui.themes import load_themes, repo_theme_dir
from tests.scene import build_scene
from tests.test_compare import STORY_AFTER, STORY_BEFORE, snap_dict
from tests.test_ui_render import render_text

SIZES = [(160, 48), (80, 24)]


def make_app(**kw: object) -> SpecwatchApp:
    settings = AppSettings(watch_terminal=False, live_cpu=False, **kw)  # type: ignore[arg-type]
    return SpecwatchApp(settings, model=build_scene())


def box_of(app: App[Any]) -> ScrollableContainer:
    screen = app.screen
    assert isinstance(screen, ScrollModal)
    return screen.box


def lines_of(region: Region, app: App[Any]) -> list[str]:
    strips = app.screen._compositor.render_strips()
    return [s.text[region.x : region.right] for s in strips[region.y : region.bottom]]


def story_snapshots(directory: Path) -> None:
    write_snapshot(snap_dict(STORY_BEFORE, (1980.0, 1965.0)), directory)
    time.sleep(0.01)  # the two newest by modification time, in this order
    write_snapshot(snap_dict(STORY_AFTER, (1950.0, 1830.0)), directory)


@pytest.mark.parametrize("size", SIZES)
async def test_a_one_line_modal_is_one_line_high(size: tuple[int, int]) -> None:
    app = make_app(snapshot_dir=Path("no-snapshots"))
    async with app.run_test(size=size) as pilot:
        app.action_compare()
        await pilot.pause()
        assert isinstance(app.screen, TextModal) and "\n" not in app.screen.body
        box = box_of(app).region
        assert box.height == 3 < size[1]
        assert len(app.screen.body) + 5 == box.width < size[0]
        text = "\n".join(lines_of(box, app))
        assert app.screen.body in text
        await pilot.press("escape")
        assert not isinstance(app.screen, TextModal)


@pytest.mark.parametrize("size", SIZES)
async def test_help_is_fitted_and_scrolls_within_the_screen(size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = box_of(app)
        assert box.region.height <= size[1] - 2
        assert box.region.width <= min(size[0] - 2, 100 + 5)
        assert box.max_scroll_y > 0 and box.max_scroll_x == 0


async def test_help_fits_again_when_the_terminal_shrinks() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert box_of(app).region.height == 46
        await pilot.resize_terminal(70, 20)
        await pilot.pause()
        assert box_of(app).region == Region(1, 1, 68, 18)


@pytest.mark.parametrize("size", SIZES)
async def test_metric_sources_modal_is_sized_to_its_lines(size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        lines = app.screen.body.splitlines()
        assert box_of(app).region.height == len(lines) + 2 < size[1]


async def test_compare_at_160_columns_holds_every_table_row_unwrapped(tmp_path: Path) -> None:
    story_snapshots(tmp_path)
    app = make_app(snapshot_dir=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        app.action_compare()
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        rows = [x for x in app.screen.body.splitlines() if is_table_row(x)]
        assert len(rows) >= 10 and max(map(len, rows)) > 60
        box = box_of(app)
        assert box.max_scroll_x == 0 and box.max_scroll_y == 0
        shown = lines_of(box.region, app)
        for row in rows:
            assert any(row.rstrip() in line for line in shown), row
        assert "Verdict: explained by GPU state" in "\n".join(shown)


async def test_compare_at_80_columns_scrolls_sideways_instead_of_wrapping(tmp_path: Path) -> None:
    story_snapshots(tmp_path)
    app = make_app(snapshot_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_compare()
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        box = box_of(app)
        widest = max(len(x) for x in app.screen.body.splitlines() if is_table_row(x))
        assert box.region.width <= 78
        assert box.query_one(Static).region.width >= widest
        assert box.region.height <= 22


def test_table_rows_keep_their_width_and_prose_wraps() -> None:
    body = "a sentence " * 20 + "\n  tok/s     89.1 ± 0.3     82.8 ± 0.7  *"
    assert fitted_width(body, 60) == 60
    assert fitted_width(body, 30) == len(body.splitlines()[1])
    assert fitted_width("short", 60) == len("short")
    assert not is_table_row("  (tok/s -7.0% (95% CI -8.0% to -6.1%); prose")


async def test_the_jump_input_is_a_small_box() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(JumpModal())
        await pilot.pause()
        box = app.screen.query_one("Vertical").region
        assert box.height <= 7 and box.width <= 80
        assert "esc cancels" in "\n".join(lines_of(box, app))


# --- the command palette ----------------------------------------------------------------------


def textual_theme_names(app: App[Any]) -> set[str]:
    ours = set(load_themes([repo_theme_dir()]).themes)
    return {name.lower() for name in app.available_themes} - ours


async def palette_entries(pilot: Pilot[Any], query: str = "") -> list[str]:
    await pilot.press("ctrl+p")
    await pilot.pause()
    if query:
        await pilot.press(*query)
    await pilot.pause(0.3)
    palette = pilot.app.screen
    assert isinstance(palette, CommandPalette)
    options = palette.query_one("CommandList", OptionList)
    prompts = [options.get_option_at_index(i).prompt for i in range(options.option_count)]
    await pilot.press("escape")
    return [str(p) for p in prompts]


@pytest.mark.parametrize("which", ["monitor", "fleet"])
async def test_palette_lists_each_command_once_and_only_our_themes(which: str) -> None:
    app: App[Any] = make_app() if which == "monitor" else FleetApp(watch_terminal=False)
    async with app.run_test(size=(160, 48)) as pilot:
        commands = list(app.get_system_commands(app.screen))
        titles = [c.title for c in commands]
        assert len(titles) == len(set(titles)), titles
        assert "Next theme" in titles and "Theme" not in titles
        # issue 21 item 20: specwatch's own Help and Quit, not Textual's beside them
        assert "Keys" not in titles and titles.count("Quit") == 1
        assert next(c for c in commands if c.title == "Quit").help == "Leave specwatch"
        themes = textual_theme_names(app)
        assert "nord" in themes  # the check below can fail
        assert not any(t.lower() in themes for t in titles)
        for c in commands:
            assert c.title[0].isupper() and c.help[0].isupper(), c
        shown = await palette_entries(pilot)
        assert sorted(p.split("\n")[0] for p in shown) == sorted(titles)
        assert len([p for p in shown if p.startswith("Screenshot")]) == (which == "monitor")
        searched = await palette_entries(pilot, "nord")
        assert not any("nord" in p.lower() for p in searched)


# --- the help --------------------------------------------------------------------------------


def help_text() -> str:
    return "\n".join(render_text(help_renderable(), 100))


def test_help_explains_every_abbreviation_on_screen() -> None:
    text = help_text()
    gpu_headings = [c.header for c in GPU_COLUMNS if c.key != "trend"] + ["SM 5m"]
    load_words = ["running", "waiting", "kv", "prefix hit", "prompt", "gen", "req/s"]
    load_words += [label for _, label in LATENCY_ROWS]
    panes = ["accept len", "acceptance", "per pos", "life", "held", "tok/step", "p50≈"]
    panes += ["effective", "plain", "break-even", "clk%", "hot°C", "cpu", "nvml", "every"]
    summary = ["slowest GPU", "hottest GPU", "min–max"]
    for word in gpu_headings + load_words + panes + summary + ["verdict", "◂", "5x16!"]:
        assert word.lower() in text.lower(), word
    for heading in ("util", "mem GiB", "power W", "PCIe", "clock events"):
        assert heading in gpu_headings  # the headings checked above are the table's own


def test_help_names_the_fleet_and_replay_keys() -> None:
    text = help_text()
    for binding in FleetApp.BINDINGS:
        assert isinstance(binding, Binding)
        first = binding.key.split(",")[0]
        shown = {"up": "↑", "down": "↓", "question_mark": "?"}.get(first, first)
        assert shown in text, binding.key
    assert "esc there goes back to the fleet" in text
    plain_words = {"instance", "dialect", "model"}  # server, dialect, model need no legend
    for column in FLEET_COLUMNS:
        assert column.key in plain_words or column.header in text, column.header
    assert "replay: jump to a time" in text


async def test_fleet_screen_opens_the_help() -> None:
    app = FleetApp(watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
