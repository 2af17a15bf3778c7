"""Session events reach the app through an inbox: ticks, windows and verdicts wait for the next
redraw, anything else empties the inbox at once, and the order of events is kept."""

from __future__ import annotations

import dataclasses
import threading

from specwatch.core.gpu import GpuTick
from specwatch.core.server import MetricsWindow
from specwatch.session import events as ev
from specwatch.session.live_verdict import WAITING
from specwatch.ui.scene import build_scene
from specwatch.ui.session_events import EventInbox
from tests.test_ui_app import make_app


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
