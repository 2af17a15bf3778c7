"""A recorded window whose percentile lies in a histogram's overflow bucket replays as it was."""

from __future__ import annotations

import math

import pytest

from specwatch.core.server import LatencyBucket, MetricsWindow
from specwatch.record.codec import decode, encode
from specwatch.session.events import MetricsScraped
from specwatch.ui.model import check_window
from specwatch.ui.panes.load import bucket_words, context_words


def _window() -> MetricsWindow:
    overflow = LatencyBucket(0.99, 60.0, math.inf)  # p99 past the last bound: "> 60 s"
    return MetricsWindow(
        t=10.0,
        dt=1.0,
        latency_buckets={"e2e": (LatencyBucket(0.5, 20.0, 40.0), overflow)},
        largest_context=LatencyBucket(1.0, 8192.0, math.inf),
    )


def test_an_overflow_bucket_replays_unbounded_and_is_drawn() -> None:
    event = MetricsScraped(window=_window())
    back = decode(*encode(event))
    assert isinstance(back, MetricsScraped)
    w = back.window
    assert w.latency_buckets["e2e"][1] == LatencyBucket(0.99, 60.0, math.inf)
    assert w.largest_context == LatencyBucket(1.0, 8192.0, math.inf)
    check_window(w)  # not refused as a bad sample
    assert bucket_words(w.latency_buckets["e2e"][1]) == "> 60 s"
    assert context_words(w.largest_context) == "> 8192"


def test_a_bucket_that_is_not_one_is_refused() -> None:
    for bad in (
        LatencyBucket(0.5, 40.0, 20.0),  # upside down
        LatencyBucket(0.5, -1.0, 20.0),
        LatencyBucket(1.5, 0.0, 20.0),  # not a quantile
        LatencyBucket(0.5, math.nan, 20.0),
    ):
        w = MetricsWindow(t=1.0, dt=1.0, latency_buckets={"ttft": (bad,)})
        with pytest.raises(ValueError, match="latency_buckets"):
            check_window(w)
