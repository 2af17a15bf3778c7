"""A fake NVML at the nvidia-ml-py function level, backed by the simulated GPUs.

``FakeNvml`` exposes the ``nvml*`` functions that ``specwatch.sources.nvml`` calls, with the
same arguments and return shapes as ``pynvml``, and raises the real ``pynvml.NVMLError``
subclasses (obtained through ``specwatch.sources.nvml.binding.nvml_error``, since only that
module imports ``pynvml``). Fans are ``NOT_SUPPORTED`` (passively cooled boards), a lost
simulated GPU raises ``GPU_IS_LOST``, and ``fail()`` injects any error for tests.

Clock policy reads answer like a board nobody has tuned (application clocks at their defaults,
nothing locked, persistence on); ``policy_supported = False`` makes every policy read
``NOT_SUPPORTED``, as on consumer boards. The set and reset calls need ``privileged`` (else
``NO_PERMISSION``, as NVML answers a non-root caller) and are recorded in ``clock_calls`` and,
when ``SPECWATCH_FAKE_NVML_LEDGER`` names a file, appended to it as JSON lines, so a test can
see what a killed process did and what the next one restored.

A GPM sample holds the board's accumulated DRAM-busy seconds; ``NVML_GPM_METRIC_DRAM_BW_UTIL``
between two samples is their difference over the time between them, in percent, as the driver
computes it from its counters. ``gpm_supported = False`` is a board before Hopper:
``nvmlGpmQueryDeviceSupport`` says so and sampling raises ``NOT_SUPPORTED``. Every other metric
comes back ``NOT_SUPPORTED`` in its ``nvmlReturn``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from specwatch.sim.fake_nvml_structs import (
    FakeFieldValue,
    FakeGpmMetricsGet,
    FakeGpmSample,
    FakeGpmSupport,
    FakeHandle,
    FakeMemory,
    FakePciInfo,
    FakeUtilization,
    FakeValue,
    FakeViolationTime,
)
from specwatch.sim.gpus import SimGpus, SimGpuState
from specwatch.sources.nvml import binding as N

SAME_INSTANT_S = 0.005
"""Reads this close after the last new instant see that instant (the driver, too, refreshes
most readings only every few to hundreds of milliseconds); it spares the model a step per call."""

DRIVER_VERSION = "570.133.20"
NVML_VERSION = "12.570.133.20"
CUDA_DRIVER_VERSION = 12080
LEDGER_ENV = "SPECWATCH_FAKE_NVML_LEDGER"
"""A file the fake appends each set/reset call to (one JSON list per line)."""
ROOT_ENV = "SPECWATCH_FAKE_NVML_ROOT"
"""``"1"``: the fake lets this process set clocks (as root may on a real driver)."""


@dataclass
class _Failure:
    function: str
    code: int
    index: int | None
    times: int | None


class FakeNvml:
    """Module-like stand-in for ``pynvml`` over ``SimGpus``.

    Args:
        gpus: The simulated boards.
        clock: Seconds on the simulation's clock; each read integrates the model to it.

    Attributes:
        calls: How many times each function was called (``calls["nvmlInit"]`` etc.).
        fan_supported: Set True to report a fan (default: passively cooled, NOT_SUPPORTED).
        gpm_supported: Set False for a board without GPM (before Hopper).
        policy_supported: Set False to make every clock policy read ``NOT_SUPPORTED``.
        clock_calls: Every set/reset call made: ``(function, gpu index, *arguments)``.
        locked: (GPU index, clock type) -> (min, max) MHz currently locked.
        gpm_samples_live: GPM samples allocated and not yet freed.
    """

    c_nvmlGpmMetricsGet_t = FakeGpmMetricsGet

    def __init__(self, gpus: SimGpus, clock: Callable[[], float] = time.monotonic) -> None:
        self.gpus = gpus
        self.clock = clock
        self.calls: Counter[str] = Counter()
        self.fan_supported = False
        self.gpm_supported = True
        self.policy_supported = True
        self.clock_calls: list[tuple[Any, ...]] = []
        self.locked: dict[tuple[int, int], tuple[int, int]] = {}
        self.gpm_samples_live = 0
        self._privileged: bool | None = None
        self._init_count = 0
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()
        self._instant = -float("inf")
        self._seen: tuple[float, int, list[SimGpuState]] | None = None

    # --- test controls --------------------------------------------------------------------

    def fail(
        self, function: str, code: int, index: int | None = None, times: int | None = None
    ) -> None:
        """Make ``function`` raise ``NVMLError(code)``.

        Args:
            function: A function name (``"nvmlDeviceGetFanSpeed"``), or ``"field:ID"`` to make
                one field of ``nvmlDeviceGetFieldValues`` return ``code`` in its
                ``nvmlReturn``.
            code: An ``NVML_ERROR_*`` value.
            index: Only for this GPU (``None``: every GPU, and system-level calls).
            times: Only this many times (``None``: always).
        """
        with self._lock:
            self._failures.append(_Failure(function, code, index, times))

    @property
    def privileged(self) -> bool:
        """Whether set calls succeed: as the real driver, for root
        (``SPECWATCH_FAKE_NVML_ROOT`` ``1`` or ``0`` says otherwise, or a test sets it)."""
        if self._privileged is None:
            said = os.environ.get(ROOT_ENV)
            if said in ("0", "1"):
                return said == "1"
            return hasattr(os, "geteuid") and os.geteuid() == 0
        return self._privileged

    @privileged.setter
    def privileged(self, value: bool) -> None:
        self._privileged = value

    @property
    def initialized(self) -> bool:
        """Whether ``nvmlInit`` has been called more often than ``nvmlShutdown``."""
        return self._init_count > 0

    # --- plumbing -------------------------------------------------------------------------

    def _injected(self, function: str, index: int | None) -> int | None:
        with self._lock:
            for failure in self._failures:
                if failure.function != function:
                    continue
                if failure.index is not None and failure.index != index:
                    continue
                if failure.times is not None:
                    if failure.times <= 0:
                        continue
                    failure.times -= 1
                return failure.code
        return None

    def _enter(self, function: str, index: int | None = None, needs_init: bool = True) -> None:
        self.calls[function] += 1
        if needs_init and self._init_count <= 0:
            raise N.nvml_error(N.ERROR_UNINITIALIZED)
        if self._failures:
            code = self._injected(function, index)
            if code is not None:
                raise N.nvml_error(code)

    def _now(self) -> float:
        now = self.clock()
        if 0.0 <= now - self._instant < SAME_INSTANT_S:
            return self._instant
        self._instant = now
        return now

    def _device(self, function: str, handle: Any) -> SimGpuState:
        index = handle.index if type(handle) is FakeHandle else None
        self._enter(function, index)
        if index is None or not 0 <= index < len(self.gpus):
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        now = self._now()
        changes = self.gpus.changes
        seen = self._seen
        # Read the counter first: a change racing this read only costs one more states() call.
        if seen is None or seen[0] != now or seen[1] != changes:
            seen = self._seen = (now, changes, self.gpus.states(now))
        state = seen[2][index]
        if state.lost:
            raise N.nvml_error(N.ERROR_GPU_IS_LOST)
        return state

    @staticmethod
    def _bad_argument() -> NoReturn:
        raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)

    # --- lifecycle and system -------------------------------------------------------------

    def nvmlInit(self) -> None:
        """Initialise (counted)."""
        self._enter("nvmlInit", needs_init=False)
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        """Shut down (counted); ``UNINITIALIZED`` when not initialised."""
        self._enter("nvmlShutdown")
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """Driver version."""
        self._enter("nvmlSystemGetDriverVersion")
        return DRIVER_VERSION

    def nvmlSystemGetNVMLVersion(self) -> str:
        """NVML version."""
        self._enter("nvmlSystemGetNVMLVersion")
        return NVML_VERSION

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        """CUDA driver version as 1000*major + 10*minor."""
        self._enter("nvmlSystemGetCudaDriverVersion")
        return CUDA_DRIVER_VERSION

    def nvmlDeviceGetCount(self) -> int:
        """Number of simulated GPUs."""
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        """A handle; ``GPU_IS_LOST`` for a lost GPU."""
        self._enter("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self.gpus):
            self._bad_argument()
        if self.gpus.gpus[index].lost:
            raise N.nvml_error(N.ERROR_GPU_IS_LOST)
        return FakeHandle(index)

    # --- static ---------------------------------------------------------------------------

    def nvmlDeviceGetName(self, handle: Any) -> str:
        """Board name."""
        self._device("nvmlDeviceGetName", handle)
        return self.gpus.spec.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """Board UUID."""
        return self._device("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetPciInfo(self, handle: Any) -> FakePciInfo:
        """PCI info (bus id as bytes, like the ctypes struct)."""
        return FakePciInfo(self._device("nvmlDeviceGetPciInfo", handle).pci_bus_id.encode())

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, clock_type: int) -> int:
        """Maximum SM or memory clock, MHz."""
        return self._clock_limit("nvmlDeviceGetMaxClockInfo", handle, clock_type)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        """Maximum PCIe generation."""
        self._device("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return self.gpus.spec.max_pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        """Maximum PCIe width."""
        self._device("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return self.gpus.spec.max_pcie_width

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        """Slowdown or shutdown temperature, °C."""
        self._device("nvmlDeviceGetTemperatureThreshold", handle)
        if threshold == N.TEMPERATURE_THRESHOLD_SLOWDOWN:
            return self.gpus.spec.slowdown_temp_c
        if threshold == N.TEMPERATURE_THRESHOLD_SHUTDOWN:
            return self.gpus.spec.shutdown_temp_c
        raise N.nvml_error(N.ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        """Default power limit, mW."""
        self._device("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        return int(self.gpus.spec.power_limit_w * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        """Enforced power limit (follows ``SimGpus.set_power_limit``), mW."""
        state = self._device("nvmlDeviceGetEnforcedPowerLimit", handle)
        return int(self.gpus.gpus[state.index].power_limit_w * 1000)

    def _clock_limit(self, function: str, handle: Any, clock_type: int) -> int:
        self._device(function, handle)
        if clock_type == N.CLOCK_SM:
            return self.gpus.spec.max_sm_clock_mhz
        if clock_type == N.CLOCK_MEM:
            return self.gpus.spec.max_mem_clock_mhz
        self._bad_argument()

    # --- fast -----------------------------------------------------------------------------

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        """Current SM or memory clock, MHz."""
        state = self._device("nvmlDeviceGetClockInfo", handle)
        if clock_type == N.CLOCK_SM:
            return state.sm_clock_mhz
        if clock_type == N.CLOCK_MEM:
            return state.mem_clock_mhz
        self._bad_argument()

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """GPU temperature, °C (deprecated API)."""
        state = self._device("nvmlDeviceGetTemperature", handle)
        if sensor != N.TEMPERATURE_GPU:
            self._bad_argument()
        return round(state.temp_c)

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int = 0) -> int:
        """GPU temperature, °C."""
        state = self._device("nvmlDeviceGetTemperatureV", handle)
        if sensor != N.TEMPERATURE_GPU:
            self._bad_argument()
        return round(state.temp_c)

    def nvmlDeviceGetFieldValues(
        self, handle: Any, field_ids: Sequence[int]
    ) -> list[FakeFieldValue]:
        """Field values, each with its own ``nvmlReturn`` and value type, as the driver gives.

        Supported: memory temperature, instant power, total energy and the power and thermal
        perf-policy (violation) counters; any other id is ``NOT_SUPPORTED``. ``fail("field:ID")``
        sets one field's return code.
        """
        state = self._device("nvmlDeviceGetFieldValues", handle)
        stamp = int(self.clock() * 1e6)
        out: list[FakeFieldValue] = []
        for field_id in field_ids:
            code = self._injected(f"field:{field_id}", state.index) if self._failures else None
            read = _FIELDS.get(field_id)
            if code is None and read is not None:
                value_type, value = read(state)
                out.append(FakeFieldValue(field_id, N.SUCCESS, value_type, value, stamp))
            else:
                code = N.ERROR_NOT_SUPPORTED if code is None else code
                out.append(FakeFieldValue(field_id, code, 0, _NO_VALUE, stamp))
        return out

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Power draw, mW."""
        return round(self._device("nvmlDeviceGetPowerUsage", handle).power_w * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        """Energy since driver load, mJ."""
        state = self._device("nvmlDeviceGetTotalEnergyConsumption", handle)
        return int(state.energy_j * 1000)

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        """P-state (0: maximum performance)."""
        return self._device("nvmlDeviceGetPerformanceState", handle).pstate

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        """Clock-event reason bitmask."""
        return self._device("nvmlDeviceGetCurrentClocksEventReasons", handle).reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        """Clock-event reason bitmask (older name)."""
        return self._device("nvmlDeviceGetCurrentClocksThrottleReasons", handle).reasons

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> FakeUtilization:
        """GPU and memory utilisation, %."""
        state = self._device("nvmlDeviceGetUtilizationRates", handle)
        return FakeUtilization(gpu=state.util_gpu_pct, memory=state.util_mem_pct)

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> FakeMemory:
        """Memory total/free/used, bytes."""
        state = self._device("nvmlDeviceGetMemoryInfo", handle)
        total = self.gpus.spec.mem_total_bytes
        used = min(state.mem_used_bytes, total)
        return FakeMemory(total=total, free=total - used, used=used)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        """Current PCIe generation."""
        return self._device("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        """Current PCIe width."""
        return self._device("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width

    def nvmlDeviceGetViolationStatus(self, handle: Any, policy: int) -> FakeViolationTime:
        """Cumulative time under the power or thermal policy, ns."""
        state = self._device("nvmlDeviceGetViolationStatus", handle)
        ref = int(self.clock() * 1e9)
        if policy == N.PERF_POLICY_POWER:
            return FakeViolationTime(ref, state.power_violation_ns)
        if policy == N.PERF_POLICY_THERMAL:
            return FakeViolationTime(ref, state.thermal_violation_ns)
        raise N.nvml_error(N.ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetFanSpeed(self, handle: Any) -> int:
        """Fan speed: NOT_SUPPORTED unless ``fan_supported`` (passively cooled boards)."""
        state = self._device("nvmlDeviceGetFanSpeed", handle)
        if not self.fan_supported:
            raise N.nvml_error(N.ERROR_NOT_SUPPORTED)
        return min(100, max(30, int(state.temp_c)))

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:
        """PCIe throughput, KB/s (slow on real hardware; the sampler must not call it)."""
        self._device("nvmlDeviceGetPcieThroughput", handle)
        return 0

    # --- clock policy ---------------------------------------------------------------------

    def _policy(self, function: str, handle: Any) -> SimGpuState:
        state = self._device(function, handle)
        if not self.policy_supported:
            raise N.nvml_error(N.ERROR_NOT_SUPPORTED)
        return state

    def _max_clock(self, clock_type: int) -> int:
        if clock_type == N.CLOCK_SM:
            return self.gpus.spec.max_sm_clock_mhz
        if clock_type == N.CLOCK_MEM:
            return self.gpus.spec.max_mem_clock_mhz
        raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)

    def _record(self, function: str, index: int, *args: int) -> None:
        self.clock_calls.append((function, index, *args))
        ledger = os.environ.get(LEDGER_ENV)
        if ledger:
            with open(ledger, "a", encoding="utf-8") as f:
                f.write(json.dumps([function, index, *args, os.getpid()]) + "\n")

    def _setter(self, function: str, handle: Any) -> int:
        state = self._policy(function, handle)
        if not self.privileged:
            raise N.nvml_error(N.ERROR_NO_PERMISSION)
        return state.index

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        """Persistence mode (1: enabled)."""
        self._policy("nvmlDeviceGetPersistenceMode", handle)
        return 1

    def nvmlDeviceGetApplicationsClock(self, handle: Any, clock_type: int) -> int:
        """Application clock, MHz (the maximum, as on a board nobody has tuned, unless
        ``SimGpus.set_app_clocks`` set one)."""
        state = self._policy("nvmlDeviceGetApplicationsClock", handle)
        top = self._max_clock(clock_type)
        app = self.gpus.gpus[state.index].app_clocks_mhz
        if app is None:
            return top
        return app[0] if clock_type == N.CLOCK_SM else app[1]

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: Any, clock_type: int) -> int:
        """Default application clock, MHz."""
        self._policy("nvmlDeviceGetDefaultApplicationsClock", handle)
        return self._max_clock(clock_type)

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        """The power limit set (follows ``SimGpus.set_power_limit``), mW."""
        state = self._policy("nvmlDeviceGetPowerManagementLimit", handle)
        return int(self.gpus.gpus[state.index].power_limit_w * 1000)

    # --- clock sets (root only) -----------------------------------------------------------

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, lo: int, hi: int) -> None:
        """Lock the GPU (SM) clock between ``lo`` and ``hi`` MHz."""
        index = self._setter("nvmlDeviceSetGpuLockedClocks", handle)
        self.locked[(index, N.CLOCK_SM)] = (lo, hi)
        self._record("nvmlDeviceSetGpuLockedClocks", index, lo, hi)

    def nvmlDeviceSetMemoryLockedClocks(self, handle: Any, lo: int, hi: int) -> None:
        """Lock the memory clock between ``lo`` and ``hi`` MHz."""
        index = self._setter("nvmlDeviceSetMemoryLockedClocks", handle)
        self.locked[(index, N.CLOCK_MEM)] = (lo, hi)
        self._record("nvmlDeviceSetMemoryLockedClocks", index, lo, hi)

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:
        """Unlock the GPU clock."""
        index = self._setter("nvmlDeviceResetGpuLockedClocks", handle)
        self.locked.pop((index, N.CLOCK_SM), None)
        self._record("nvmlDeviceResetGpuLockedClocks", index)

    def nvmlDeviceResetMemoryLockedClocks(self, handle: Any) -> None:
        """Unlock the memory clock."""
        index = self._setter("nvmlDeviceResetMemoryLockedClocks", handle)
        self.locked.pop((index, N.CLOCK_MEM), None)
        self._record("nvmlDeviceResetMemoryLockedClocks", index)

    # --- GPM ------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> FakeGpmSupport:
        """Whether the board has GPM (``gpm_supported``)."""
        self._device("nvmlGpmQueryDeviceSupport", handle)
        return FakeGpmSupport(version=1, isSupportedDevice=int(self.gpm_supported))

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:
        """A new, empty sample (counted until freed)."""
        self._enter("nvmlGpmSampleAlloc")
        self.gpm_samples_live += 1
        return FakeGpmSample()

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Free ``sample``; ``INVALID_ARGUMENT`` for one not allocated here or freed twice."""
        self._enter("nvmlGpmSampleFree")
        if type(sample) is not FakeGpmSample or sample.freed:
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        sample.freed = True
        self.gpm_samples_live -= 1

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> FakeGpmSample:
        """Fill ``sample`` with the board's counters now."""
        state = self._device("nvmlGpmSampleGet", handle)
        if not self.gpm_supported:
            raise N.nvml_error(N.ERROR_NOT_SUPPORTED)
        if type(sample) is not FakeGpmSample or sample.freed:
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        sample.index = state.index
        sample.t = self._instant
        sample.dram_busy_s = state.dram_busy_s
        return sample

    def nvmlGpmMetricsGet(self, get: Any) -> FakeGpmMetricsGet:
        """Compute ``get.metrics[:numMetrics]`` between ``get.sample1`` and ``get.sample2``."""
        self._enter("nvmlGpmMetricsGet")
        if type(get) is not FakeGpmMetricsGet:
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        if get.version != N.GPM_METRICS_GET_VERSION:
            raise N.nvml_error(N.ERROR_ARGUMENT_VERSION_MISMATCH)
        one, two = get.sample1, get.sample2
        if (
            type(one) is not FakeGpmSample
            or type(two) is not FakeGpmSample
            or one.index is None
            or one.index != two.index
            or not 0 < get.numMetrics <= len(get.metrics)
        ):
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        span = two.t - one.t
        for metric in get.metrics[: get.numMetrics]:
            if metric.metricId != N.GPM_METRIC_DRAM_BW_UTIL:
                metric.nvmlReturn = N.ERROR_NOT_SUPPORTED
                metric.value = 0.0
                continue
            metric.nvmlReturn = N.SUCCESS
            busy = two.dram_busy_s - one.dram_busy_s
            metric.value = 100.0 * busy / span if span > 0 else 0.0
        return get


_NO_VALUE = FakeValue()

_FIELDS: dict[int, Callable[[SimGpuState], tuple[int, FakeValue]]] = {
    # Value types as the driver reports them for these ids.
    N.FI_DEV_MEMORY_TEMP: lambda s: (
        N.VALUE_TYPE_UNSIGNED_INT,
        FakeValue(uiVal=round(s.hbm_temp_c)),
    ),
    N.FI_DEV_POWER_INSTANT: lambda s: (
        N.VALUE_TYPE_UNSIGNED_INT,
        FakeValue(uiVal=round(s.power_w * 1000)),
    ),
    N.FI_DEV_TOTAL_ENERGY_CONSUMPTION: lambda s: (
        N.VALUE_TYPE_UNSIGNED_LONG_LONG,
        FakeValue(ullVal=int(s.energy_j * 1000)),
    ),
    N.FI_DEV_PERF_POLICY_POWER: lambda s: (
        N.VALUE_TYPE_UNSIGNED_LONG_LONG,
        FakeValue(ullVal=s.power_violation_ns),
    ),
    N.FI_DEV_PERF_POLICY_THERMAL: lambda s: (
        N.VALUE_TYPE_UNSIGNED_LONG_LONG,
        FakeValue(ullVal=s.thermal_violation_ns),
    ),
}
