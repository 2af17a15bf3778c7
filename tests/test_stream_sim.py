"""Active streams against the simulator over loopback, compared with its ground truth."""

from __future__ import annotations

import statistics

import pytest

from specwatch.core.server import Dialect
from specwatch.sources.detect import detect
from tests.conftest import drive_stream, running_sim

STEP_TOL_S = 0.2e-3


@pytest.mark.parametrize(
    ("dialect", "version"),
    [
        ("sglang", "0.5.23"),
        ("sglang", "0.5.16"),
        ("sglang", "0.4.6.post5"),
        ("vllm", "0.33.0"),
        ("vllm", "0.9.2"),
        ("llamacpp", None),
        ("openai", None),
    ],
)
async def test_stream_matches_ground_truth(dialect: str, version: str | None) -> None:
    with running_sim(dialect, version, warmup_requests=0) as sim:
        async with sim.client() as client:
            info = await detect(client)
            r = await drive_stream(sim, client, info, 96)
        truth = sim.world.truth.requests()[-1]
    assert r.error is None
    assert r.completion_tokens == truth.completion_tokens == 96
    assert r.ttft_s == pytest.approx(truth.ttft_s, abs=1e-9)
    assert r.steps == truth.steps
    assert r.step_latency_mean_s == pytest.approx(
        statistics.fmean(truth.step_latencies_s), abs=STEP_TOL_S
    )
    assert r.tokens_per_step == pytest.approx((truth.completion_tokens - 1) / truth.steps)
    assert r.decode_tok_s == pytest.approx(95 / sum(truth.step_latencies_s), rel=1e-6)
    if dialect == "openai":
        assert not r.counts_exact and "estimated" in r.notes["counts"]
        return
    assert r.counts_exact
    # exact cumulative counts: never more than the truth, and never one per chunk by assumption
    assert r.chunks[-1].tokens == 96
    assert len(r.chunks) < 96 or dialect == "llamacpp"
    if dialect == "sglang" and version != "0.4.6.post5":
        assert r.accept_length == pytest.approx(truth.completion_tokens / truth.steps)
        assert r.draft_acceptance_rate == pytest.approx(
            truth.accepted_drafts / truth.proposed_drafts
        )
    if dialect == "llamacpp":
        timings = r.server_stats["timings"]
        assert r.completion_tokens == timings["predicted_n"]
        assert r.draft_acceptance_rate == pytest.approx(
            timings["draft_n_accepted"] / timings["draft_n"]
        )
        assert r.draft_acceptance_rate == pytest.approx(
            truth.accepted_drafts / truth.proposed_drafts
        )
        assert r.server_stats["step_latency_s"] == pytest.approx(
            statistics.fmean(truth.step_latencies_s), abs=STEP_TOL_S
        )
        # one event per token, grouped into one step per verify burst
        assert len(r.chunks) == 96 and r.steps == truth.steps
    if dialect == "vllm":
        assert info.dialect is Dialect.VLLM
        assert r.accept_length == pytest.approx(95 / truth.steps)


async def test_sglang_without_speculation() -> None:
    with running_sim("sglang", spec_algorithm=None, warmup_requests=0) as sim:
        async with sim.client() as client:
            info = await detect(client)
            r = await drive_stream(sim, client, info, 32)
        truth = sim.world.truth.requests()[-1]
    assert info.spec.enabled is False
    assert r.completion_tokens == 32 and r.steps == truth.steps == 31
    assert r.tokens_per_step == 1.0
    assert r.accept_length is None and r.draft_acceptance_rate is None


async def test_vllm_merged_chunks_counted_exactly() -> None:
    """When the client falls behind, a chunk spans several steps: counts stay exact."""
    with running_sim("vllm", warmup_requests=0) as sim:
        async with sim.client() as client:
            info = await detect(client)
            import asyncio

            from specwatch.sources.stream import stream_completion

            task = asyncio.create_task(
                stream_completion(client, info, "p", 64, clock=sim.clock.now)
            )
            # move time far ahead in one go: every step is done before the client reads
            for _ in range(200):
                sim.advance(1.0)
                if task.done():
                    break
                await asyncio.sleep(0.005)
            r = await asyncio.wait_for(task, 10)
        truth = sim.world.truth.requests()[-1]
    assert r.error is None
    assert r.completion_tokens == truth.completion_tokens == 64
    assert r.chunks[-1].tokens == 64
    assert len(r.chunks) < truth.steps + 1  # fewer chunks than steps: merged, not miscounted


async def test_vllm_counts_the_cut_last_step_in_full_and_the_stream_says_so() -> None:
    """Like a real vLLM: one chunk per engine step, the prefill token alone in the first, and
    the last step cut by max_tokens while the server counts all the drafts it accepted."""
    from specwatch.sources.stream_steps import CUT_STEP_NOTE
    from specwatch.sources.watcher import MetricsWatcher

    # every draft accepted: steps of k + 1 tokens, so the cut is known exactly
    with running_sim("vllm", warmup_requests=0, acceptance=(1.0, 1.0, 1.0)) as sim:
        k = sim.world.config.max_accepted
        max_tokens = 1 + 2 * (k + 1) + 1
        async with sim.client() as client:
            info = await detect(client)
            watcher = MetricsWatcher(client, info, clock=sim.clock.now)
            await watcher.scrape()
            r = await drive_stream(sim, client, info, max_tokens)
            sim.advance(0.5)
            window = await watcher.scrape()
        truth = sim.world.truth.requests()[-1]
    assert [c.tokens for c in r.chunks] == [1, 1 + (k + 1), 1 + 2 * (k + 1), max_tokens]
    assert r.steps == truth.steps == 3
    # the stream sees the cut step short ...
    assert r.accept_length == pytest.approx((max_tokens - 1) / 3)
    # ... the server's counters (the truth) count it in full: they are authoritative
    assert truth.accepted_drafts == 3 * k
    assert window.accept_length == pytest.approx(1 + truth.accepted_drafts / truth.steps)
    assert window.accept_length == pytest.approx(k + 1)
    assert r.accept_length is not None and window.accept_length is not None
    assert r.accept_length < window.accept_length
    assert r.notes["accept_length"] == CUT_STEP_NOTE
