"""The simulator's memory-bound decode: with ``memory_bound_share`` set, the step pace follows
the memory clock (a power cap that lowers it) far more than the SM clock."""

from __future__ import annotations

import pytest

from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus, SimGpuSpec
from specwatch.sources.nvml import binding as N
from tests.sim_fixtures import ManualClock


def _gpus(share: float) -> SimGpus:
    gpus = SimGpus(2, spec=SimGpuSpec(memory_bound_share=share), seed=1)
    gpus.set_temperature(40.0, pin=True)
    gpus.advance_to(1.0, load=1.0)
    return gpus


def test_memory_clock_cut_slows_a_memory_bound_decode() -> None:
    gpus = _gpus(0.8)
    before = gpus.pace_factor()
    gpus.set_memory_clock(2383)  # -9%
    assert gpus.pace_factor() - before == pytest.approx(0.8 * (2619 / 2383 - 1), rel=0.01)
    clock = ManualClock(1.0)
    fake = FakeNvml(gpus, clock=clock.now)
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    assert fake.nvmlDeviceGetClockInfo(handle, N.CLOCK_MEM) == 2383


def test_sm_clock_drop_barely_moves_a_memory_bound_decode() -> None:
    gpus = _gpus(0.8)
    gpus.set_temperature(64.0, pin=True)  # boost falls 9 MHz per °C above 55 °C: about -4%
    sm = gpus.states(1.0)[0].sm_clock_mhz
    assert sm < 1980 * 0.97
    assert gpus.pace_factor() == pytest.approx(0.2 * 1980 / sm + 0.8, rel=0.001)
    assert gpus.pace_factor() < 1980 / sm  # less than a compute-bound step would slow


def test_default_model_still_follows_the_sm_clock() -> None:
    gpus = _gpus(0.0)
    before = gpus.pace_factor()
    gpus.set_memory_clock(2383)
    assert gpus.pace_factor() == pytest.approx(before)
