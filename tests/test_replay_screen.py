"""Replay as a user drives it (issue 21 item 13): a dcgm recording opens on its GPUs, a ``g``
jump keeps the GPU pane and the clock band, and the footer offers the replay keys, not ``b``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from textual.pilot import Pilot

from specwatch.core.gpu import GpuOrigin
from specwatch.record.reader import Reader
from specwatch.record.replay import ReplaySession
from specwatch.session import events as ev
from specwatch.ui.panes.gpus import GpusPane
from specwatch.ui.replay_app import ReplayApp
from specwatch.ui.settings import AppSettings
from tests.record_world import inventory, record_story, tick, window
from tests.test_ui_app import text_of

MAX = 1980


def dcgm_story(seconds: int = 300) -> Iterator[ev.SessionEvent | tuple[float, ev.SessionEvent]]:
    """As ``specwatch record --dcgm`` writes it: the server is waited for first, the exporter's
    GPUs arrive a moment after the session started, then a tick and a window every second."""
    origin = GpuOrigin("dcgm", nodes=("gpu-node", "gpu-node"))
    yield ev.ServerWaiting(0.0, "refused", 1, 0.0, "")
    yield 0.05, ev.GpuInventoryChanged(replace(inventory(), origin=origin))
    for s in range(1, seconds + 1):
        yield ev.GpuTicked(tick(float(s), MAX))
        yield ev.MetricsScraped(window(float(s), 90.0))


def _app(reader: Reader) -> tuple[ReplayApp, ReplaySession]:
    replay = ReplaySession(reader)
    settings = AppSettings(watch_terminal=False, live_cpu=False, show_overhead=False)
    return ReplayApp(settings, replay), replay


async def _gpu_text(app: ReplayApp, pilot: Pilot[int]) -> str:
    app.redraw()
    await pilot.pause()
    return text_of(app.query_one(GpusPane))


async def _jump(pilot: Pilot[int], text: str) -> None:
    await pilot.press("g")
    await pilot.pause()
    await pilot.press(*text)
    await pilot.press("enter")
    await pilot.pause()


async def test_a_dcgm_recording_opens_on_its_gpus_not_on_nvml(tmp_path: Path) -> None:
    path = tmp_path / "dcgm.sqlite"
    record_story(path, dcgm_story())
    with Reader(path) as reader:
        app, replay = _app(reader)
        replay.toggle_pause()  # held at the opening frame
        async with app.run_test(size=(120, 40)) as pilot:
            assert "NVML" not in await _gpu_text(app, pilot)  # the first frame
            await pilot.pause(0.3)
            text = await _gpu_text(app, pilot)
            assert "NVML" not in text, text
            assert "gpu-node via dcgm" in str(app.query_one(GpusPane).border_title)


async def test_a_forward_jump_keeps_the_gpu_pane_and_the_clock_band(tmp_path: Path) -> None:
    path = tmp_path / "dcgm.sqlite"
    record_story(path, dcgm_story())
    with Reader(path) as reader:
        app, replay = _app(reader)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("space")
            # Forward, to the time the status line shows for a moment later (whole seconds).
            later = dt.datetime.fromtimestamp(reader.wall(replay.now + 120))
            await _jump(pilot, later.strftime("%Y-%m-%dT%H:%M:%S"))
            assert replay.now > 100
            text = await _gpu_text(app, pilot)
            assert "NVML" not in text and " 1980 " in text, text
            assert app.model.clock_pct.last() == 100.0
            # And back to the very start (the label's time, before the first GPU reading).
            first = dt.datetime.fromtimestamp(reader.wall(replay.first_t))
            await _jump(pilot, first.strftime("%Y-%m-%dT%H:%M:%S"))
            text = await _gpu_text(app, pilot)
            assert "NVML" not in text, text
            assert app.model.inventory is not None and app.model.inventory.available


async def test_the_replay_footer_offers_the_replay_keys_not_the_live_ones(tmp_path: Path) -> None:
    path = tmp_path / "story.sqlite"
    record_story(path)
    with Reader(path) as reader:
        app, _replay = _app(reader)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            shown = {
                b.binding.key: b.binding.description
                for b in app.screen.active_bindings.values()
                if b.binding.show and b.enabled
            }
            assert {"Play/pause", "Step", "±1m", "Speed", "Jump"} <= set(shown.values()), shown
            assert "b" not in shown and "i" not in shown, shown
            await pilot.press("b")
            await pilot.pause()
            assert app.model.bench is None
