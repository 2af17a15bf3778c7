"""SVG snapshots of each pane and each theme, from seeded data with no live sources.

Regenerate after an intended change with ``pytest tests/test_ui_snapshots.py --snapshot-update``
and review the SVGs (``snapshot_report.html`` shows the differences when a test fails).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from specwatch.core.gpu import GpuInventory
from specwatch.core.server import MetricsWindow
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.panes.gpus import GpusPane
from specwatch.ui.panes.load import LoadPane
from specwatch.ui.panes.speculation import SpeculationPane
from specwatch.ui.panes.status import StatusLine
from specwatch.ui.panes.token_rate import TokenRatePane
from specwatch.ui.panes.verdict import VerdictLine
from specwatch.ui.panes.verify import VerifyPane
from specwatch.ui.settings import AppSettings
from specwatch.ui.themes import BUILTIN_ORDER, load_themes, repo_theme_dir
from tests.scene import VERDICT_SCENES, build_scene, verdict_scene

SnapCompare = Callable[..., bool]


def scene_app(theme: str = "dark", model: MonitorModel | None = None) -> SpecwatchApp:
    settings = AppSettings(
        theme=theme, watch_terminal=False, live_cpu=False, theme_dirs=[repo_theme_dir()]
    )
    return SpecwatchApp(settings, model=model if model is not None else build_scene())


async def settle(pilot: Pilot[Any]) -> None:
    app = pilot.app
    if isinstance(app, SpecwatchApp):
        app.redraw()
    await pilot.pause()


class PaneApp(App[None]):
    """One pane alone, filling the screen."""

    def __init__(self, pane: type[ModelPane], model: MonitorModel) -> None:
        super().__init__()
        self.pane_type = pane
        self.model = model
        for theme in load_themes([repo_theme_dir()]).themes.values():
            self.register_theme(theme)
        self.theme = "dark"

    def compose(self) -> ComposeResult:
        yield self.pane_type(self.model)

    async def on_mount(self) -> None:
        self.query_one(ModelPane).styles.height = "1fr"
        self.query_one(ModelPane).sync()


@pytest.mark.parametrize("theme", BUILTIN_ORDER)
def test_theme_80x24(snap_compare: SnapCompare, theme: str) -> None:
    assert snap_compare(scene_app(theme), terminal_size=(80, 24), run_before=settle)


def test_wide_160x48(snap_compare: SnapCompare) -> None:
    assert snap_compare(scene_app(), terminal_size=(160, 48), run_before=settle)


def test_small_60x20(snap_compare: SnapCompare) -> None:
    assert snap_compare(scene_app(), terminal_size=(60, 20), run_before=settle)


@pytest.mark.parametrize(
    ("pane", "size"),
    [
        (GpusPane, (100, 11)),
        (TokenRatePane, (100, 12)),
        (SpeculationPane, (60, 8)),
        (VerifyPane, (60, 6)),
        (StatusLine, (120, 1)),
        (LoadPane, (60, 6)),
    ],
    ids=["gpus", "token_rate", "speculation", "verify", "status", "load"],
)
def test_pane(snap_compare: SnapCompare, pane: type[ModelPane], size: tuple[int, int]) -> None:
    assert snap_compare(PaneApp(pane, build_scene()), terminal_size=size)


def test_window_1h_and_paused(snap_compare: SnapCompare) -> None:
    assert snap_compare(
        scene_app(), terminal_size=(100, 30), press=["w", "w", "p"], run_before=settle
    )


def test_help(snap_compare: SnapCompare) -> None:
    assert snap_compare(scene_app(), terminal_size=(100, 40), press=["question_mark"])


def test_nvml_unavailable(snap_compare: SnapCompare) -> None:
    model = build_scene(seconds=120, with_bench=False)
    model.tick = None
    model.set_inventory(
        GpuInventory(available=False, reason="NVML unavailable: NVML Shared Library Not Found")
    )
    assert snap_compare(scene_app(model=model), terminal_size=(80, 24), run_before=settle)


def test_no_color(snap_compare: SnapCompare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(scene_app(), terminal_size=(80, 24), run_before=settle)


@pytest.mark.parametrize("kind", VERDICT_SCENES)
def test_verdict_line(snap_compare: SnapCompare, kind: str) -> None:
    model = build_scene(seconds=60, with_bench=False)
    model.set_verdict(verdict_scene(kind).state())
    assert snap_compare(PaneApp(VerdictLine, model), terminal_size=(160, 1))


def stale_scene() -> MonitorModel:
    """The scene, then 12 s of windows without a token rate or accept length (as llama.cpp
    reports between the ends of requests): the last readings held, dimmed, with their age."""
    model = build_scene(seconds=240, with_bench=False)
    for i in range(1, 13):
        t = 240.0 + i
        model.add_window(MetricsWindow(t=t, dt=1.0, notes={"gen_tok_s": "no request ended"}))
    return model


def test_collapsed_gpus_80x24(snap_compare: SnapCompare) -> None:
    model = build_scene(seconds=240, with_bench=False)
    assert snap_compare(scene_app(model=model), terminal_size=(80, 24), run_before=settle)


def test_stale_values_held(snap_compare: SnapCompare) -> None:
    assert snap_compare(scene_app(model=stale_scene()), terminal_size=(100, 30), run_before=settle)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_held_ages_and_the_regressions_figures(
    snap_compare: SnapCompare, size: tuple[int, int]
) -> None:
    from tests.test_ui_cuts import held_scene

    assert snap_compare(scene_app(model=held_scene()), terminal_size=size, run_before=settle)
