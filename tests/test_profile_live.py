"""A profile taken from the live monitor: the session's job over the simulator's profiler (its
progress, its end, the profile file beside the snapshots), the key in the TUI with its question
first, and profile events kept in a recording."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from specwatch.record.codec import decode, encode
from specwatch.session.events import (
    MetricsScraped,
    ProfileFinished,
    ProfileProgress,
    ServerReady,
)
from specwatch.session.profile_job import ProfileOptions
from tests.session_world import Collector, drive_until, manual_sim


async def test_a_live_profile_reports_each_phase_and_keeps_its_file(tmp_path: Path) -> None:
    with manual_sim(verify_eager=True, base_step_ms=12.0, plain_step_ms=12.0) as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)
        async with session:
            options = ProfileOptions(steps=10, out_dir=tmp_path)
            assert session.start_profile(options) is None  # not connected yet
            await drive_until(sim, lambda: bool(seen.of(ServerReady)))
            await drive_until(
                sim,
                lambda: any(e.window.step_latency_s for e in seen.of(MetricsScraped)),
                step_s=1.0,
            )
            job = session.start_profile(options)
            assert job is not None and session.profile_running
            assert session.start_profile(options) is None  # one at a time
            await drive_until(sim, lambda: bool(seen.of(ProfileFinished)), 60, step_s=0.05)
        assert not session.profile_running
    (done,) = seen.of(ProfileFinished)
    assert done.outcome == "finished", done.failure
    assert done.verdict.startswith("VERIFY ran eager: 0 graph launches")
    assert done.summary is not None and done.failure is None
    phases = [e.phase for e in seen.of(ProfileProgress)]
    assert phases[0] == "asking" and phases[-1] == "reading"
    assert phases.index("armed") < phases.index("capturing") < phases.index("reading")
    writing = [e for e in seen.of(ProfileProgress) if e.phase == "writing"]
    assert writing and writing[-1].files == 1 and writing[-1].bytes > 0
    assert done.path is not None and done.path.parent == tmp_path
    doc = orjson.loads(done.path.read_bytes())
    assert doc["kind"] == "profile" and doc["verdict"] == done.verdict
    # the live window's step time at the moment the profile was asked for
    assert doc["live_step_ms"] is not None and doc["live_step_ms"] > 0


async def test_a_server_without_a_profiler_gets_one_line_and_no_profiling_phase(
    tmp_path: Path,
) -> None:
    with manual_sim("llamacpp") as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)
        async with session:
            await drive_until(sim, lambda: bool(seen.of(ServerReady)))
            assert session.start_profile(ProfileOptions(out_dir=tmp_path)) is not None
            await drive_until(sim, lambda: bool(seen.of(ProfileFinished)), 20)
    (done,) = seen.of(ProfileFinished)
    assert done.outcome == "refused" and done.summary is None and done.path is None
    assert done.failure is not None and "\n" not in done.failure
    assert "llama.cpp has no profiler endpoint" in done.failure
    assert "armed" not in [e.phase for e in seen.of(ProfileProgress)]
    assert not list(tmp_path.iterdir())


def test_profile_events_survive_a_recording(tmp_path: Path) -> None:
    from specwatch.core.profile import KindProfile, ProfileSummary, WallMs

    kind = KindProfile("VERIFY", 10, WallMs(29.3, 29.0, 31.0), graph_launches=0.0)
    summary = ProfileSummary((kind,), (), gpu_activity=True, problems=("rank 3: truncated",))
    for event in (
        ProfileProgress(12.5, "writing", "waiting for the server to write", 1, 4096),
        ProfileFinished(20.0, "finished", "VERIFY ran eager", summary, tmp_path, None, None),
    ):
        kind_name, payload, compressed = encode(event)
        assert decode(kind_name, payload, compressed) == event


async def test_the_profile_key_asks_first_then_shows_progress_and_the_verdict(
    tmp_path: Path,
) -> None:
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.modals import ConfirmModal, TextModal
    from specwatch.ui.panes.bench_bar import bench_text
    from specwatch.ui.settings import AppSettings
    from tests.test_ui_live import wait_for

    with manual_sim(verify_eager=True, base_step_ms=12.0, plain_step_ms=12.0) as sim:
        settings = AppSettings(
            watch_terminal=False, redraw_s=0.1, snapshot_dir=tmp_path, profile_steps=8
        )
        app = SpecwatchApp(settings, sim.session())
        styles = {"text": None, "bar": None, "dim": None}
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: app.model.connection_ok, sim=sim)
            await pilot.press("P")
            assert isinstance(app.screen, ConfirmModal)
            assert "makes the server do profiling work" in app.screen.question
            assert app.screen.question.startswith("Profile 8 decode steps of ")
            await pilot.press("n")  # no: nothing is asked of the server
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmModal)
            assert app.session is not None and app.session.profile is None
            await pilot.press("P")
            await pilot.press("y")
            await wait_for(
                pilot, lambda: app.model.profile is not None and app.model.profile.phase != "asking"
            )
            line = bench_text(app.model, 120, styles).plain
            assert line.startswith("profile ") and "(P: stop)" in line
            await wait_for(
                pilot, lambda: isinstance(app.screen, TextModal), 60, sim=sim, step_s=0.05
            )
            assert isinstance(app.screen, TextModal)
            body = app.screen.body
            assert "VERIFY ran eager: 0 graph launches" in body and "profile saved:" in body
            assert any(m.kind == "profile" and m.t1 is not None for m in app.model.marks)
            await pilot.press("escape")
            assert app.model.profile is not None and not app.model.profile.active
        (kept,) = tmp_path.glob("*-profile.json")
        assert json.loads(kept.read_text())["steps_asked"] == 8


def test_the_monitor_takes_the_profile_steps_from_its_command_line() -> None:
    from specwatch.commands.main import build_parser
    from specwatch.commands.tui import build_settings

    args = build_parser().parse_args(["--url", "http://127.0.0.1:9", "--profile-steps", "8"])
    assert build_settings(args).profile_steps == 8
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--url", "http://127.0.0.1:9", "--profile-steps", "0"])


def test_compare_in_the_tui_takes_the_two_newest_snapshots_not_a_profile(tmp_path: Path) -> None:
    import os

    from specwatch.ui.bench_glue import latest_snapshots

    names = ["specwatch-1-a.json", "specwatch-2-b.json", "specwatch-3-profile.json"]
    for i, name in enumerate(names):
        (tmp_path / name).write_text("{}")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    assert [p.name for p in latest_snapshots(tmp_path)] == names[:2]
