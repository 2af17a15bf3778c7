"""Issue 21, items 7 and 8: GPU rows do not blink to idle for one sample between batches, and the
graph's scales hold still (clk% fixed at 0–100, a tok/s axis that only grows)."""

from __future__ import annotations

from specwatch.core import gpu as rules
from specwatch.core.gpu import IDLE_BIT, GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.server import MetricsWindow
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpus import GpusPane
from specwatch.ui.panes.token_rate import CLOCK_RANGE, TokenRatePane, graph_for
from tests.test_ui_app import make_app, text_of

MAX = 1980


def _busy(i: int, t: float) -> GpuSample:
    return GpuSample(i, t, sm_clock_mhz=MAX, clock_event_reasons=0, util_gpu_pct=97, pstate=0)


def _idle(i: int, t: float) -> GpuSample:
    return GpuSample(i, t, sm_clock_mhz=345, clock_event_reasons=IDLE_BIT, util_gpu_pct=0, pstate=8)


def _model() -> MonitorModel:
    m = MonitorModel()
    m.set_inventory(
        GpuInventory(True, gpus=tuple(GpuStatic(i, max_sm_clock_mhz=MAX) for i in range(2)))
    )
    return m


def _tick(t: float, idle: bool) -> GpuTick:
    make = _idle if idle else _busy
    return GpuTick(t, t, tuple(make(i, t) for i in range(2)), 0.1)


def test_one_idle_sample_after_a_busy_one_is_held() -> None:
    assert rules.held_busy(_idle(0, 2.0), _busy(0, 1.0)) == _busy(0, 1.0)
    long_idle = _idle(0, 1.0 + rules.BUSY_HOLD_S)
    assert rules.held_busy(long_idle, _busy(0, 1.0)) == long_idle
    lost = GpuSample(0, 2.0, lost=True)
    assert rules.held_busy(lost, _busy(0, 1.0)) == lost
    assert rules.held_busy(_idle(0, 2.0), None) == _idle(0, 2.0)


def test_the_model_shows_no_blink_and_the_clock_band_no_notch() -> None:
    m = _model()
    for t in range(1, 30):
        m.add_tick(_tick(float(t), idle=t % 7 == 0))  # one idle sample between batches
    assert m.tick is not None and all(rules.sample_busy(s) for s in m.tick.samples)
    assert min(v for _, v in m.clock_pct.after(0.0) if v is not None) == 100.0
    for t in range(30, 36):  # really idle: shown once it has lasted BUSY_HOLD_S
        m.add_tick(_tick(float(t), idle=True))
    assert m.tick is not None and not any(rules.sample_busy(s) for s in m.tick.samples)


async def test_a_gpu_row_does_not_blink_to_idle_under_load() -> None:
    m = _model()
    app = make_app(m)
    async with app.run_test(size=(160, 40)) as pilot:
        for t in range(1, 6):
            app.model.add_tick(_tick(float(t), idle=False))
        app.model.add_tick(_tick(6.0, idle=True))
        app.redraw()
        await pilot.pause()
        text = text_of(app.query_one(GpusPane))
        assert "idle" not in text and "P8" not in text and " 345 " not in text, text


def test_the_clock_band_has_one_scale_in_every_window() -> None:
    m = _model()
    for t in range(1, 400):
        m.add_tick(_tick(float(t), idle=False))
        m.add_window(MetricsWindow(t=float(t), dt=1.0, gen_tok_s=700.0))
    assert CLOCK_RANGE == (0.0, 100.0)
    for window in ("1m", "5m", "1h"):
        lines = graph_for(m, window, 100, 8).lines(100)
        clk = "".join(s.text for s in next(ln for ln in lines if ln[0].text.startswith("clk%")))
        assert "0–100" in clk, clk


async def test_the_tok_s_axis_does_not_rescale_on_a_window_change() -> None:
    m = _model()
    for t in range(1, 400):
        # a burst to 1100 long ago, then 600: the 1 min window alone would ask for 600
        m.add_window(MetricsWindow(t=float(t), dt=1.0, gen_tok_s=1100.0 if t < 60 else 600.0))
    app = make_app(m)
    async with app.run_test(size=(120, 40)) as pilot:
        rate = app.query_one(TokenRatePane)
        rate.window = "15m"
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        top = rate.axis.top
        rate.window = "1m"
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        assert top is not None and rate.axis.top == top
