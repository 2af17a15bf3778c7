"""The simulated engine: determinism, token and acceptance math, thermal coupling, warmup."""

from __future__ import annotations

import math

import pytest

from specwatch.sim.config import SimConfig
from specwatch.sim.gpus import SimGpus
from specwatch.sim.metrics.vllm_metrics import VllmTelemetry
from specwatch.sim.presets import preset
from specwatch.sim.world import SimWorld
from tests.sim_fixtures import ManualClock


def _run(config: SimConfig, until: float, requests: int = 3, max_tokens: int = 300) -> SimWorld:
    clock = ManualClock()
    world = SimWorld(config, clock=clock)
    for i in range(requests):
        clock.set(i * 0.5)
        world.submit(50 + i, max_tokens)
    clock.set(until)
    world.advance_to(until)
    return world


def test_same_seed_and_clock_give_the_same_truth() -> None:
    cfg = preset("sglang", background_concurrency=3, seed=7)
    a = _run(cfg, 20.0)
    b = _run(cfg, 20.0)
    assert a.truth.requests() == b.truth.requests()
    assert a.truth.steps() == b.truth.steps()
    assert a.truth.window(0, 20) == b.truth.window(0, 20)


def test_another_seed_gives_other_draws() -> None:
    a = _run(preset("vllm", seed=1), 20.0)
    b = _run(preset("vllm", seed=2), 20.0)
    assert [r.accepted_drafts for r in a.truth.requests()] != [
        r.accepted_drafts for r in b.truth.requests()
    ]


def test_requests_get_exactly_max_tokens_with_ignore_eos() -> None:
    world = _run(preset("vllm"), 30.0, requests=4, max_tokens=257)
    reqs = world.truth.requests()
    assert len(reqs) == 4
    for r in reqs:
        assert r.completion_tokens == 257
        # the first token comes from prefill; every decode step adds 1 + accepted drafts,
        # except the last, cut by max_tokens: vLLM counts its accepted drafts in full
        cut = 1 + r.steps + r.accepted_drafts - r.completion_tokens
        assert 0 <= cut <= 3
        assert r.proposed_drafts == 3 * r.steps
        assert len(r.step_latencies_s) == r.steps
        assert r.finish_reason == "length"


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
def test_only_vllm_counts_the_cut_last_step_in_full(dialect: str) -> None:
    # Acceptance certain: every step accepts all its drafts; max_tokens cuts the last one.
    cfg = preset(dialect, acceptance=(1.0, 1.0, 1.0), warmup_requests=0, seed=3)
    k = cfg.max_accepted
    world = _run(cfg, 30.0, requests=1, max_tokens=1 + 2 * (k + 1) + 1)
    (r,) = world.truth.requests()
    assert r.completion_tokens == 1 + 2 * (k + 1) + 1 and r.steps == 3
    emitted = r.completion_tokens - 1 - r.steps  # drafts that reached the stream
    counted_extra = k if dialect == "vllm" else 0
    assert r.accepted_drafts == emitted + counted_extra
    assert world.truth.window(0, 30).accept_length == pytest.approx(1 + r.accepted_drafts / 3)


def test_acceptance_matches_the_configured_chain_statistically() -> None:
    acc = (0.8, 0.6, 0.45)
    cfg = preset("vllm", acceptance=acc, warmup_requests=0)
    world = _run(cfg, 200.0, requests=4, max_tokens=4000)
    reqs = world.truth.requests()
    steps = sum(r.steps for r in reqs)
    per_pos = [sum(r.accepted_per_position[i] for r in reqs) / steps for i in range(3)]
    expected = [acc[0], acc[0] * acc[1], acc[0] * acc[1] * acc[2]]
    for got, want in zip(per_pos, expected, strict=True):
        assert got == pytest.approx(want, abs=0.02)
    window = world.truth.window(0, 200)
    assert window.accept_length == pytest.approx(1 + sum(expected), abs=0.03)
    assert window.acceptance_rate == pytest.approx(sum(expected) / 3, abs=0.01)


def test_window_totals_equal_the_recorded_requests() -> None:
    world = _run(preset("sglang", warmup_requests=0), 60.0, requests=3, max_tokens=500)
    w = world.truth.window(-1, 60)
    reqs = world.truth.requests()
    assert w.tokens == sum(r.completion_tokens for r in reqs)
    assert w.accepted_drafts == sum(r.accepted_drafts for r in reqs)
    assert w.proposed_drafts == sum(r.proposed_drafts for r in reqs)
    assert w.request_steps == sum(r.steps for r in reqs)
    # sglang: num_draft_tokens counts the root, so 3 drafts per step
    assert all(r.proposed_drafts == 3 * r.steps for r in reqs)


def test_step_latency_follows_config_batch_and_pace() -> None:
    cfg = preset("vllm", base_step_ms=10.0, batch_step_ms=1.0, prefill_ms=20.0, warmup_requests=0)
    clock = ManualClock()
    gpus = SimGpus(count=2, seed=0)
    gpus.set_power_limit(10_000.0)  # no power cap: full boost while cold
    world = SimWorld(cfg, clock=clock, gpus=gpus)
    world.submit(10, 50)
    world.submit(10, 50)
    clock.set(5.0)
    world.advance_to(5.0)
    steps = world.truth.steps()
    # the first request starts a prefill step at once; the second joins the next step,
    # which decodes the first and prefills the second (a mixed step)
    assert (steps[0].prefill_requests, steps[0].decode_requests) == (1, 0)
    assert steps[0].latency_s == pytest.approx(0.020)
    assert (steps[1].prefill_requests, steps[1].decode_requests) == (1, 1)
    assert steps[1].latency_s == pytest.approx(0.030)
    assert (steps[2].prefill_requests, steps[2].decode_requests) == (0, 2)
    assert steps[2].latency_s == pytest.approx(0.011)
    first, second = world.truth.requests()[:2]
    assert first.ttft_s == pytest.approx(0.020)
    assert second.ttft_s == pytest.approx(0.050)
    assert first.step_latencies_s[:2] == pytest.approx((0.030, 0.011))


def test_no_speculation_gives_one_token_per_step() -> None:
    cfg = preset("vllm", spec_algorithm=None, plain_step_ms=5.0, warmup_requests=0)
    world = _run(cfg, 20.0, requests=1, max_tokens=100)
    r = world.truth.requests()[0]
    assert r.steps == 99 and r.accepted_drafts == 0 and r.proposed_drafts == 0
    w = world.truth.window(-1, 20)
    assert w.accept_length is None and w.acceptance_rate is None


def test_hot_throttled_gpus_make_steps_slower() -> None:
    cfg = preset("vllm", warmup_requests=0)

    def mean_latency(gpus: SimGpus) -> float:
        clock = ManualClock()
        world = SimWorld(cfg, clock=clock, gpus=gpus)
        world.submit(10, 400)
        clock.set(30.0)
        world.advance_to(30.0)
        lat = world.truth.requests()[0].step_latencies_s
        return sum(lat) / len(lat)

    cold = SimGpus(count=4, seed=0)
    hot = SimGpus(count=4, seed=0)
    hot.set_temperature(88.0, pin=True)
    cold_ms, hot_ms = mean_latency(cold), mean_latency(hot)
    assert hot_ms > cold_ms * 1.3
    hot.advance_to(30.0, load=1.0)
    assert all(s.reasons & 0x020 for s in hot.states())  # thermal slowdown under load


def test_gpus_warm_up_under_load_and_tok_s_drifts_down() -> None:
    cfg = preset("sglang", background_concurrency=4, warmup_requests=0)
    clock = ManualClock()
    world = SimWorld(cfg, clock=clock)
    t0 = world.gpus.states()[0].temp_c
    clock.set(600.0)
    world.advance_to(600.0)
    assert world.gpus.states()[0].temp_c > t0 + 20
    early = world.truth.window(0, 60).mean_step_latency_s
    late = world.truth.window(540, 600).mean_step_latency_s
    assert early is not None and late is not None
    assert late > early * 1.05


def test_first_requests_are_slower_warmup() -> None:
    cfg = preset("vllm", warmup_requests=1, warmup_factor=3.0, batch_step_ms=0.0)
    world = _run(cfg, 30.0, requests=2, max_tokens=100)
    first, second = world.truth.requests()
    # the second overlaps the first for a while; compare steps after the first finished
    assert first.step_latencies_s[0] == pytest.approx(3 * second.step_latencies_s[-1], rel=0.02)


def test_background_traffic_counts_in_window_but_not_in_requests() -> None:
    cfg = preset("vllm", background_concurrency=3)
    clock = ManualClock()
    world = SimWorld(cfg, clock=clock)
    clock.set(30.0)
    world.advance_to(30.0)
    assert world.truth.requests() == []
    w = world.truth.window(0, 30)
    assert w.tokens > 1000 and w.batch_steps > 100


def test_without_ignore_eos_some_requests_stop_early_deterministically() -> None:
    cfg = preset("vllm", eos_per_token=1e-3, warmup_requests=0)
    clock = ManualClock()
    world = SimWorld(cfg, clock=clock)
    for _ in range(20):
        world.submit(10, 2048, ignore_eos=False)
    clock.set(3000.0)
    world.advance_to(3000.0)
    reqs = world.truth.requests()
    stopped = [r for r in reqs if r.finish_reason == "stop"]
    assert stopped and len(stopped) < 20
    assert all(r.completion_tokens < 2048 for r in stopped)
    assert all(r.completion_tokens == 2048 for r in reqs if r.finish_reason == "length")


def test_llamacpp_drafts_no_further_than_remaining_tokens() -> None:
    world = _run(
        preset("llamacpp", warmup_requests=0, draft_skip_share=0.0),
        30.0,
        requests=1,
        max_tokens=200,
    )
    r = world.truth.requests()[0]
    assert r.completion_tokens == 200
    assert r.proposed_drafts < 3 * r.steps or r.steps == 0
    assert r.proposed_drafts >= 3 * (r.steps - 1)


def test_llamacpp_drops_the_draft_of_about_one_step_in_ten() -> None:
    world = _run(preset("llamacpp", warmup_requests=0), 30.0, requests=1, max_tokens=2000)
    r = world.truth.requests()[0]
    assert 0.8 * r.steps <= r.drafted_steps <= 0.96 * r.steps, (r.drafted_steps, r.steps)
    assert r.steps == r.completion_tokens - 1 - r.accepted_drafts


def test_max_running_queues_the_rest() -> None:
    cfg = preset("llamacpp", max_running=2, warmup_requests=0)
    clock = ManualClock()
    world = SimWorld(cfg, clock=clock)
    for _ in range(3):
        world.submit(10, 100)
    clock.set(0.1)
    running, waiting = world.running_snapshot()
    assert len(running) == 2 and waiting == 1
    clock.set(60.0)
    world.advance_to(60.0)
    third = world.truth.requests()[-1]
    assert third.ttft_s > 0.5  # waited for a free slot


def test_restart_aborts_in_flight_and_resets_counters() -> None:
    clock = ManualClock()
    world = SimWorld(preset("vllm", load_time_s=5.0), clock=clock)
    clock.set(5.0)
    world.submit(10, 1000)
    clock.set(6.0)
    world.advance_to(6.0)
    before = world.telemetry
    assert isinstance(before, VllmTelemetry)
    assert before.engines[0].generation_tokens_step > 0
    world.restart()
    assert world.epoch == 1
    assert not world.loaded()
    after = world.telemetry
    assert isinstance(after, VllmTelemetry)
    assert after.engines[0].generation_tokens_step == 0
    (r,) = world.truth.requests()
    assert r.finish_reason == "abort"
    assert world.truth.restart_times == [6.0]
    assert math.isclose(world.loaded_at, 11.0)


def test_truth_can_be_bounded_for_long_runs() -> None:
    cfg = preset("vllm", background_concurrency=2, truth_max_steps=1000)
    clock = ManualClock()
    world = SimWorld(cfg, clock=clock)
    clock.set(120.0)
    world.advance_to(120.0)
    steps = world.truth.steps()
    assert 900 <= len(steps) <= 1000
    assert steps[-1].t_end <= 120.0 and steps[0].t_end > 60.0


def test_a_request_queued_while_loading_runs_after_the_load() -> None:
    clock = ManualClock()
    world = SimWorld(preset("vllm", load_time_s=10.0, warmup_requests=0), clock=clock)
    world.submit(10, 5)
    clock.set(20.0)
    world.advance_to(20.0)
    (r,) = world.truth.requests()
    assert world.truth.steps()[0].t_start == 10.0
    assert r.ttft_s > 10.0
