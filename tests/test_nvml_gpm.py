"""DRAM bandwidth utilisation through NVML's GPM metrics, against the fake NVML: two samples a
tick apart, the first tick without a value, an unsupported board asked once, samples freed."""

from __future__ import annotations

from typing import Any

import pytest

from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus, SimGpuSpec
from specwatch.sources.nvml import binding as N
from specwatch.sources.nvml.reads import FIRST_SAMPLE, NOT_A_GPM_BOARD
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock

GPUS = 2


def make(
    fake_type: type[FakeNvml] = FakeNvml, share: float = 0.8
) -> tuple[GpuSampler, FakeNvml, SimGpus, ManualClock]:
    clock = ManualClock(100.0)
    gpus = SimGpus(GPUS, spec=SimGpuSpec(memory_bound_share=share), seed=2, start_t=clock.now())
    gpus.set_temperature(40.0, pin=True)
    gpus.advance_to(clock.now(), load=1.0)
    fake = fake_type(gpus, clock.now)
    return GpuSampler(nvml=fake, clock=clock.now), fake, gpus, clock


def dram(sampler: GpuSampler, clock: ManualClock, index: int = 0) -> tuple[float | None, str]:
    clock.advance(1.0)
    sample = sampler.sample().samples[index]
    return sample.dram_active, sample.missing.get("dram_active", "")


def test_local_nvml_reads_dram_activity_between_two_gpm_samples() -> None:
    sampler, fake, gpus, clock = make()
    assert dram(sampler, clock) == (None, FIRST_SAMPLE)
    value, reason = dram(sampler, clock)
    assert reason == "" and value == pytest.approx(gpus.states()[0].dram_active, abs=1e-3)
    assert value == pytest.approx(0.8, abs=0.01)
    # The same bytes at a slower memory clock: busier HBM, as dcgm-exporter would say.
    gpus.set_memory_clock(2383)
    dram(sampler, clock)  # the tick spanning the change
    busier, _ = dram(sampler, clock)
    assert busier is not None and busier > 0.81
    assert busier == pytest.approx(gpus.states()[0].dram_active, abs=1e-3)
    assert fake.calls["nvmlGpmQueryDeviceSupport"] == GPUS
    assert fake.gpm_samples_live == 2 * GPUS
    sampler.stop()
    assert fake.gpm_samples_live == 0 and not fake.initialized


def test_a_board_without_gpm_says_so_once_and_is_never_sampled() -> None:
    sampler, fake, _, clock = make()
    fake.gpm_supported = False
    for _ in range(4):
        assert dram(sampler, clock) == (None, NOT_A_GPM_BOARD)
    assert fake.calls["nvmlGpmQueryDeviceSupport"] == GPUS
    assert fake.calls["nvmlGpmSampleGet"] == fake.calls["nvmlGpmSampleAlloc"] == 0
    assert "--dcgm gives DCGM_FI_PROF_DRAM_ACTIVE" in NOT_A_GPM_BOARD


@pytest.mark.parametrize(
    ("function", "code", "text"),
    [
        ("nvmlGpmQueryDeviceSupport", N.ERROR_FUNCTION_NOT_FOUND, "driver older than"),
        ("nvmlGpmQueryDeviceSupport", N.ERROR_NOT_SUPPORTED, "Not Supported"),
        ("nvmlGpmSampleGet", N.ERROR_NOT_SUPPORTED, "Not Supported"),
        ("nvmlGpmMetricsGet", N.ERROR_FUNCTION_NOT_FOUND, "driver older than"),
    ],
)
def test_an_unsupported_gpm_call_is_n_s_once_and_never_retried(
    function: str, code: int, text: str
) -> None:
    sampler, fake, _, clock = make()
    fake.fail(function, code)
    reasons = {dram(sampler, clock)[1] for _ in range(4)}
    (reason,) = reasons - {FIRST_SAMPLE}
    assert reason.startswith("n/s: GPM: ") and text in reason
    assert fake.calls[function] == GPUS
    assert fake.gpm_samples_live == 0  # given up: the samples went back at once
    sampler.stop()


def test_a_transient_gpm_error_is_that_tick_only() -> None:
    sampler, fake, _, clock = make()
    dram(sampler, clock)
    fake.fail("nvmlGpmMetricsGet", N.ERROR_TIMEOUT, index=None, times=1)
    value, reason = dram(sampler, clock)
    assert value is None and reason.startswith("N/A: GPM: ")
    value, reason = dram(sampler, clock, index=1)
    assert value == pytest.approx(0.8, abs=0.01) and reason == ""
    sampler.stop()


def test_a_lost_gpu_starts_a_new_pair_when_it_comes_back() -> None:
    sampler, _, gpus, clock = make()
    dram(sampler, clock)
    dram(sampler, clock)
    gpus.set_lost(0)
    clock.advance(1.0)
    assert sampler.sample().samples[0].lost
    gpus.set_lost(0, lost=False)
    assert dram(sampler, clock) == (None, FIRST_SAMPLE)
    value, _ = dram(sampler, clock)
    assert value == pytest.approx(0.8, abs=0.01)
    sampler.stop()


class NoGpmBinding(FakeNvml):
    """An nvidia-ml-py from before GPM (no ``nvmlGpm*`` functions)."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvmlGpm"):
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_an_nvidia_ml_py_without_gpm_is_n_s() -> None:
    sampler, _, _, clock = make(NoGpmBinding)
    value, reason = dram(sampler, clock)
    assert value is None
    assert reason.startswith("n/s: nvmlGpmQueryDeviceSupport is not in this nvidia-ml-py")
    assert dram(sampler, clock)[1] == reason
    sampler.stop()
