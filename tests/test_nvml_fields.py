"""The per-tick field-values path of the NVML sampler, and the fake NVML's cheap state reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specwatch.sim.fake_nvml import SAME_INSTANT_S, FakeNvml
from specwatch.sim.fake_nvml_structs import FakeFieldValue
from specwatch.sim.gpus import SimGpus
from specwatch.sources.nvml import binding as N
from specwatch.sources.nvml.reads import FIRST_SAMPLE, NO_TENSOR
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock

GPUS = 2
CLASSIC_BACKUPS = (
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetViolationStatus",
)


class AskedNvml(FakeNvml):
    """Records the field ids of every ``nvmlDeviceGetFieldValues`` call."""

    def __init__(self, gpus: SimGpus, clock: Any) -> None:
        super().__init__(gpus, clock)
        self.asked: list[list[int]] = []

    def nvmlDeviceGetFieldValues(
        self, handle: Any, field_ids: Sequence[int]
    ) -> list[FakeFieldValue]:
        self.asked.append(list(field_ids))
        return super().nvmlDeviceGetFieldValues(handle, field_ids)


def make(fake_type: type[FakeNvml] = AskedNvml) -> tuple[GpuSampler, Any, SimGpus, ManualClock]:
    clock = ManualClock(100.0)
    gpus = SimGpus(GPUS, seed=3, start_t=clock.now())
    gpus.advance_to(clock.now(), load=1.0)
    fake = fake_type(gpus, clock.now)
    sampler = GpuSampler(nvml=fake, clock=clock.now)
    sampler.open()
    return sampler, fake, gpus, clock


def tick(sampler: GpuSampler, clock: ManualClock) -> Any:
    clock.advance(1.0)
    return sampler.sample()


def test_one_field_values_call_reads_five_fields_and_no_classic_call() -> None:
    sampler, fake, gpus, clock = make()
    tick(sampler, clock)  # the first tick also asks for the fan, once
    before = sum(fake.calls.values())
    for _ in range(3):
        sample = tick(sampler, clock).samples[1]
    state = gpus.states(clock.now())[1]
    assert sample.power_w == round(state.power_w * 1000) / 1000.0
    assert sample.energy_j == int(state.energy_j * 1000) / 1000.0
    assert sample.power_violation_ns == state.power_violation_ns > 0
    assert sample.thermal_violation_ns == state.thermal_violation_ns
    assert sample.hbm_temp_c == round(state.hbm_temp_c)
    assert isinstance(sample.energy_j, float) and isinstance(sample.power_violation_ns, int)
    assert fake.calls["nvmlDeviceGetFieldValues"] == 4 * GPUS
    assert all(fake.calls[name] == 0 for name in CLASSIC_BACKUPS)
    assert sorted(fake.asked[-1]) == sorted(
        [
            N.FI_DEV_MEMORY_TEMP,
            N.FI_DEV_POWER_INSTANT,
            N.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
            N.FI_DEV_PERF_POLICY_POWER,
            N.FI_DEV_PERF_POLICY_THERMAL,
        ]
    )
    # Clocks, temperature, field values, P-state, reasons, utilisation, memory, PCIe x2,
    # the GPM sample and the GPM metric.
    assert (sum(fake.calls.values()) - before) / (3 * GPUS) == 12


def test_fake_field_values_have_the_drivers_types_and_codes() -> None:
    fake = FakeNvml(SimGpus(1), clock=lambda: 0.0)
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    fake.fail(f"field:{N.FI_DEV_PERF_POLICY_THERMAL}", N.ERROR_NO_PERMISSION)
    ids = [
        N.FI_DEV_MEMORY_TEMP,
        N.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        N.FI_DEV_PERF_POLICY_THERMAL,
        1,
    ]
    temp, energy, thermal, ecc = fake.nvmlDeviceGetFieldValues(handle, ids)
    assert [v.fieldId for v in (temp, energy, thermal, ecc)] == ids
    assert (temp.nvmlReturn, temp.valueType) == (N.SUCCESS, N.VALUE_TYPE_UNSIGNED_INT)
    assert (energy.nvmlReturn, energy.valueType) == (N.SUCCESS, N.VALUE_TYPE_UNSIGNED_LONG_LONG)
    assert energy.value.ullVal == int(fake.gpus.states()[0].energy_j * 1000)
    assert thermal.nvmlReturn == N.ERROR_NO_PERMISSION
    assert ecc.nvmlReturn == N.ERROR_NOT_SUPPORTED


def test_a_field_failing_once_is_read_the_classic_way_that_tick_only() -> None:
    sampler, fake, _, clock = make()
    fake.fail(f"field:{N.FI_DEV_TOTAL_ENERGY_CONSUMPTION}", N.ERROR_TIMEOUT, index=0, times=1)
    first = tick(sampler, clock).samples[0]
    assert first.energy_j is not None and "energy_j" not in first.missing
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    tick(sampler, clock)
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert len(fake.asked[-1]) == 5


def test_a_field_unknown_to_the_driver_is_never_asked_again() -> None:
    sampler, fake, _, clock = make()
    # An older driver answers an id it does not know with INVALID_ARGUMENT in that value.
    fake.fail(f"field:{N.FI_DEV_PERF_POLICY_POWER}", N.ERROR_INVALID_ARGUMENT, index=0)
    fake.fail(f"field:{N.FI_DEV_MEMORY_TEMP}", N.ERROR_NOT_SUPPORTED, index=0)
    for n in range(3):
        sample = tick(sampler, clock).samples[0]
        assert sample.power_violation_ns is not None
        first = {"dram_active": FIRST_SAMPLE} if n == 0 else {}
        assert sample.missing == {
            "fan_pct": "n/s: Not Supported",
            "hbm_temp_c": "n/s: Not Supported",
            "tensor_active": NO_TENSOR,
            **first,
        }
    assert fake.calls["nvmlDeviceGetViolationStatus"] == 3
    gpu0_asks = fake.asked[-2]
    assert N.FI_DEV_PERF_POLICY_POWER not in gpu0_asks and N.FI_DEV_MEMORY_TEMP not in gpu0_asks
    assert len(fake.asked[-1]) == 5


class OldBinding(FakeNvml):
    """An nvidia-ml-py without ``nvmlDeviceGetFieldValues``."""

    def __getattribute__(self, name: str) -> Any:
        if name == "nvmlDeviceGetFieldValues":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_a_binding_without_field_values_reads_everything_the_classic_way() -> None:
    sampler, fake, _, clock = make(OldBinding)
    for _ in range(2):
        sample = tick(sampler, clock).samples[0]
    assert sample.power_w is not None and sample.energy_j is not None
    assert sample.power_violation_ns is not None and sample.thermal_violation_ns is not None
    assert sample.missing["hbm_temp_c"] == (
        "n/s: nvmlDeviceGetFieldValues is not in this nvidia-ml-py"
    )
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 2 * GPUS


def test_sim_states_are_built_once_per_change() -> None:
    gpus = SimGpus(2)
    first = gpus.states(1.0)
    assert gpus.states(1.0) is first and gpus.states() is first
    gpus.set_temperature(80.0, index=1)
    changed = gpus.states(1.0)
    assert changed is not first and changed[1].temp_c == 80.0
    assert gpus.states(2.0) is not changed


def test_fake_reads_within_one_instant_share_it_but_see_knobs_at_once() -> None:
    now = [10.0]
    gpus = SimGpus(1, start_t=now[0])
    gpus.advance_to(now[0], load=1.0)
    fake = FakeNvml(gpus, clock=lambda: now[0])
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    energy = fake.nvmlDeviceGetTotalEnergyConsumption(handle)
    now[0] += SAME_INSTANT_S / 2
    assert fake.nvmlDeviceGetTotalEnergyConsumption(handle) == energy
    now[0] += SAME_INSTANT_S
    assert fake.nvmlDeviceGetTotalEnergyConsumption(handle) > energy
    fake.gpus.set_link(1, 4)
    assert fake.nvmlDeviceGetCurrPcieLinkWidth(handle) == 4
