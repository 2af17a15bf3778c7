"""Issue 21, item 12: a step-latency percentile interpolated inside a histogram bucket read
``step 13.9ms p50≈17.6`` (the median above the mean it cannot contradict); the verify pane
shows the bucket it falls in, as the load pane does."""

from __future__ import annotations

from rich.style import Style

from specwatch.core.server import MetricsWindow
from specwatch.sources.dialects.base import WindowBuilder, set_latency_quantiles
from specwatch.sources.metrics.prom import Histogram
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.verify import verify_text
from tests.scene import scene_server

TONES = {k: Style() for k in ("label", "value", "dim", "good", "bad")}
# 100 steps, 60 of them just over 10 ms: mean 13.9 ms, PromQL's p50 ≈ 22.5 ms.
BUCKETS = ((0.01, 0.0), (0.025, 60.0), (0.05, 100.0), (float("inf"), 100.0))
HIST = Histogram(sum=1.39, count=100.0, buckets=BUCKETS)


def _window() -> MetricsWindow:
    b = WindowBuilder()
    b.set("step_latency_s", HIST.mean, "test")
    set_latency_quantiles(b, HIST, "vllm:inter_token_latency_seconds")
    return MetricsWindow(t=2.0, dt=1.0, gen_tok_s=500.0, accept_length=2.0, **b.values)


def test_the_interpolated_median_would_contradict_the_mean() -> None:
    w = _window()
    assert w.step_latency_s is not None and w.step_latency_p50_s is not None
    assert w.step_latency_p50_s > w.step_latency_s  # why points are not shown


def test_the_verify_pane_shows_the_bucket_not_the_point() -> None:
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.add_window(_window())
    first = verify_text(model, TONES).plain.splitlines()[0]
    assert first.startswith("step 13.9 ms"), first
    assert "p50 10–25 ms" in first and "p90 25–50 ms" in first, first
    assert "≈" not in first, first
