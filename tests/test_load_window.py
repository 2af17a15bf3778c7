"""The server-load fields of a metrics window: against the simulator, and the bucket rule."""

from __future__ import annotations

import math

import pytest

from specwatch.sources.dialects.base import bucket_of
from specwatch.sources.metrics.prom import Histogram
from tests.conftest import running_sim
from tests.test_metrics_sim import _passive


def test_a_percentile_is_the_bucket_it_falls_in_never_a_point() -> None:
    hist = Histogram(
        sum=3.0, count=10, buckets=((0.02, 1.0), (0.04, 6.0), (0.08, 9.0), (math.inf, 10.0))
    )
    p50, p90, p99 = (bucket_of(hist, q) for q in (0.5, 0.9, 0.99))
    assert p50 is not None and (p50.low, p50.high) == (0.02, 0.04)
    assert p90 is not None and (p90.low, p90.high) == (0.04, 0.08)
    assert p99 is not None and p99.low == 0.08 and math.isinf(p99.high)
    first = bucket_of(Histogram(1.0, 4, ((0.02, 4.0), (math.inf, 4.0))), 0.5)
    assert first is not None and (first.low, first.high) == (0.0, 0.02)
    assert bucket_of(Histogram(0.0, 0, ((0.02, 0.0), (math.inf, 0.0))), 0.5) is None


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
async def test_load_fields_from_the_simulator(dialect: str) -> None:
    with running_sim(dialect, None, background_concurrency=6, seed=3) as sim:
        async with sim.client() as client:
            w, _, _ = await _passive(sim, client, warm_s=5.0, window_s=20.0)
    assert w.prompt_tok_s is not None and w.prompt_tok_s > 0
    assert w.kv_cache_usage is not None and 0.0 <= w.kv_cache_usage <= 1.0
    assert w.requests_per_s is not None and w.requests_per_s > 0
    assert set(w.latency_buckets) >= {"ttft", "e2e"}
    for buckets in w.latency_buckets.values():
        assert [b.q for b in buckets] == [0.5, 0.9, 0.99]
        assert all(b.low < b.high for b in buckets)
        lows = [b.low for b in buckets]
        assert lows == sorted(lows)
    assert "prompt_tokens_total" in w.sources["prompt_tok_s"]
