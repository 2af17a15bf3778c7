"""Issue 21, items 3–5: the verdict line shows the noise it judged against, says which GPU figure
is a window mean, and never tells the reader to look at code it has just called the same."""

from __future__ import annotations

import re

from specwatch.bench.report import comparison_lines
from specwatch.core.compare import compare
from specwatch.core.outcomes import CODE_SAME_CODE_WORDING, Outcome
from specwatch.session import events as ev
from specwatch.session.verdict_report import verdict_json
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.verdict import VerdictLine, verdict_parts
from tests.scene import verdict_scene
from tests.test_compare import STORY_AFTER, STORY_BEFORE, snap_dict
from tests.test_compare_identity import COMMIT_B, identity, with_identity
from tests.test_ui_app import make_app, text_of


def test_no_significant_change_shows_the_noise_beside_it() -> None:
    state = verdict_scene("no-change").state()
    assert state.outcome is Outcome.NO_CHANGE
    head = verdict_parts(state)[0][1]
    assert re.search(r"no significant change \(±\d+%\)", head), head
    assert verdict_json(state)["noise"] is not None


async def test_the_line_on_screen_carries_the_noise() -> None:
    app = make_app(MonitorModel())
    async with app.run_test(size=(160, 30)) as pilot:
        app.receive(ev.VerdictChanged(60.0, verdict_scene("no-change").state()))
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert re.search(r"no significant change \(±\d+%\)", text_of(app.query_one(VerdictLine)))


def test_the_verdicts_gpu_figure_says_it_is_a_window_mean() -> None:
    parts = [text for _, text, _ in verdict_parts(verdict_scene("gpu").state())]
    clock = next(p for p in parts if p.startswith("slowest GPU"))
    assert "of max over 30 s" in clock, clock


def test_same_code_and_a_code_verdict_names_what_is_left() -> None:
    a = with_identity(snap_dict(STORY_BEFORE, clocks=(1980.0, 1965.0)), identity())
    b = with_identity(snap_dict(STORY_AFTER, clocks=(1980.0, 1965.0)), identity())
    c = compare(a, b)
    assert c.verdict is Outcome.CODE and c.code_summary == "same code and libraries"
    assert c.wording == CODE_SAME_CODE_WORDING
    text = "\n".join(comparison_lines(c, a, b))
    assert f"Verdict: {CODE_SAME_CODE_WORDING}" in text
    assert "look at code" not in text


def test_different_code_still_says_look_at_code() -> None:
    a = with_identity(snap_dict(STORY_BEFORE, clocks=(1980.0, 1965.0)), identity())
    b = with_identity(snap_dict(STORY_AFTER, clocks=(1980.0, 1965.0)), identity(COMMIT_B))
    c = compare(a, b)
    assert c.verdict is Outcome.CODE and c.wording == Outcome.CODE.wording
