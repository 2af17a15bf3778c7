"""The live verdict's memory-bound story over local NVML: the fake NVML's GPM gives the DRAM
activity of the simulated boards (a decode 80% memory-bound), as dcgm-exporter does in
``test_live_verdict_memory_bound``; a board without GPM leaves the verdict on the clocks."""

from __future__ import annotations

import pytest

from specwatch.core.outcomes import Outcome
from specwatch.core.server import MetricsWindow
from specwatch.session.live_verdict import REFERENCE_S, LiveVerdict
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus, SimGpuSpec
from specwatch.sources.nvml.reads import NOT_A_GPM_BOARD
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock


def _verdict(gpm: bool, tok_s_after: float) -> tuple[LiveVerdict, GpuSampler]:
    clock = ManualClock(100.0)
    gpus = SimGpus(2, spec=SimGpuSpec(memory_bound_share=0.8), seed=4, start_t=clock.now())
    gpus.set_temperature(40.0, pin=True)  # full boost: the clocks do not move
    gpus.advance_to(clock.now(), load=1.0)
    fake = FakeNvml(gpus, clock.now)
    fake.gpm_supported = gpm
    sampler = GpuSampler(nvml=fake, clock=clock.now)
    v = LiveVerdict()
    v.set_inventory(sampler.open())
    v.server_ready(clock.now())

    def feed(seconds: int, tok_s: float) -> None:
        for i in range(seconds):
            clock.advance(1.0)
            v.add_tick(sampler.sample())
            wobble = (-1.0) ** i * 0.004 * tok_s
            v.add_window(
                MetricsWindow(t=clock.now(), dt=1.0, gen_tok_s=tok_s + wobble, requests_running=3)
            )

    feed(5 + int(REFERENCE_S), 800.0)
    feed(30, tok_s_after)
    return v, sampler


def test_story_c_over_nvml_gpm_more_bytes_per_token_is_load() -> None:
    # Longer contexts: HBM as busy as before at the same clocks, tok/s -8%.
    v, sampler = _verdict(True, 800.0 * 0.92)
    state = v.state()
    assert state.current is not None and state.current.dram_active == pytest.approx(0.8, abs=0.01)
    assert state.outcome is Outcome.LOAD, state.judgement
    assert state.judgement is not None
    assert "DRAM bytes per token +8.7% (more work per token)" in state.judgement.reason
    sampler.stop()


def test_a_board_without_gpm_leaves_the_verdict_on_the_clocks() -> None:
    v, sampler = _verdict(False, 800.0 * 0.92)
    state = v.state()
    assert state.current is not None and state.current.dram_active is None
    assert sampler.latest is not None
    assert sampler.latest.samples[0].missing["dram_active"] == NOT_A_GPM_BOARD
    assert state.outcome is not Outcome.LOAD, state.judgement
    assert state.judgement is not None and "DRAM" not in state.judgement.reason
    sampler.stop()
