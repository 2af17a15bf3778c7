"""The draft advisor against the simulator, whose truth is known (issue 24, item 5).

Each scenario holds a series of running batches on a simulated vLLM, derives windows the way the
live watch does, takes the plain baseline from the same server run without speculation, and
checks the advice against the sim's own step-cost formula and acceptance rates.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from specwatch.core.draft_advisor import (
    LOSES,
    Advice,
    PlainBaseline,
    advice_json,
    advice_lines,
    advise,
)
from specwatch.core.server import MetricsWindow, SpecConfig
from specwatch.core.step_cost import plain_steps
from specwatch.sim.config import SimConfig
from specwatch.sources.detect import detect
from specwatch.sources.watcher import MetricsWatcher
from tests.advisor_sim import (
    held_batch_windows,
    info_of,
    plain_of,
    true_best_k,
    true_expected_len,
    true_loses_from,
    true_step_s,
    vllm_config,
)
from tests.conftest import running_sim

CHAIN: dict[str, Any] = {"num_steps": 3, "num_draft_tokens": 3, "acceptance": (0.8, 0.6, 0.45)}
COST: dict[str, Any] = {"base_step_ms": 11.0, "draft_ms_per_token": 1.0, "plain_step_ms": 10.0}


def _advise(
    config: SimConfig, batches: list[int], *, split: bool = True, windows: int = 6
) -> Advice:
    spec = held_batch_windows(config, batches, windows_per_batch=windows, window_s=1.0)
    plain = held_batch_windows(plain_of(config), batches, windows_per_batch=3, window_s=0.5)
    baseline = PlainBaseline(plain_steps(plain), "the same sim without speculation")
    draft_s = config.draft_ms_per_token / 1000.0 if split else None
    return advise(spec, info_of(config), baseline, draft_s)


def _assert_expected_len_within(advice: Advice, config: SimConfig) -> None:
    for k, e in enumerate(advice.acceptance.expected_len, start=1):
        assert e.low <= true_expected_len(config, k) <= e.high, (k, e)


def test_speculation_that_pays_at_low_batch_only_loses_from_the_true_crossover() -> None:
    # A verify step grows 2 ms per request, a plain one 0.5 ms: truly loses from batch 16.
    config = vllm_config(**CHAIN, **COST, batch_step_ms=0.5, spec_batch_step_ms=2.0)
    batches = [1, 4, 8, 12, 16, 20, 24]
    advice = _advise(config, batches)
    truth = true_loses_from(config, batches)
    assert truth == 16
    assert advice.loses_between is not None
    low, high = advice.loses_between
    assert low <= truth <= (high if high is not None else batches[-1])
    for b in advice.bins:
        assert true_best_k(config, b.batch) in b.plausible_k, b
    assert advice.bins[0].best_k == 3 and advice.bins[-1].verdict == LOSES
    _assert_expected_len_within(advice, config)
    assert advice.recommendation is not None
    assert '"num_speculative_tokens_per_batch_size": [[1, ' in advice.recommendation
    assert advice.recommendation.endswith(
        "(add your method and model keys; the server's command line was not readable)"
    )
    table = json.loads(advice.recommendation.split("'")[1])["num_speculative_tokens_per_batch_size"]
    assert table[0][2] == 3 and table[-1] == [table[-1][0], 24, 0]
    assert low <= table[-1][0] <= (high or 24)


def test_a_cliff_at_one_batch_size_is_flagged_and_turned_off_there_alone() -> None:
    # Batch 3 runs its verify without a CUDA graph: 6x the step time.
    config = vllm_config(
        **CHAIN, **COST, batch_step_ms=0.5, spec_batch_step_ms=0.5, verify_cliffs=((3, 6.0),)
    )
    batches = [1, 2, 3, 4, 6, 8]
    advice = _advise(config, batches, windows=10)  # batch 3 steps slowly: more to count
    by_batch = {b.batch: b for b in advice.bins}
    assert by_batch[3].cliff is not None and by_batch[3].cliff > 4.0
    assert [b.batch for b in advice.bins if b.cliff is not None] == [3]
    assert by_batch[3].verdict == LOSES and by_batch[3].best_k == 0 == true_best_k(config, 3)
    for b in advice.bins:
        assert true_best_k(config, b.batch) in b.plausible_k
    assert advice.loses_from is None  # it pays again above the cliff
    assert any(
        "batch 3 is a step-time cliff" in n and "loses there alone" in n for n in advice.notes
    )
    assert advice.recommendation is not None and "[3, 3, 0], [4, 8, 3]" in advice.recommendation
    observed = by_batch[3].step_s
    assert observed is not None
    assert observed.value == pytest.approx(true_step_s(config, 3, 3), rel=0.02)


@pytest.mark.parametrize("split", [True, False], ids=["measured split", "linear model"])
def test_acceptance_collapsing_after_position_2_recommends_two_drafts(split: bool) -> None:
    config = vllm_config(
        num_steps=4,
        num_draft_tokens=4,
        acceptance=(0.9, 0.85, 0.1, 0.1),
        base_step_ms=11.0,
        draft_ms_per_token=1.5,
        plain_step_ms=10.0,
        batch_step_ms=0.5,
        spec_batch_step_ms=0.5,
    )
    batches = [1, 4, 8]
    advice = _advise(config, batches, split=split)
    assert advice.k_running == 4
    _assert_expected_len_within(advice, config)
    for b in advice.bins:
        assert true_best_k(config, b.batch) == 2
        assert b.best_k == 2 and 2 in b.plausible_k
        # Without the draft's own cost the step at k=2 may cost as much as the step at k=4
        # (overhead per step, not per draft token): the running length stays plausible.
        assert (4 in b.plausible_k) is not split
    assert advice.recommendation is not None
    if split:
        assert advice.recommendation.startswith(
            "--speculative-config '{\"num_speculative_tokens\": 2}' (add your method and model"
        )
    else:
        assert advice.recommendation == "keep num_speculative_tokens=4"
        assert any("k=2 gains" in n and "--draft-ms MS" in n for n in advice.notes), advice.notes
    assert ("linear in k" in advice.assumptions) is not split
    json.dumps(advice_json(advice))
    assert all(isinstance(line, str) for line in advice_lines(advice))


def test_a_short_run_is_below_the_sample_floor_and_advice_is_withheld() -> None:
    config = vllm_config(**CHAIN, **COST)
    spec = held_batch_windows(config, [1], windows_per_batch=3, window_s=0.5)
    advice = advise(spec, info_of(config), PlainBaseline({1: 0.010}, "given"))
    assert advice.recommendation is None and advice.acceptance.expected_len == ()
    assert advice.reason is not None and "fewer than the 200 needed" in advice.reason
    assert advice_lines(advice)[0].startswith("no recommendation: ")


def test_tree_drafting_is_refused_whatever_the_counters_say() -> None:
    config = vllm_config(**CHAIN, **COST)
    spec = held_batch_windows(config, [2], windows_per_batch=4, window_s=1.0)
    tree = replace(info_of(config), spec=SpecConfig(enabled=True, topk=4))
    advice = advise(spec, tree, PlainBaseline({2: 0.0105}, "given"))
    assert advice.recommendation is None
    assert advice.reason is not None and advice.reason.startswith("tree drafting (topk=4)")


async def test_over_http_the_live_watch_feeds_the_advisor() -> None:
    overrides: dict[str, Any] = {
        **CHAIN,
        **COST,
        "warmup_requests": 0,
        "prefill_ms": 2.0,
        "gpu_count": 1,
    }
    with running_sim("vllm", **overrides) as sim:
        sim.world.gpus.set_temperature(sim.world.gpus.spec.ambient_c, pin=True)
        sim.world.gpus.set_power_limit(10_000.0)
        async with sim.client() as client:
            info = await detect(client)
            watcher = MetricsWatcher(client, info, clock=sim.clock.now)
            for _ in range(2):
                sim.world.submit(16, 10**9)
            sim.advance(0.5)
            await _scraped(watcher)
            windows: list[MetricsWindow] = []
            for _ in range(4):
                sim.advance(1.0)
                windows.append(await _scraped(watcher))
    config = sim.world.config
    assert info.spec.num_draft_tokens == 3
    advice = advise(windows, info, PlainBaseline({2: true_step_s(config, 2, 0)}, "sim truth"))
    _assert_expected_len_within(advice, config)
    (b,) = advice.bins
    assert b.batch == 2 and true_best_k(config, 2) in b.plausible_k
    assert advice.recommendation == "keep num_speculative_tokens=3"


async def _scraped(watcher: MetricsWatcher) -> MetricsWindow:
    window = await watcher.scrape()
    assert "error" not in window.notes, window.notes
    return window
