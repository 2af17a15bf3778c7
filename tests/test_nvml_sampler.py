"""GpuSampler against FakeNvml over SimGpus (and the real pynvml, which has no driver here)."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.nvml import binding as N
from specwatch.sources.nvml.binding import nvml_error
from specwatch.sources.nvml.reads import FIRST_SAMPLE, NO_TENSOR, SLOW_REFRESH_S
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock
from tests.unavailable_nvml import unavailable_nvml

GPUS = 4
FIELD_IDS = (
    N.FI_DEV_MEMORY_TEMP,
    N.FI_DEV_POWER_INSTANT,
    N.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
    N.FI_DEV_PERF_POLICY_POWER,
    N.FI_DEV_PERF_POLICY_THERMAL,
)
WAIT_S = 10.0
"""Upper bound for queue waits: a failing test stops here instead of hanging."""

STATIC_ONCE = (
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetHandleByIndex",
)


def make(
    load: float = 1.0, count: int = GPUS, **kw: Any
) -> tuple[GpuSampler, FakeNvml, SimGpus, ManualClock]:
    clock = ManualClock(100.0)
    gpus = SimGpus(count, seed=1, start_t=clock.now())
    gpus.advance_to(clock.now(), load=load)
    fake = FakeNvml(gpus, clock=clock.now)
    sampler = GpuSampler(nvml=fake, clock=clock.now, **kw)
    return sampler, fake, gpus, clock


def step(sampler: GpuSampler, clock: ManualClock, dt: float = 1.0) -> GpuTick:
    clock.advance(dt)
    return sampler.sample()


def test_every_field_read_and_matches_the_simulation() -> None:
    sampler, fake, gpus, clock = make()
    inv = sampler.open()
    assert inv.available and inv.reason is None
    assert inv.system.driver_version == "570.133.20"
    assert inv.system.nvml_version == "12.570.133.20"
    assert inv.system.cuda_driver_version == "12.8"
    assert len(inv.gpus) == GPUS
    for static in inv.gpus:
        assert static.missing == {}
        assert static.name == gpus.spec.name
        assert static.uuid is not None and static.uuid.startswith("GPU-")
        assert static.pci_bus_id == gpus.gpus[static.index].pci_bus_id
        assert static.max_sm_clock_mhz == gpus.spec.max_sm_clock_mhz
        assert static.max_mem_clock_mhz == gpus.spec.max_mem_clock_mhz
        assert (static.max_pcie_gen, static.max_pcie_width) == (5, 16)
        assert (static.slowdown_temp_c, static.shutdown_temp_c) == (87, 92)
        assert static.persistence_mode is True
        assert static.power_default_limit_w == static.power_limit_w == gpus.spec.power_limit_w
        assert static.app_sm_clock_mhz == gpus.spec.max_sm_clock_mhz

    clock.advance(30.0)
    tick = sampler.sample()
    states = gpus.states(clock.now())
    assert tick.error is None and tick.t == clock.now()
    assert [s.index for s in tick.samples] == list(range(GPUS))
    for sample, state in zip(tick.samples, states, strict=True):
        assert not sample.lost
        assert sample.missing == {
            "fan_pct": "n/s: Not Supported",
            "dram_active": FIRST_SAMPLE,
            "tensor_active": NO_TENSOR,
        }
        assert sample.sm_clock_mhz == state.sm_clock_mhz
        assert sample.mem_clock_mhz == state.mem_clock_mhz
        assert sample.temp_c == round(state.temp_c)
        assert sample.hbm_temp_c == round(state.hbm_temp_c)
        assert sample.power_w == pytest.approx(state.power_w, abs=1e-3)
        assert sample.energy_j == pytest.approx(state.energy_j, abs=1e-3)
        assert sample.pstate == state.pstate == 0
        assert sample.clock_event_reasons == state.reasons
        assert (sample.util_gpu_pct, sample.util_mem_pct) == (100, 55)
        assert sample.mem_used_bytes == state.mem_used_bytes
        assert sample.mem_total_bytes == gpus.spec.mem_total_bytes
        assert (sample.pcie_gen, sample.pcie_width) == (5, 16)
        assert sample.power_violation_ns == state.power_violation_ns
        assert sample.thermal_violation_ns == state.thermal_violation_ns
        assert sample.fan_pct is None
    # Every sample field was either read or has a reason.
    for name in GpuSample.__dataclass_fields__:
        if name in {"index", "t", "lost", "missing"}:
            continue
        assert all(getattr(s, name) is not None or name in s.missing for s in tick.samples)
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_a_supported_fan_is_read_and_cached() -> None:
    sampler, fake, _, clock = make()
    fake.fan_supported = True
    sampler.open()
    ticks = [step(sampler, clock) for _ in range(4)]
    assert all(s.fan_pct is not None and "fan_pct" not in s.missing for s in ticks[-1].samples)
    # Four ticks one second apart fit in one slow-field period: one read per GPU.
    assert fake.calls["nvmlDeviceGetFanSpeed"] == GPUS
    step(sampler, clock, SLOW_REFRESH_S)
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 2 * GPUS


def test_statics_read_once_and_slow_fields_cached() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    for _ in range(12):
        step(sampler, clock)
    assert fake.calls["nvmlInit"] == 1
    assert fake.calls["nvmlDeviceGetCount"] == 1
    assert fake.calls["nvmlSystemGetDriverVersion"] == 1
    for function in STATIC_ONCE:
        assert fake.calls[function] == GPUS, function
    assert fake.calls["nvmlDeviceGetMaxClockInfo"] == 2 * GPUS
    assert fake.calls["nvmlDeviceGetTemperatureThreshold"] == 2 * GPUS
    # 12 s of ticks with a 5 s cache: open, then refreshes at 105 and 110.
    assert fake.calls["nvmlDeviceGetEnforcedPowerLimit"] == 3 * GPUS
    assert fake.calls["nvmlDeviceGetPersistenceMode"] == 3 * GPUS
    # The fan is NOT_SUPPORTED: asked once per GPU, ever.
    assert fake.calls["nvmlDeviceGetFanSpeed"] == GPUS
    assert fake.calls["nvmlDeviceGetClockInfo"] == 2 * 12 * GPUS
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_power_limit_change_reaches_the_inventory() -> None:
    sampler, _, gpus, clock = make()
    inv = sampler.open()
    gpus.set_power_limit(500.0, index=1)
    step(sampler, clock, 1.0)
    assert sampler.inventory is inv
    step(sampler, clock, SLOW_REFRESH_S)
    assert sampler.inventory is not None and sampler.inventory is not inv
    assert sampler.inventory.gpus[1].power_limit_w == 500.0
    assert sampler.inventory.gpus[0].power_limit_w == 700.0
    assert sampler.inventory.gpus[1].power_default_limit_w == 700.0


def test_not_supported_stops_asking() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    fake.fail("nvmlDeviceGetCurrPcieLinkWidth", N.ERROR_NOT_SUPPORTED, index=1)
    ticks = [step(sampler, clock) for _ in range(3)]
    assert fake.calls["nvmlDeviceGetCurrPcieLinkWidth"] == 3 * GPUS - 2
    for tick in ticks:
        gpu1 = tick.samples[1]
        assert gpu1.pcie_width is None
        assert gpu1.missing["pcie_width"] == "n/s: Not Supported"
        assert gpu1.pcie_gen == 5
        assert tick.samples[0].pcie_width == 16 and "pcie_width" not in tick.samples[0].missing


def test_gpu_is_lost_flags_one_gpu_while_others_go_on() -> None:
    sampler, _, gpus, clock = make()
    sampler.open()
    gpus.set_lost(2)
    tick = step(sampler, clock)
    lost = tick.samples[2]
    assert lost.lost
    assert lost.sm_clock_mhz is None and lost.temp_c is None and lost.power_w is None
    assert lost.missing["sm_clock_mhz"] == "N/A: GPU is lost"
    for sample in tick.samples:
        if sample.index != 2:
            assert not sample.lost and sample.sm_clock_mhz is not None
    gpus.set_lost(2, lost=False)
    recovered = step(sampler, clock).samples[2]
    assert not recovered.lost and recovered.sm_clock_mhz is not None


def test_gpu_lost_at_start_is_flagged_and_picked_up_when_back() -> None:
    sampler, fake, gpus, clock = make()
    gpus.set_lost(0)
    inv = sampler.open()
    assert inv.available and inv.gpus[0].name is None
    assert "GPU is lost" in inv.gpus[0].missing["name"]
    assert inv.gpus[1].name is not None
    tick = step(sampler, clock)
    assert tick.samples[0].lost and not tick.samples[1].lost
    gpus.set_lost(0, lost=False)
    tick = step(sampler, clock)
    assert not tick.samples[0].lost and tick.samples[0].sm_clock_mhz is not None
    assert sampler.inventory is not None and sampler.inventory.gpus[0].name == gpus.spec.name
    assert fake.calls["nvmlInit"] == 1


def test_gpu_lost_reported_inside_field_values() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    fake.fail(f"field:{N.FI_DEV_MEMORY_TEMP}", N.ERROR_GPU_IS_LOST, index=3, times=1)
    tick = step(sampler, clock)
    assert tick.samples[3].lost and not tick.samples[2].lost
    assert not step(sampler, clock).samples[3].lost


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (N.ERROR_NO_PERMISSION, "N/A: Insufficient Permissions"),
        (N.ERROR_UNKNOWN, "N/A: Unknown Error"),
        (N.ERROR_TIMEOUT, "N/A: Timeout"),
    ],
)
def test_transient_errors_are_na_then_recover(code: int, text: str) -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    # The first ClockInfo call of GPU 0 in a tick is the SM clock.
    fake.fail("nvmlDeviceGetClockInfo", code, index=0, times=1)
    tick = step(sampler, clock)
    gpu0 = tick.samples[0]
    assert gpu0.sm_clock_mhz is None and gpu0.missing["sm_clock_mhz"] == text
    assert gpu0.mem_clock_mhz is not None and not gpu0.lost
    assert tick.samples[1].sm_clock_mhz is not None
    again = step(sampler, clock).samples[0]
    assert again.sm_clock_mhz is not None and "sm_clock_mhz" not in again.missing


def test_transient_field_value_error_falls_back_for_power() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    fake.fail("nvmlDeviceGetFieldValues", N.ERROR_TIMEOUT, index=0, times=1)
    sample = step(sampler, clock).samples[0]
    assert sample.hbm_temp_c is None and sample.missing["hbm_temp_c"] == "N/A: Timeout"
    assert sample.power_w is not None and "power_w" not in sample.missing
    assert sample.energy_j is not None and sample.power_violation_ns is not None
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert fake.calls["nvmlDeviceGetViolationStatus"] == 2
    assert step(sampler, clock).samples[0].hbm_temp_c is not None
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1


def test_unsupported_fields_in_field_values() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    for field_id in FIELD_IDS:
        fake.fail(f"field:{field_id}", N.ERROR_NOT_SUPPORTED)
    for _ in range(3):
        sample = step(sampler, clock).samples[0]
        assert sample.hbm_temp_c is None
        assert sample.missing["hbm_temp_c"] == "n/s: Not Supported"
        assert sample.power_w is not None and "power_w" not in sample.missing
        assert sample.energy_j is not None and sample.power_violation_ns is not None
        assert sample.thermal_violation_ns is not None
    # Once every field is known unsupported, nvmlDeviceGetFieldValues is not called again and
    # the classic calls read what it read.
    assert fake.calls["nvmlDeviceGetFieldValues"] == GPUS
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 3 * GPUS
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 3 * GPUS
    assert fake.calls["nvmlDeviceGetViolationStatus"] == 2 * 3 * GPUS


def test_function_not_found_for_event_reasons_falls_back_to_throttle_reasons() -> None:
    sampler, fake, gpus, clock = make()
    sampler.open()
    fake.fail("nvmlDeviceGetCurrentClocksEventReasons", N.ERROR_FUNCTION_NOT_FOUND)
    ticks = [step(sampler, clock) for _ in range(3)]
    states = gpus.states(clock.now())
    assert ticks[-1].samples[0].clock_event_reasons == states[0].reasons
    assert all("clock_event_reasons" not in s.missing for t in ticks for s in t.samples)
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == GPUS
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 3 * GPUS


def test_function_not_found_without_fallback_is_ns_with_a_hint() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    # Energy comes in the field values unless the driver lacks the field.
    fake.fail(f"field:{N.FI_DEV_TOTAL_ENERGY_CONSUMPTION}", N.ERROR_NOT_SUPPORTED)
    fake.fail("nvmlDeviceGetTotalEnergyConsumption", N.ERROR_FUNCTION_NOT_FOUND)
    for _ in range(2):
        sample = step(sampler, clock).samples[0]
        assert sample.energy_j is None
        reason = sample.missing["energy_j"]
        assert reason.startswith("n/s: Function Not Found")
        assert "driver older than nvidia-ml-py" in reason
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == GPUS


def test_temperature_falls_back_to_the_deprecated_call() -> None:
    sampler, fake, _, clock = make()
    sampler.open()
    fake.fail("nvmlDeviceGetTemperatureV", N.ERROR_FUNCTION_NOT_FOUND)
    step(sampler, clock)
    assert step(sampler, clock).samples[0].temp_c is not None
    assert fake.calls["nvmlDeviceGetTemperatureV"] == GPUS
    assert fake.calls["nvmlDeviceGetTemperature"] == 2 * GPUS


def test_a_refused_handle_is_na_and_retried() -> None:
    sampler, fake, _, clock = make()
    fake.fail("nvmlDeviceGetHandleByIndex", N.ERROR_NO_PERMISSION, index=1, times=2)
    inv = sampler.open()
    assert inv.gpus[1].missing["name"] == "N/A: no handle: Insufficient Permissions"
    tick = step(sampler, clock)
    assert not tick.samples[1].lost and tick.samples[1].sm_clock_mhz is None
    assert tick.samples[1].missing["sm_clock_mhz"].startswith("N/A: no handle")
    tick = step(sampler, clock)
    assert tick.samples[1].sm_clock_mhz is not None
    assert sampler.inventory is not None and sampler.inventory.gpus[1].name is not None


def test_static_transient_error_is_retried_at_slow_refresh() -> None:
    sampler, fake, _, clock = make()
    fake.fail("nvmlDeviceGetUUID", N.ERROR_UNKNOWN, index=0, times=1)
    inv = sampler.open()
    assert inv.gpus[0].uuid is None and inv.gpus[0].missing["uuid"] == "N/A: Unknown Error"
    step(sampler, clock, SLOW_REFRESH_S)
    assert sampler.inventory is not None and sampler.inventory.gpus[0].uuid is not None
    assert sampler.inventory.gpus[0].missing == {}


def test_no_library_gives_unavailable_and_never_raises() -> None:
    fake = unavailable_nvml()
    sampler = GpuSampler(nvml=fake)
    inv = sampler.open()
    assert not inv.available
    assert inv.reason == "NVML unavailable: NVML Shared Library Not Found"
    assert inv.gpus == ()
    tick = sampler.sample()
    assert tick.samples == () and tick.error == inv.reason
    ticks: queue.Queue[GpuTick] = queue.Queue()
    sampler.on_tick = ticks.put
    sampler.set_interval(0.001)
    sampler.start()
    assert ticks.get(timeout=WAIT_S).error == inv.reason
    sampler.stop()
    assert fake.calls["nvmlInit"] == 1
    assert fake.calls["nvmlShutdown"] == 0


def test_driver_not_loaded_gives_unavailable() -> None:
    sampler, fake, _, _ = make()
    fake.fail("nvmlInit", N.ERROR_DRIVER_NOT_LOADED)
    inv = sampler.open()
    assert not inv.available and inv.reason == "NVML unavailable: Driver Not Loaded"
    assert sampler.sample().samples == ()


def test_real_pynvml_without_a_driver_is_unavailable() -> None:
    sampler = GpuSampler()
    inv = sampler.open()
    try:
        if inv.available:
            pytest.skip("a real NVIDIA driver is present; see tests/tools/device_nvml_check.py")
        assert inv.reason == "NVML unavailable: NVML Shared Library Not Found"
        tick = sampler.sample()
        assert tick.samples == () and tick.error == inv.reason
    finally:
        sampler.stop()


def test_fake_requires_init_and_raises_real_nvml_errors() -> None:
    fake = FakeNvml(SimGpus(2), clock=lambda: 0.0)
    with pytest.raises(N.NVMLError) as uninit:
        fake.nvmlDeviceGetCount()
    assert type(uninit.value).__name__ == "NVMLError_Uninitialized"
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(N.NVMLError) as ns:
        fake.nvmlDeviceGetFanSpeed(handle)
    assert type(ns.value).__name__ == "NVMLError_NotSupported"
    assert getattr(ns.value, "value", None) == N.ERROR_NOT_SUPPORTED
    fake.gpus.set_lost(0)
    with pytest.raises(N.NVMLError) as lost:
        fake.nvmlDeviceGetClockInfo(handle, N.CLOCK_SM)
    assert type(lost.value).__name__ == "NVMLError_GpuIsLost"
    fake.nvmlShutdown()
    with pytest.raises(N.NVMLError):
        fake.nvmlShutdown()
    assert type(nvml_error(N.ERROR_LIBRARY_NOT_FOUND)).__name__ == "NVMLError_LibraryNotFound"
    with pytest.raises(N.NVMLError) as missing:
        unavailable_nvml().nvmlInit()
    assert str(missing.value) == "NVML Shared Library Not Found"


def test_history_is_bounded_and_ticks_since() -> None:
    sampler, _, _, clock = make(history=3)
    sampler.open()
    ticks = [step(sampler, clock) for _ in range(5)]
    assert len(sampler.history) == 3
    assert sampler.latest is ticks[-1]
    assert sampler.ticks_since(ticks[3].t) == ticks[3:]
    assert sampler.ticks_since(clock.now() + 1) == []


def test_cost_is_recorded() -> None:
    sampler, _, _, clock = make()
    sampler.open()
    assert sampler.open_cost_ms is not None and sampler.open_cost_ms > 0
    tick = step(sampler, clock)
    assert 0 < tick.cost_ms < 5_000


def test_interval_validation() -> None:
    sampler, _, _, _ = make()
    assert sampler.interval_s == 1.0
    sampler.set_interval(0.1)
    assert sampler.interval_s == 0.1
    with pytest.raises(ValueError):
        sampler.set_interval(0.0)
    with pytest.raises(ValueError):
        GpuSampler(interval_s=-1.0)


class OverlapProbe(FakeNvml):
    """Counts how many ticks are inside NVML at once (through the first call of a GPU tick)."""

    def __init__(self, gpus: SimGpus, clock: Any) -> None:
        super().__init__(gpus, clock)
        self.inside = 0
        self.most_inside = 0
        self.guard = threading.Lock()
        self.gate: threading.Event | None = None

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        with self.guard:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            if self.gate is not None:
                self.gate.wait(WAIT_S)
            return super().nvmlDeviceGetClockInfo(handle, clock_type)
        finally:
            with self.guard:
                self.inside -= 1


def test_thread_delivers_ticks_never_overlaps_and_shuts_down_once() -> None:
    clock = ManualClock(0.0)
    gpus = SimGpus(2, seed=2)
    fake = OverlapProbe(gpus, clock.now)
    ticks: queue.Queue[GpuTick] = queue.Queue()
    sampler = GpuSampler(interval_s=0.001, nvml=fake, on_tick=ticks.put, clock=clock.now)
    sampler.start()
    sampler.start()  # a second start is a no-op
    assert sampler.running
    got = [ticks.get(timeout=WAIT_S) for _ in range(5)]
    # Synchronous samples from another thread while the sampler thread runs.
    for _ in range(5):
        sampler.sample()
    got += [ticks.get(timeout=WAIT_S) for _ in range(3)]
    sampler.stop()
    assert not sampler.running
    assert all(len(t.samples) == 2 for t in got)
    assert fake.most_inside == 1
    assert fake.calls["nvmlInit"] == 1
    assert fake.calls["nvmlShutdown"] == 1
    assert not fake.initialized
    sampler.stop()
    assert fake.calls["nvmlShutdown"] == 1


def test_next_tick_waits_for_the_previous_one() -> None:
    clock = ManualClock(0.0)
    fake = OverlapProbe(SimGpus(1), clock.now)
    started: queue.Queue[GpuTick] = queue.Queue()
    sampler = GpuSampler(interval_s=0.001, nvml=fake, on_tick=started.put, clock=clock.now)
    sampler.open()
    fake.gate = threading.Event()
    sampler.start()
    # The first tick is held inside NVML; with a 1 ms interval a scheduler that did not wait
    # would have piled up ticks by now. Releasing it lets exactly the held tick finish first.
    with pytest.raises(queue.Empty):
        started.get(timeout=0.05)
    assert fake.most_inside == 1
    fake.gate.set()
    first = started.get(timeout=WAIT_S)
    assert len(first.samples) == 1
    sampler.stop()
    assert fake.most_inside == 1


def test_set_interval_wakes_the_waiting_thread_and_stop_is_prompt() -> None:
    sampler, fake, _, _ = make(count=1, interval_s=3600.0)
    ticks: queue.Queue[GpuTick] = queue.Queue()
    sampler.on_tick = ticks.put
    sampler.start()
    ticks.get(timeout=WAIT_S)
    # Without the wake-up the next tick would be an hour away and this get would time out.
    sampler.set_interval(0.001)
    ticks.get(timeout=WAIT_S)
    sampler.set_interval(3600.0)
    stopped = threading.Event()

    def stop() -> None:
        sampler.stop()
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    assert stopped.wait(WAIT_S)
    assert not sampler.running and fake.calls["nvmlShutdown"] == 1


def test_on_tick_errors_do_not_stop_the_thread() -> None:
    sampler, _, _, _ = make(count=1, interval_s=0.001)
    seen: queue.Queue[GpuTick] = queue.Queue()
    calls = 0

    def on_tick(tick: GpuTick) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("widget gone")
        seen.put(tick)

    sampler.on_tick = on_tick
    sampler.start()
    seen.get(timeout=WAIT_S)
    sampler.stop()
    assert sampler.callback_error == "RuntimeError: widget gone"


def test_context_manager_opens_and_closes() -> None:
    sampler, fake, _, _ = make(count=1)
    with sampler as s:
        assert s.inventory is not None and s.inventory.available
        assert len(s.sample().samples) == 1
    assert fake.calls["nvmlInit"] == 1 and fake.calls["nvmlShutdown"] == 1


class OddNvml(FakeNvml):
    """A binding that misbehaves: a wrong return shape and a non-NVML exception."""

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        return object()

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        raise OSError("ioctl failed")


def test_unexpected_values_and_exceptions_become_na() -> None:
    clock = ManualClock(0.0)
    sampler = GpuSampler(nvml=OddNvml(SimGpus(1), clock.now), clock=clock.now)
    sample = sampler.sample().samples[0]
    assert sample.util_gpu_pct is None and sample.util_mem_pct is None
    assert sample.missing["util_gpu_pct"].startswith("N/A: unreadable value: AttributeError")
    assert sample.pstate is None and sample.missing["pstate"] == "N/A: OSError: ioctl failed"
    assert sample.sm_clock_mhz is not None
    sampler.stop()


def test_stop_from_on_tick_does_not_deadlock() -> None:
    sampler, fake, _, _ = make(count=1, interval_s=0.001)
    stopped = threading.Event()

    def on_tick(tick: GpuTick) -> None:
        sampler.stop()
        stopped.set()

    sampler.on_tick = on_tick
    sampler.start()
    assert stopped.wait(WAIT_S)
    assert fake.calls["nvmlShutdown"] == 1
    sampler.stop()
    assert fake.calls["nvmlShutdown"] == 1
