"""Record and replay: a session into SQLite, back out as the same typed events, at the same
times; damage, versions, retention, secrets, export, and compare over a time range."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specwatch.commands.record import run_export
from specwatch.core.outcomes import Outcome
from specwatch.record import Reader, Recorder, RecordingError, ReplaySession
from specwatch.record.store import FORMAT_VERSION
from specwatch.session.events import (
    GpuInventoryChanged,
    GpuTicked,
    MetricsScraped,
    RecordingStopped,
    ServerReady,
    VerdictChanged,
)
from specwatch.session.live_verdict import LiveVerdict
from specwatch.sim.demo import demo_world
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.server import SimServer
from tests.record_world import SECRET, WALL0, record_story, story
from tests.session_world import START_T, Collector, ManualSim, drive_until, manual_sim
from tests.sim_fixtures import ManualClock
from tests.test_live_verdict import _step as step_one_second

ROOT = Path(__file__).resolve().parent.parent


async def test_a_recorded_session_replays_as_the_same_events_at_the_same_times(
    tmp_path: Path,
) -> None:
    """The sim's power limit is cut at time T: the first slow tick replays at T, not before."""
    path = tmp_path / "story.sqlite"
    with manual_sim() as sim:
        seen = Collector()
        session = sim.session()
        recorder = Recorder(path, session.endpoints, clock=session.clock, flush_s=0.2)
        recorder.start()
        session.subscribe(seen)
        session.subscribe(recorder)
        async with session:
            await drive_until(sim, lambda: len(seen.of(GpuTicked)) >= 5)
            assert not any(_slowed(k) for k in seen.of(GpuTicked))
            sim.world.gpus.set_temperature(97.0, pin=True)
            await drive_until(sim, lambda: any(_slowed(k) for k in seen.of(GpuTicked)))
            await drive_until(sim, lambda: any(w.window.gen_tok_s for w in seen.of(MetricsScraped)))
        recorder.stop()
    assert recorder.error is None and recorder.rows == len(seen.events)
    with Reader(path) as reader:
        assert [r.event for r in reader.events()] == seen.events
        replay = ReplaySession(reader)
        got = Collector()
        replay.subscribe(got)
        ticks = seen.of(GpuTicked)
        drifted = next(k for k in ticks if _slowed(k))
        t_drift = drifted.tick.t
        replay.seek(t_drift - 1e-6)
        assert drifted not in got.events
        assert all(k.tick.t < t_drift for k in got.of(GpuTicked))
        replay.seek(t_drift)
        assert got.of(GpuTicked)[-1] == drifted
        assert replay.now == t_drift and reader.label(t_drift)[:4].isdigit()
        replay.seek(replay.last_t)
        assert got.events == seen.events and replay.at_end


async def test_a_recorded_drift_replays_to_the_live_verdict_explained_by_gpu_state(
    tmp_path: Path,
) -> None:
    """The demo's drift scenario recorded on the manual clock. The recording holds the session's
    verdicts, and the replay shows them as they were, when they were: no change before the drift,
    "explained by GPU state" at the moment the live session called it. Judged again from the
    recorded readings (as a recording without verdicts is), it says the same."""
    path = tmp_path / "drift.sqlite"
    clock = ManualClock(START_T)
    world, script = demo_world(gpus=4, clock=clock, scenario="drift", seed=3)
    assert script is not None
    server = SimServer(world)
    sim = ManualSim(world, server, clock, server.start())
    seen = Collector()
    session = sim.session(FakeNvml(world.gpus, clock=clock.now))
    recorder = Recorder(path, session.endpoints, clock=session.clock, flush_s=0.2)
    recorder.start()
    for subscriber in (seen, recorder):
        session.subscribe(subscriber)

    def live() -> VerdictChanged:
        return seen.of(VerdictChanged)[-1]

    try:
        session.start()
        sim.advance(world.loaded_at - clock.now())
        await drive_until(None, lambda: bool(seen.of(ServerReady)), 20)
        await drive_until(None, lambda: bool(seen.of(VerdictChanged)), 20)
        while live().state.outcome is not Outcome.GPU:
            assert clock.now() - script.change_at <= 60.0, live().state.judgement
            await step_one_second(sim, seen)
        t_called = max(e.window.t for e in seen.of(MetricsScraped))
        called = live()
    finally:
        await session.aclose()
        server.stop()
        await asyncio.sleep(0)
    recorder.stop()
    assert recorder.error is None
    with Reader(path) as reader:
        recorded = [r.event for r in reader.events() if isinstance(r.event, VerdictChanged)]
        assert recorded == seen.of(VerdictChanged) and called in recorded
        replay = ReplaySession(reader)
        assert replay.verdict is None  # shown as recorded, not judged again
        shown, replayed = Collector(), LiveVerdict()
        replay.subscribe(shown)
        replay.subscribe(replayed.feed)
        replay.seek(script.change_at - 1.0)
        before = shown.of(VerdictChanged)[-1].state
        assert before.outcome is Outcome.NO_CHANGE, before.judgement
        assert replayed.state().outcome is Outcome.NO_CHANGE, replayed.state().judgement
        replay.seek(t_called)
        assert shown.of(VerdictChanged)[-1] == called
        assert replayed.state() == called.state
        state = shown.of(VerdictChanged)[-1].state
        assert state.outcome is Outcome.GPU, state.judgement
        assert state.outcome.wording == "explained by GPU state"
        assert state.current is not None and state.current.clock_deficit is not None
        assert state.current.clock_deficit < -0.05


def _slowed(k: GpuTicked) -> bool:
    """Thermal slowdown: the clock drops to 70% of its maximum."""
    return any((s.clock_event_reasons or 0) & 0x020 for s in k.tick.samples)


def test_seeking_back_rewinds_and_replays_the_history_before(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    record_story(path)
    with Reader(path) as reader:
        replay = ReplaySession(reader)
        got = Collector()
        rewinds: list[int] = []
        replay.subscribe(got)
        replay.on_rewind(lambda: rewinds.append(len(got.events)))
        replay.seek(500.0)
        assert "REPLAY 2026-12-01" in replay.label()
        replay.seek_by(-60.0)
        assert rewinds and replay.now == 440.0
        after = got.events[rewinds[0] :]
        # The state comes back first (server, GPUs), then the history up to the new time.
        assert isinstance(after[0], ServerReady) and isinstance(after[1], GpuInventoryChanged)
        assert max(k.tick.t for k in [e for e in after if isinstance(e, GpuTicked)]) == 440.0
        replay.paused = False
        replay.speed = 60.0
        clock = iter([0.0, 1.0])
        replay.real_clock = lambda: next(clock)
        replay.advance_real()
        replay.advance_real()
        assert replay.now == 500.0


def test_a_killed_recorder_loses_at_most_its_last_batch(tmp_path: Path) -> None:
    path = tmp_path / "killed.sqlite"
    with manual_sim() as sim:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specwatch",
                "record",
                "--url",
                sim.url,
                "-o",
                str(path),
                "--interval",
                "0.1",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            committed = _wait_rows(path, 10, proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    with Reader(path) as reader:
        events = list(reader.events())
        assert len(events) >= committed and reader.stopped is None and reader.skipped == 0
        assert any(isinstance(r.event, ServerReady) for r in events)


def test_sigterm_ends_a_recording_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "term.sqlite"
    with manual_sim() as sim:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specwatch",
                "record",
                "--url",
                sim.url,
                "-o",
                str(path),
                "--interval",
                "0.1",
                "--api-key",
                SECRET,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_rows(path, 3, proc)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("specwatch record: recording") and "events in" in lines[-1]
    assert SECRET not in err
    assert SECRET.encode() not in _all_bytes(path)


def _wait_rows(path: Path, n: int, proc: subprocess.Popen[str]) -> int:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        if path.exists():
            try:
                with sqlite3.connect(path) as conn:
                    rows = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
            except sqlite3.Error:
                rows = 0
            if rows >= n:
                return rows
        time.sleep(0.05)  # polling the file for a condition, with a deadline
    raise AssertionError(f"fewer than {n} rows committed in time")


def _all_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_no_api_key_is_ever_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite"
    record_story(path)
    assert SECRET.encode() not in _all_bytes(path)
    with Reader(path) as reader:
        assert reader.url == "http://gpu-box:30000"


def test_a_newer_format_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    record_story(path, iter(list(story(5))))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='format_version'", (FORMAT_VERSION + 1,))
    with pytest.raises(RecordingError) as caught:
        Reader(path)
    text = str(caught.value)
    assert "upgrade specwatch" in text and "\n" not in text
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(RecordingError, match="not a specwatch recording"):
        Reader(tmp_path / "junk.sqlite")


def test_a_truncated_file_replays_what_it_can_and_says_where_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "cut.sqlite"
    record_story(path, iter(list(story(3000))))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) * 2 // 3])
    with Reader(path) as reader:
        events = list(reader.events())
        assert 0 < len(events) < 6002
        assert reader.stopped is not None and "damaged" in reader.stopped
        replay = ReplaySession(reader)
        assert 0 < len(replay.index) < 6002


def test_a_corrupt_row_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "bad.sqlite"
    record_story(path, iter(list(story(10))))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET data=x'00ff', z=1 WHERE id=5")
        conn.execute("UPDATE events SET kind='Nonsense\x1b[31m' WHERE id=6")
    with Reader(path) as reader:
        assert len(list(reader.events())) == 22 - 2 and reader.skipped == 2


def test_retention_trims_old_rows_but_keeps_the_state(tmp_path: Path) -> None:
    path = tmp_path / "keep.sqlite"
    rec = record_story(path, retention_s=60.0, trim_every_s=0.0)
    rec2 = Recorder(path)  # trimming again later trims nothing new
    assert rec2.trim(0.0) == 0
    with Reader(path) as reader:
        events = list(reader.events())
    ticks = [r for r in events if isinstance(r.event, GpuTicked)]
    assert ticks and min(r.t for r in ticks) >= 600 - 60 - 100  # trimmed at each flush
    assert rec.rows == 1202
    assert len(ticks) < 300
    assert isinstance(events[0].event, ServerReady)
    assert isinstance(events[1].event, GpuInventoryChanged)


def test_a_full_disk_stops_recording_in_one_line_and_keeps_what_was_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "full.sqlite"
    lines: list[str] = []
    rec = record_story(path, max_bytes=64 * 1024, on_stop=lines.append)
    assert rec.error is not None and "disk full" in rec.error and lines == [rec.error]
    with Reader(path) as reader:
        kept = list(reader.events())
    assert len(kept) == rec.rows > 0


async def test_a_full_disk_under_the_tui_is_said_on_screen(tmp_path: Path) -> None:
    """The recorder's stop travels as a session event to the app, which shows it as a notice;
    the session itself keeps running."""
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.settings import AppSettings

    path = tmp_path / "full.sqlite"
    lines: list[str] = []
    with manual_sim() as sim:
        session = sim.session()
        seen = Collector()
        session.subscribe(seen)
        # max_bytes below the new file's size: the first commit that needs a page fails.
        recorder = Recorder(
            path, session.endpoints, clock=session.clock, flush_s=0.05, max_bytes=1,
            on_stop=lines.append,
        )  # fmt: skip
        recorder.start()
        recorder.attach_to(session)
        app = SpecwatchApp(AppSettings(watch_terminal=False, redraw_s=0.1), session)
        try:
            async with app.run_test() as pilot:

                async def pause() -> None:
                    await pilot.pause(0.05)

                await drive_until(sim, lambda: bool(seen.of(RecordingStopped)), 20, pause=pause)
                await pilot.pause()
                notes = [n.message for n in app._notifications]
                ticks = len(seen.of(GpuTicked))
                await drive_until(sim, lambda: len(seen.of(GpuTicked)) > ticks, 10, pause=pause)
        finally:
            session.stop()
            recorder.stop()
    assert recorder.error is not None and "disk full" in recorder.error
    assert lines == [recorder.error]
    assert [e.reason for e in seen.of(RecordingStopped)] == [recorder.error]
    assert recorder.error in notes


def test_recording_cost_is_batched(tmp_path: Path) -> None:
    """One commit per flush, not per event: 1200 events, a handful of transactions."""
    path = tmp_path / "cost.sqlite"
    commits: list[int] = []
    record_story(path, on_commit=commits.append)
    assert commits[-1] == 1202 and len(commits) <= 13
    assert path.stat().st_size < 1202 * 400


def _export(path: Path, fmt: str, start: str | None = None, end: str | None = None) -> str:
    out = io.StringIO()
    args = argparse.Namespace(file=path, csv=fmt == "csv", json=fmt == "json", start=start, end=end)
    assert run_export(args, out=out, err=io.StringIO()) == 0
    return out.getvalue()


def test_export_is_a_tidy_time_series(tmp_path: Path) -> None:
    import csv

    path = tmp_path / "x.sqlite"
    record_story(path)
    rows = list(csv.DictReader(io.StringIO(_export(path, "csv", "-10s"))))
    assert list(rows[0]) == ["time", "source", "subject", "field", "value"]
    clocks = [r for r in rows if r["field"] == "sm_clock_mhz"]
    assert {r["subject"] for r in clocks} == {"0", "1"} and len(clocks) == 2 * 11
    assert all(r["value"] == "1600" for r in clocks)
    assert clocks[0]["time"].startswith("20") and clocks[0]["time"][-6] in "+-"
    tok = [r for r in rows if r["field"] == "gen_tok_s"]
    assert tok and tok[0]["source"] == "server" and tok[0]["subject"] == "http://gpu-box:30000"
    iso_from = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(WALL0 + 100))
    iso_to = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(WALL0 + 102))
    lines = _export(path, "json", iso_from, iso_to).splitlines()
    objs = [json.loads(line) for line in lines]
    assert {o["field"] for o in objs} >= {"sm_clock_mhz", "gen_tok_s"}
    assert len([o for o in objs if o["field"] == "gen_tok_s"]) == 3


def test_compare_takes_a_time_range_of_a_recording(tmp_path: Path) -> None:
    from specwatch.commands.compare import run_compare
    from specwatch.core.outcomes import Outcome

    path = tmp_path / "night.sqlite"
    record_story(path)  # 600 s; clocks drop from 1980 to 1600 MHz at 300 s, tok/s 90 -> 73
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(a=f"{path}@-9m/-6m", b=f"{path}@-4m/-1m", json=True, all=False)
    status = run_compare(args, stdout=out, stderr=err)
    assert status == Outcome.GPU.exit_code, err.getvalue()
    report = json.loads(out.getvalue())
    assert "night.sqlite@-9m/-6m" in json.dumps(report)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(WALL0 + 60))
    iso_end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(WALL0 + 240))
    args = argparse.Namespace(
        a=f"{path}@{iso}/{iso_end}", b=f"{path}@-2m/-0s", json=False, all=False
    )
    assert run_compare(args, stdout=io.StringIO(), stderr=err) == Outcome.GPU.exit_code
    bad = argparse.Namespace(a=f"{path}@-1m/-2m", b=f"{path}@-2m/-1m", json=False, all=False)
    assert run_compare(bad, stdout=io.StringIO(), stderr=err) == 2
    assert "ends before it starts" in err.getvalue()


def test_the_record_package_runs_without_textual() -> None:
    code = "import specwatch.commands.record, specwatch.record.compare_range\n"
    code += "import specwatch.record.export\n"
    code += (
        "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual','rich')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


async def test_the_replay_app_shows_replay_time_and_obeys_its_keys(tmp_path: Path) -> None:
    from specwatch.ui.panes.verdict import VerdictLine
    from specwatch.ui.replay_app import ReplayApp
    from specwatch.ui.settings import AppSettings
    from tests.test_ui_app import text_of

    path = tmp_path / "app.sqlite"
    record_story(path)
    with Reader(path) as reader:
        replay = ReplaySession(reader)
        settings = AppSettings(watch_terminal=False, live_cpu=False, show_overhead=False)
        app = ReplayApp(settings, replay)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("space")
            assert replay.paused
            await pilot.press("right_curly_bracket", "right_square_bracket")
            assert replay.now == replay.last_t  # clamped to the end
            await pilot.press("left_square_bracket")
            await pilot.pause()
            assert replay.now == replay.last_t - 60.0
            await pilot.press("plus", "plus")
            assert replay.speed == 5.0
            await pilot.pause(0.3)
            label = app.model.replay_label or ""
            assert label.startswith("REPLAY 2026-12-01") and "×5" in label and "paused" in label
            assert app.model.tick is not None and app.model.tick.t <= replay.now
            assert app.message_counts["gpu_tick"] > 0
            # The story's recording holds no verdicts: the replay judges it as it plays, and
            # the screen shows the clocks that sagged at 300 s as GPU state.
            assert app.model.verdict.outcome is Outcome.GPU, app.model.verdict
            assert "explained by GPU state" in text_of(app.query_one(VerdictLine))


def test_a_verdict_recorded_in_the_older_shape_decodes_with_its_reason_and_noise() -> None:
    from specwatch.record.codec import decode

    old = {
        "t": 12.0,
        "state": {
            "phase": "judged",
            "judgement": {
                "outcome": "explained by GPU state",
                "reason": "clock -8%",
                "change": -0.07,
                "noise": 0.02,
                "term": "SM clock",
            },
        },
    }
    got = decode("VerdictChanged", json.dumps(old).encode(), False)
    assert isinstance(got, VerdictChanged)
    j = got.state.judgement
    assert j is not None and j.outcome is Outcome.GPU and j.reason == "clock -8%"
    assert j.noise is not None and abs(j.noise - 0.02) < 1e-12 and j.beyond_noise


def test_the_export_carries_every_number_field_of_the_samples() -> None:
    """The field lists come from the dataclasses: a number field added to a sample is exported
    without a list to update (the numbers found here from the resolved type hints)."""
    import dataclasses
    import typing

    from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
    from specwatch.core.server import MetricsWindow
    from specwatch.record.export import _event_rows
    from specwatch.session import events as ev

    def filled(cls: Any, **fixed: Any) -> tuple[Any, set[str]]:
        hints = typing.get_type_hints(cls)
        numbers = {
            f.name: i + 2
            for i, f in enumerate(dataclasses.fields(cls))
            if f.name not in fixed and hints[f.name] in (int | None, float | None)
        }
        return cls(**fixed, **numbers), set(numbers)

    window, window_numbers = filled(MetricsWindow, t=1.0, dt=1.0)
    sample, sample_numbers = filled(GpuSample, index=0, t=1.0)
    static, static_numbers = filled(GpuStatic, index=0)
    assert {"gen_tok_s", "kv_cache_usage"} <= window_numbers and "power_w" in sample_numbers

    def fields_of(event: Any) -> set[str]:
        return {row[3] for row in _event_rows("t", "s", event)}

    assert fields_of(ev.MetricsScraped(window)) == window_numbers
    assert fields_of(ev.GpuTicked(GpuTick(1.0, 1.0, (sample,), 0.1))) == sample_numbers
    inventory = GpuInventory(available=True, gpus=(static,))
    assert fields_of(ev.GpuInventoryChanged(inventory)) == static_numbers
