"""Session events reach the app through an inbox: ticks and windows wait for the next redraw,
anything else empties the inbox at once, and the order of events is kept."""

from __future__ import annotations

import dataclasses
import threading

from textual.message import Message
from textual.notifications import Notify

from specwatch.core.gpu import GpuTick
from specwatch.core.server import MetricsWindow
from specwatch.session import events as ev
from specwatch.ui.live import Drain, EventInbox, SessionRelay
from specwatch.ui.messages import GpuTicked, MetricsScraped, ServerLost
from specwatch.ui.scene import build_scene
from tests.test_ui_app import make_app


def _tick(t: float) -> GpuTick:
    model = build_scene(seconds=10, with_bench=False)
    assert model.tick is not None
    return dataclasses.replace(model.tick, t=t)


def test_relay_holds_ticks_and_windows_and_drains_for_the_rest() -> None:
    posted: list[Message] = []
    inbox = EventInbox()
    relay = SessionRelay(posted.append, inbox=inbox)
    relay(ev.GpuTicked(_tick(1.0)))
    relay(ev.MetricsScraped(MetricsWindow(t=1.0, dt=1.0, gen_tok_s=5.0)))
    relay(ev.MetricsScraped(MetricsWindow(t=1.0, dt=1.0), server=1))  # another endpoint's
    assert posted == [] and len(inbox) == 2
    relay(ev.ServerLost(2.0, "refused"))
    assert [type(m) for m in posted] == [Drain]
    relay(ev.RecordingStopped(3.0, "disk full"))  # a notification: not ordered, posted
    assert isinstance(posted[-1], Notify)
    taken = inbox.take()
    assert [type(m) for m in taken] == [GpuTicked, MetricsScraped, ServerLost]
    assert inbox.take() == [] and len(inbox) == 0


def test_relay_without_an_inbox_posts_each_event() -> None:
    posted: list[Message] = []
    SessionRelay(posted.append)(ev.GpuTicked(_tick(1.0)))
    assert [type(m) for m in posted] == [GpuTicked]


def test_inbox_keeps_the_order_of_threads_puts() -> None:
    inbox = EventInbox()
    messages = [Drain() for _ in range(2000)]

    def put() -> None:
        for m in messages:
            inbox.put(m)

    worker = threading.Thread(target=put)
    worker.start()
    taken: list[Message] = []
    while worker.is_alive() or len(inbox):
        taken += inbox.take()
    worker.join()
    taken += inbox.take()
    assert taken == messages


async def test_app_applies_waiting_events_at_redraw_and_in_order() -> None:
    model = build_scene(seconds=30, with_bench=False)
    app = make_app(model)
    async with app.run_test(size=(100, 30)) as pilot:
        inbox = app._inbox = EventInbox()
        relay = SessionRelay(app.post_message, inbox=inbox)
        before = model.tick
        relay(ev.GpuTicked(_tick(40.0)))
        await pilot.pause()
        assert model.tick is before and app.message_counts["gpu_tick"] == 0  # waits
        app.redraw()
        assert model.tick is not None and model.tick.t == 40.0
        assert app.message_counts["gpu_tick"] == 1
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
        relay(ev.GpuTicked(_tick(41.0)))
        relay(ev.ServerLost(42.0, "connection refused"))
        relay(ev.GpuTicked(_tick(43.0)))
        await pilot.pause()
        assert order == ["tick", "lost", "tick"]
        assert app.message_counts["gpu_tick"] == 3 and app.message_counts["server_lost"] == 1
        assert model.now == 43.0 and model.connection.startswith("lost")
        assert [m.t0 for m in model.marks if m.kind == "lost"][-1] == 42.0
        # A message handled through the inbox reaches the same handler as a posted one.
        app.post_in_order(ServerLost(44.0, "again"))
        await pilot.pause()
        assert app.message_counts["server_lost"] == 2
