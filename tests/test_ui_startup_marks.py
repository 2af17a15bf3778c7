"""Issue 21, item 9: a server that comes up within a few seconds of the monitor (the demo's own
start-up) is not drawn as an outage; a longer refusal is, from its first refusal; the help's
mark list names "down"."""

from __future__ import annotations

from specwatch.session import events as ev
from specwatch.ui.help_text import GRAPH_MARKS
from specwatch.ui.model import DOWN_MARK_S, MonitorModel
from specwatch.ui.panes.token_rate import TokenRatePane
from tests.scene import scene_server
from tests.test_ui_app import make_app, text_of


async def test_the_demos_start_up_is_no_down_mark() -> None:
    app = make_app(MonitorModel())
    async with app.run_test(size=(120, 40)) as pilot:
        # the demo: the monitor polls while its simulated server binds (4 refusals in 3 s)
        for attempt, t in enumerate((0.1, 1.0, 2.0, 3.1), start=1):
            app.receive(ev.ServerWaiting(t, "refused", attempt, t - 0.1, "connection refused"))
        app.receive(ev.ServerReady(3.2, scene_server()))
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert not [m for m in app.model.marks if m.kind == "down"]
        assert "down" not in text_of(app.query_one(TokenRatePane))


def test_a_long_refusal_is_a_down_mark_from_its_start() -> None:
    m = MonitorModel()
    m.set_waiting(10.0, "refused", 1, 0.0, "")
    m.set_waiting(10.0 + DOWN_MARK_S, "refused", 6, DOWN_MARK_S, "")
    (mark,) = m.marks
    assert (mark.kind, mark.t0, mark.label) == ("down", 10.0, f"down #6 {DOWN_MARK_S:.0f}s")


def test_down_is_in_the_helps_mark_list() -> None:
    assert any("down" in key for key, _ in GRAPH_MARKS)
