"""The live verdict knows decode is memory-bound where the GPU source reads DRAM activity
(dcgm-exporter's ``DCGM_FI_PROF_DRAM_ACTIVE``): stories (a) and (c) of issue 26 on the session's
own verdict, and the simulated exporter's DRAM activity following the clocks."""

from __future__ import annotations

import pytest

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.outcomes import Outcome
from specwatch.core.server import MetricsWindow
from specwatch.session.live_verdict import REFERENCE_S, LiveVerdict
from specwatch.sim.dcgm_exporter import render_dcgm
from specwatch.sim.gpus import SimGpus, SimGpuSpec
from specwatch.sources.dcgm.parse import parse_dcgm, to_sample

MAX = 1980
MEM = 2619


def _tick(t: float, clock: int, dram: float | None, mem: int = MEM) -> GpuTick:
    samples = tuple(
        GpuSample(
            i,
            t,
            sm_clock_mhz=clock,
            mem_clock_mhz=mem,
            util_gpu_pct=100,
            dram_active=dram,
        )
        for i in range(2)
    )
    return GpuTick(t, t, samples, 0.1)


def _feed(
    v: LiveVerdict, t0: float, seconds: int, tok_s: float, clock: int, dram: float | None
) -> None:
    for i in range(seconds):
        t = t0 + i
        wobble = (-1.0) ** i * 0.004 * tok_s
        v.add_tick(_tick(t, clock, dram))
        v.add_window(MetricsWindow(t=t, dt=1.0, gen_tok_s=tok_s + wobble, requests_running=3.0))


def _after(
    tok_s: float, clock: int, dram_before: float | None, dram_after: float | None
) -> LiveVerdict:
    v = LiveVerdict()
    v.set_inventory(
        GpuInventory(True, gpus=tuple(GpuStatic(i, max_sm_clock_mhz=MAX) for i in range(2)))
    )
    v.server_ready(0.0)
    _feed(v, 1.0, 5 + int(REFERENCE_S), 800.0, MAX, dram_before)
    _feed(v, 6.0 + REFERENCE_S, 30, tok_s, clock, dram_after)
    return v


def test_story_a_sm_clock_drop_on_a_memory_bound_decode_is_not_gpu_state() -> None:
    # Decode 80% memory-bound, SM clock -8%, tok/s -8%: the clocks predict -1.7%. The same
    # bytes per token over a slower step: the DRAM activity falls with tok/s.
    v = _after(800.0 * 0.92, round(MAX * 0.92), 0.8, 0.8 * 0.92)
    state = v.state()
    assert state.outcome is Outcome.CODE, state.judgement
    assert state.judgement is not None and "decode is memory-bound" in state.judgement.reason
    assert state.current is not None and state.current.dram_active == pytest.approx(0.736)
    # Without the DRAM reading (NVML here), the SM clock alone explains it, as before.
    assert _after(800.0 * 0.92, round(MAX * 0.92), None, None).state().outcome is Outcome.GPU


def test_story_c_more_bytes_per_token_is_load() -> None:
    # Longer contexts: HBM as busy as before, tok/s -8%: each token reads 8.7% more.
    v = _after(800.0 * 0.92, MAX, 0.8, 0.8)
    state = v.state()
    assert state.outcome is Outcome.LOAD, state.judgement
    assert state.judgement is not None
    assert "DRAM bytes per token +8.7% (more work per token)" in state.judgement.reason


def test_the_simulated_exporter_serves_dram_activity_following_the_clocks() -> None:
    gpus = SimGpus(2, spec=SimGpuSpec(memory_bound_share=0.8), seed=1)
    gpus.set_temperature(40.0, pin=True)
    gpus.advance_to(1.0, load=1.0)

    def dram() -> float:
        (gpu, _) = parse_dcgm(render_dcgm(gpus, 1.0)).gpus
        value = to_sample(gpu, 0, 1.0).dram_active
        assert value is not None
        return value

    assert dram() == pytest.approx(0.8, abs=0.01)
    gpus.set_temperature(75.0, pin=True)  # a slower SM clock stretches the step: less busy HBM
    gpus.advance_to(2.0, load=1.0)
    slower = dram()
    assert slower < 0.79
    gpus.set_temperature(40.0, pin=True)
    gpus.set_memory_clock(2383)  # the same bytes at a slower memory clock: busier HBM
    gpus.advance_to(3.0, load=1.0)
    assert dram() > 0.81
