"""The simulated SGLang with data-parallel ranks and priority scheduling, read by the watch
(issue 22): the shapes of ``tests/test_sglang_ranks.py``, written by the simulator."""

from __future__ import annotations

import pytest

from specwatch.sources.detect import detect
from specwatch.sources.watcher import MetricsWatcher
from tests.conftest import running_sim


@pytest.mark.parametrize("version", ["0.5.23", "0.5.9"])
@pytest.mark.parametrize("dp", [2, 8])
async def test_windowed_step_latency_with_dp_ranks_is_the_pass_time(version: str, dp: int) -> None:
    with running_sim(
        "sglang",
        version,
        dp_engines=dp,
        background_concurrency=3 * dp,
        background_think_s=(0.0, 0.001),
        seed=7,
    ) as sim:
        async with sim.client() as client:
            info = await detect(client)
            watcher = MetricsWatcher(client, info, clock=sim.clock.now)
            sim.advance(5.0)
            await watcher.scrape()
            for _ in range(4):
                t0 = sim.clock.now()
                t1 = sim.advance(5.0)
                w = await watcher.scrape()
                truth = sim.world.truth.window(t0, t1)
                assert truth.mean_step_latency_s is not None
                assert w.step_latency_s == pytest.approx(truth.mean_step_latency_s, rel=0.02), (
                    w.sources.get("step_latency_s")
                )
                assert w.requests_running == pytest.approx(3 * dp, abs=dp)
                assert w.kv_cache_usage is not None and 0.0 <= w.kv_cache_usage <= 1.0


async def test_priority_scheduling_running_is_the_total() -> None:
    with running_sim(
        "sglang", "0.5.23", priority_scheduling=True, background_concurrency=4, seed=2
    ) as sim:
        async with sim.client() as client:
            text = (await client.get("/metrics")).text
            info = await detect(client)
            watcher = MetricsWatcher(client, info, clock=sim.clock.now)
            sim.advance(3.0)
            w = await watcher.scrape()
            running = len(sim.world.engine.running)
            written = sum(sim.world.telemetry.running_written)
    assert 'priority=""' in text
    sim2 = [line for line in text.splitlines() if 'priority="0"' in line]
    assert any(line.startswith("sglang:num_running_reqs") for line in sim2)
    # the total once, not again with the breakdown: the count SGLang last wrote (it lags a
    # prefill until the next 40-pass tick, issue 22 item 7)
    assert w.requests_running == written and 0 < written <= running
