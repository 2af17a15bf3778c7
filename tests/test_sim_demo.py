"""The demo: seeded, loads in about three seconds, cold GPUs that warm up under traffic."""

from __future__ import annotations

import httpx

from specwatch.sim.demo import start_demo
from tests.sim_fixtures import ManualClock
from tests.sim_testing import metric_value


def test_demo_loads_then_serves_background_traffic_and_warms_up() -> None:
    clock = ManualClock()
    demo = start_demo("sglang", seed=1, gpus=4, clock=clock)
    try:
        cfg = demo.world.config
        assert cfg.spec_algorithm == "EAGLE3" and cfg.background_concurrency > 0
        assert 2.0 <= cfg.load_time_s <= 5.0 and cfg.warmup_requests > 0
        assert len(demo.world.gpus) == 4
        try:
            httpx.get(demo.url + "/v1/models")
            raise AssertionError("expected a refused connection while loading")
        except httpx.ConnectError:
            pass
        cold = demo.world.gpus.states()[0].temp_c
        clock.set(cfg.load_time_s)
        assert demo.server.wait_listening(5)
        clock.set(60.0)
        a = metric_value(httpx.get(demo.url + "/metrics").text, "sglang:realtime_tokens_total",
                         mode="decode")  # fmt: skip
        assert a is not None and a > 0
        clock.set(900.0)
        demo.world.advance_to(900.0)
        assert demo.world.gpus.states()[0].temp_c > cold + 20
        early = demo.world.truth.window(30, 90)
        late = demo.world.truth.window(840, 900)
        assert early.mean_step_latency_s is not None and late.mean_step_latency_s is not None
        assert late.mean_step_latency_s > early.mean_step_latency_s
    finally:
        demo.stop()


def test_demo_is_seeded() -> None:
    windows = []
    for _ in range(2):
        clock = ManualClock()
        demo = start_demo("vllm", seed=5, gpus=2, clock=clock)
        try:
            clock.set(30.0)
            demo.world.advance_to(30.0)
            windows.append(demo.world.truth.window(0, 30))
        finally:
            demo.stop()
    assert windows[0] == windows[1]


def test_the_demo_scenario_option_offers_every_scenario() -> None:
    """``--demo-scenario``'s choices are spelled out beside the light ``--help`` (no simulator
    import); they must stay the simulator's scenarios."""
    import argparse

    from specwatch.commands.arguments import add_source_arguments
    from specwatch.sim.demo import SCENARIOS

    parser = argparse.ArgumentParser()
    add_source_arguments(parser)
    for scenario in SCENARIOS:
        assert parser.parse_args(["--demo-scenario", scenario]).demo_scenario == scenario
    assert "{" + ",".join(SCENARIOS) + "}" in parser.format_help()
