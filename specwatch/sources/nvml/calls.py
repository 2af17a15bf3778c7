"""The NVML calls specwatch makes per GPU and the conversions of their answers.

Each :class:`NvmlCall` names the functions to try in order (newer first, older drivers lack
them) and the sample fields it fills; each :class:`FieldRead` is one value of the per-tick
``nvmlDeviceGetFieldValues`` call, with the classic call to use where the driver lacks it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specwatch.sources.nvml.binding import (
    CLOCK_MEM,
    CLOCK_SM,
    FI_DEV_MEMORY_TEMP,
    FI_DEV_PERF_POLICY_POWER,
    FI_DEV_PERF_POLICY_THERMAL,
    FI_DEV_POWER_INSTANT,
    FI_DEV_TOTAL_ENERGY_CONSUMPTION,
    PERF_POLICY_POWER,
    PERF_POLICY_THERMAL,
    TEMPERATURE_GPU,
    TEMPERATURE_THRESHOLD_SHUTDOWN,
    TEMPERATURE_THRESHOLD_SLOWDOWN,
    VALUE_TYPE_DOUBLE,
    VALUE_TYPE_SIGNED_INT,
    VALUE_TYPE_SIGNED_LONG_LONG,
    VALUE_TYPE_UNSIGNED_INT,
    VALUE_TYPE_UNSIGNED_LONG,
    VALUE_TYPE_UNSIGNED_LONG_LONG,
    VALUE_TYPE_UNSIGNED_SHORT,
)


class Unavailable:
    """Marker for a reading that did not come back this tick (its reason is already recorded)."""


UNAVAILABLE = Unavailable()


@dataclass(frozen=True, slots=True)
class NvmlCall:
    """One NVML device read: which functions to try, their arguments, the fields it fills."""

    key: str
    functions: tuple[str, ...]
    fields: tuple[str, ...]
    args: tuple[Any, ...] = ()
    """Arguments after the handle."""
    converts: tuple[Callable[[Any], Any], ...] = ()
    """How the answer becomes each of ``fields``, in order."""


@dataclass(frozen=True, slots=True)
class FieldRead:
    """One per-tick reading taken by ``nvmlDeviceGetFieldValues``.

    ``backup`` names the call (in ``BACKUP_CALLS``) that reads the same thing the classic way,
    made when the driver does not give the field or failed it this tick.
    """

    field_id: int
    name: str
    convert: Callable[[Any], Any]
    backup: str | None


def _milli(value: float) -> float:
    return value / 1000.0


def _gpu_util(u: Any) -> int:
    return int(u.gpu)


def _mem_util(u: Any) -> int:
    return int(u.memory)


def _used(m: Any) -> int:
    return int(m.used)


def _total(m: Any) -> int:
    return int(m.total)


def _violation(v: Any) -> int:
    return int(v.violationTime)


def opt(convert: Callable[[Any], Any], raw: Any) -> Any:
    """``convert(raw)``; ``None`` for an unavailable reading or a failed conversion."""
    return None if raw is UNAVAILABLE else safe(convert, raw)


def safe(convert: Callable[[Any], Any], raw: Any) -> Any:
    """``convert(raw)``, or ``None`` when the conversion fails."""
    try:
        return convert(raw)
    except Exception:
        return None


def as_text(value: Any) -> str:
    """NVML strings come as ``bytes`` from older bindings."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def mw_to_w(value: Any) -> float:
    """Milliwatts to watts."""
    return int(value) / 1000.0


def positive_int(value: Any) -> int | None:
    """An integer above 0, else ``None``."""
    number = int(value)
    return number if number > 0 else None


TICK_CALLS: tuple[NvmlCall, ...] = (
    # Made every tick (after the field values), in this order.
    NvmlCall("sm_clock", ("nvmlDeviceGetClockInfo",), ("sm_clock_mhz",), (CLOCK_SM,), (int,)),
    NvmlCall("mem_clock", ("nvmlDeviceGetClockInfo",), ("mem_clock_mhz",), (CLOCK_MEM,), (int,)),
    NvmlCall(
        "temp",
        ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
        ("temp_c",),
        (TEMPERATURE_GPU,),
        (int,),
    ),
    NvmlCall("pstate", ("nvmlDeviceGetPerformanceState",), ("pstate",), (), (int,)),
    NvmlCall(
        "reasons",
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        ("clock_event_reasons",),
        (),
        (int,),
    ),
    NvmlCall(
        "util",
        ("nvmlDeviceGetUtilizationRates",),
        ("util_gpu_pct", "util_mem_pct"),
        (),
        (_gpu_util, _mem_util),
    ),
    NvmlCall(
        "memory",
        ("nvmlDeviceGetMemoryInfo",),
        ("mem_used_bytes", "mem_total_bytes"),
        (),
        (_used, _total),
    ),
    NvmlCall("pcie_gen", ("nvmlDeviceGetCurrPcieLinkGeneration",), ("pcie_gen",), (), (int,)),
    NvmlCall("pcie_width", ("nvmlDeviceGetCurrPcieLinkWidth",), ("pcie_width",), (), (int,)),
)

BACKUP_CALLS: dict[str, NvmlCall] = {
    c.key: c
    for c in (
        NvmlCall("power_usage", ("nvmlDeviceGetPowerUsage",), ("power_w",), (), (mw_to_w,)),
        NvmlCall(
            "energy",
            ("nvmlDeviceGetTotalEnergyConsumption",),
            ("energy_j",),
            (),
            (_milli,),
        ),
        NvmlCall(
            "violation_power",
            ("nvmlDeviceGetViolationStatus",),
            ("power_violation_ns",),
            (PERF_POLICY_POWER,),
            (_violation,),
        ),
        NvmlCall(
            "violation_thermal",
            ("nvmlDeviceGetViolationStatus",),
            ("thermal_violation_ns",),
            (PERF_POLICY_THERMAL,),
            (_violation,),
        ),
    )
}
"""The classic calls for what the field values read, by key."""

FIELD_READS: tuple[FieldRead, ...] = (
    # One nvmlDeviceGetFieldValues call per GPU per tick reads these (one driver round trip
    # instead of five); the value type comes with each value.
    FieldRead(FI_DEV_MEMORY_TEMP, "hbm_temp_c", int, None),
    FieldRead(FI_DEV_POWER_INSTANT, "power_w", _milli, "power_usage"),
    FieldRead(FI_DEV_TOTAL_ENERGY_CONSUMPTION, "energy_j", _milli, "energy"),
    FieldRead(FI_DEV_PERF_POLICY_POWER, "power_violation_ns", int, "violation_power"),
    FieldRead(FI_DEV_PERF_POLICY_THERMAL, "thermal_violation_ns", int, "violation_thermal"),
)

FIELD_VALUES_CALL = NvmlCall("field_values", ("nvmlDeviceGetFieldValues",), ())
FAN_CALL = NvmlCall("fan", ("nvmlDeviceGetFanSpeed",), ("fan_pct",), (), (int,))


STATIC_READS: tuple[tuple[str, str, tuple[Any, ...], Callable[[Any], Any]], ...] = (
    # (GpuStatic field, NVML function, its arguments after the handle, conversion)
    ("name", "nvmlDeviceGetName", (), as_text),
    ("uuid", "nvmlDeviceGetUUID", (), as_text),
    ("pci_bus_id", "nvmlDeviceGetPciInfo", (), lambda v: as_text(v.busId)),
    ("max_sm_clock_mhz", "nvmlDeviceGetMaxClockInfo", (CLOCK_SM,), int),
    ("max_mem_clock_mhz", "nvmlDeviceGetMaxClockInfo", (CLOCK_MEM,), int),
    ("max_pcie_gen", "nvmlDeviceGetMaxPcieLinkGeneration", (), int),
    ("max_pcie_width", "nvmlDeviceGetMaxPcieLinkWidth", (), int),
    (
        "slowdown_temp_c",
        "nvmlDeviceGetTemperatureThreshold",
        (TEMPERATURE_THRESHOLD_SLOWDOWN,),
        int,
    ),
    (
        "shutdown_temp_c",
        "nvmlDeviceGetTemperatureThreshold",
        (TEMPERATURE_THRESHOLD_SHUTDOWN,),
        int,
    ),
    ("persistence_mode", "nvmlDeviceGetPersistenceMode", (), lambda v: bool(int(v))),
    ("power_default_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit", (), mw_to_w),
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", (), mw_to_w),
    ("app_sm_clock_mhz", "nvmlDeviceGetApplicationsClock", (CLOCK_SM,), positive_int),
    ("app_mem_clock_mhz", "nvmlDeviceGetApplicationsClock", (CLOCK_MEM,), positive_int),
    (
        "default_app_sm_clock_mhz",
        "nvmlDeviceGetDefaultApplicationsClock",
        (CLOCK_SM,),
        positive_int,
    ),
    (
        "default_app_mem_clock_mhz",
        "nvmlDeviceGetDefaultApplicationsClock",
        (CLOCK_MEM,),
        positive_int,
    ),
)


VALUE_ATTR = {
    VALUE_TYPE_DOUBLE: "dVal",
    VALUE_TYPE_UNSIGNED_INT: "uiVal",
    VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    VALUE_TYPE_SIGNED_INT: "siVal",
    VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}
