"""Session events reach the app through an inbox: ticks, windows and verdicts wait for the next
redraw, anything else empties the inbox at once, and the order of events is kept. The verdict
line shows the verdict the session sent; the r key marks the reference in the session."""

from __future__ import annotations

import dataclasses
import threading

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.outcomes import Outcome
from specwatch.core.server import MetricsWindow
from specwatch.session import events as ev
from specwatch.session.verdict_state import WAITING
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.model import EventInbox, MonitorModel
from specwatch.ui.panes.verdict import VerdictLine
from specwatch.ui.settings import AppSettings
from tests.scene import build_scene, scene_server, verdict_scene
from tests.test_ui_app import make_app, text_of

MAX = 1980


def _tick(t: float) -> GpuTick:
    model = build_scene(seconds=10, with_bench=False)
    assert model.tick is not None
    return dataclasses.replace(model.tick, t=t)


def test_inbox_keeps_the_order_of_threads_puts() -> None:
    inbox = EventInbox()
    events = [ev.ServerLost(float(i), "x") for i in range(2000)]

    def put() -> None:
        for e in events:
            inbox.put(e)

    worker = threading.Thread(target=put)
    worker.start()
    taken: list[object] = []
    while worker.is_alive() or len(inbox):
        taken += inbox.take()
    worker.join()
    taken += inbox.take()
    assert taken == events


async def test_app_applies_waiting_events_at_redraw_and_in_order() -> None:
    model = build_scene(seconds=30, with_bench=False)
    app = make_app(model)
    async with app.run_test(size=(100, 30)) as pilot:
        before = model.tick
        app.receive(ev.GpuTicked(_tick(40.0)))
        app.receive(ev.MetricsScraped(MetricsWindow(t=40.0, dt=1.0, gen_tok_s=5.0)))
        app.receive(ev.VerdictChanged(40.0, WAITING))
        app.receive(ev.MetricsScraped(MetricsWindow(t=40.0, dt=1.0), server=1))  # not shown
        await pilot.pause()
        assert model.tick is before and app.message_counts["gpu_tick"] == 0  # waits
        app.redraw()
        assert model.tick is not None and model.tick.t == 40.0
        assert app.message_counts["gpu_tick"] == 1 and app.message_counts["metrics"] == 1
        assert app.message_counts["verdict"] == 1 and model.verdict is WAITING
        # An urgent event arrives behind a tick: both are applied at once, the tick first.
        order: list[str] = []
        add_tick, set_lost = model.add_tick, model.set_lost

        def tick_in(tick: GpuTick) -> None:
            order.append("tick")
            add_tick(tick)

        def lost_in(t: float, reason: str) -> None:
            order.append("lost")
            set_lost(t, reason)

        model.add_tick = tick_in  # type: ignore[method-assign]
        model.set_lost = lost_in  # type: ignore[method-assign]
        app.receive(ev.GpuTicked(_tick(41.0)))
        app.receive(ev.ServerLost(42.0, "connection refused"))
        app.receive(ev.GpuTicked(_tick(43.0)))
        await pilot.pause()
        assert order == ["tick", "lost", "tick"]
        assert app.message_counts["gpu_tick"] == 3 and app.message_counts["server_lost"] == 1
        assert model.now == 43.0 and model.connection.startswith("lost")
        assert [m.t0 for m in model.marks if m.kind == "lost"][-1] == 42.0
        # A callback put in order runs behind the events waiting before it.
        app.receive(ev.GpuTicked(_tick(44.0)))
        app.in_order(lambda: order.append("callback"))
        await pilot.pause()
        assert order[-2:] == ["tick", "callback"]


async def test_a_recording_that_stopped_is_shown() -> None:
    app = make_app()
    async with app.run_test() as pilot:
        app.receive(ev.RecordingStopped(3.0, "recording stopped: disk full"))
        await pilot.pause()
        assert any("disk full" in n.message for n in app._notifications)


async def test_the_verdict_line_shows_the_verdict_the_session_sent() -> None:
    app = make_app(MonitorModel())
    async with app.run_test(size=(160, 30)) as pilot:
        app.receive(ev.VerdictChanged(60.0, verdict_scene("gpu").state()))
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert app.message_counts["verdict"] == 1
        assert "explained by GPU state" in text_of(app.query_one(VerdictLine))


async def test_r_marks_the_reference_in_the_session_and_the_screen_follows() -> None:
    from specwatch.session import LiveSession, NoGpus

    session = LiveSession([], NoGpus("none"))
    app = SpecwatchApp(AppSettings(watch_terminal=False, live_cpu=False), session)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        # Readings as the session's sources would emit them: steady, then 10% slower at 90% of
        # the clock.
        session.emit(ev.GpuInventoryChanged(_inventory()))
        session.emit(ev.ServerReady(0.0, scene_server()))
        for i in range(1, 80):
            slow = i > 40
            t = float(i)
            session.emit(ev.GpuTicked(_busy_tick(t, round(MAX * 0.9) if slow else MAX)))
            tok_s = (720.0 if slow else 800.0) + (-1.0) ** i * 3.0
            window = MetricsWindow(t=t, dt=1.0, gen_tok_s=tok_s, requests_running=3.0)
            session.emit(ev.MetricsScraped(window))
        app.redraw()
        assert app.model.verdict.outcome is Outcome.GPU, app.model.verdict
        await pilot.press("r")
        await pilot.pause()
        app.redraw()
        state = app.model.verdict
        assert state.reference is not None and state.reference.kind == "marked"
        assert state.outcome is Outcome.NO_CHANGE
        assert any("reference" in n.message for n in app._notifications)


def _inventory() -> GpuInventory:
    return GpuInventory(True, gpus=tuple(GpuStatic(i, max_sm_clock_mhz=MAX) for i in range(2)))


def _busy_tick(t: float, clock: int) -> GpuTick:
    samples = tuple(GpuSample(i, t, sm_clock_mhz=clock, util_gpu_pct=100) for i in range(2))
    return GpuTick(t, t, samples, 0.1)
