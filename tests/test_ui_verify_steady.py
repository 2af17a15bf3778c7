"""Issue 21, item 6: the verify pane's figures hold still (a window mean, held with its age)
instead of blanking whenever a one-second window had no finished verify step."""

from __future__ import annotations

from rich.style import Style

from specwatch.core.server import MetricsWindow
from specwatch.core.window_mean import STEADY_S, SteadyMean
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.verify import VerifyPane, verify_text
from tests.scene import scene_server
from tests.test_ui_app import make_app

TONES = {k: Style() for k in ("label", "value", "dim", "good", "bad")}


def test_steady_mean_averages_holds_then_forgets() -> None:
    m = SteadyMean()
    for t, v in ((1.0, 0.0128), (2.0, None), (3.0, 0.0146), (4.0, None)):
        m.add(t, 1.0, v)
    now = m.at(4.0)
    assert now.value is not None and abs(now.value - 0.0137) < 1e-9 and now.age_s is None
    held = m.at(3.0 + STEADY_S + 1)
    assert held.value == now.value and held.age_s == STEADY_S + 1
    assert m.at(1000.0).value is None


def _sglang_like(t: int) -> MetricsWindow:
    # SGLang's spec counters move when a request ends: every other window has no verify step,
    # and the step figure alternates 12.8 / 14.6 ms.
    finished = t % 2 == 0
    return MetricsWindow(
        t=float(t),
        dt=1.0,
        gen_tok_s=500.0,
        accept_length=2.55 if finished else None,
        step_latency_s=(0.0128 if t % 4 == 0 else 0.0146) if finished else None,
    )


def test_tok_step_never_blanks_between_verify_steps() -> None:
    model = MonitorModel(baseline_ms=12.0, baseline_source="--baseline-itl")
    model.set_ready(0.0, scene_server())
    shown: set[str] = set()
    steps: list[float] = []
    for t in range(1, 61):
        model.add_window(_sglang_like(t))
        if t < STEADY_S:
            continue
        lines = verify_text(model, TONES).plain.splitlines()
        shown.add(lines[1].split("  ")[0])
        steps.append(float(lines[0].split()[1]))
    assert shown == {"tok/step 2.55"}, shown
    # 12.8 <-> 14.6 ms per window; averaged, within half a millisecond of the true 13.7
    assert max(steps) - min(steps) <= 0.5 and abs(sum(steps) / len(steps) - 13.7) < 0.1, steps


def test_tok_step_counts_the_steps_that_drafted_nothing() -> None:
    # 2 in 5 steps drafted nothing: 3.5 tokens per drafted step, 2.5 per step paid for
    model = MonitorModel(baseline_ms=12.0, baseline_source="--baseline-itl")
    model.set_ready(0.0, scene_server())
    for t in range(1, 12):
        model.add_window(
            MetricsWindow(
                t=float(t),
                dt=1.0,
                accept_length=3.5,
                tokens_per_step=2.5,
                step_latency_s=0.015,
                decode_steps=50.0,
                spec_drafts=30.0,
            )
        )
    lines = verify_text(model, TONES).plain.splitlines()
    assert lines[1] == "tok/step 2.50  effective 6.0 ms/tok", lines
    assert "break-even 1.25" in lines[2], lines
    assert "speculation gains 100%" in lines[3], lines


async def test_the_pane_says_its_figures_are_a_window_mean() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert f"{STEADY_S:.0f} s mean" in str(app.query_one(VerifyPane).border_title)
