"""The NVML calls specwatch makes per GPU and the conversions of their answers.

Each :class:`NvmlCall` names the functions to try in order (newer first, older drivers lack
them) and the sample fields it fills.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specwatch.sources.nvml_binding import (
    CLOCK_MEM,
    CLOCK_SM,
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
    """One NVML device read: which functions to try and which sample fields it fills."""

    key: str
    functions: tuple[str, ...]
    fields: tuple[str, ...]


def device_calls() -> dict[str, NvmlCall]:
    """Every per-tick device call, by key."""
    calls = [
        NvmlCall("sm_clock", ("nvmlDeviceGetClockInfo",), ("sm_clock_mhz",)),
        NvmlCall("mem_clock", ("nvmlDeviceGetClockInfo",), ("mem_clock_mhz",)),
        NvmlCall("temp", ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"), ("temp_c",)),
        NvmlCall("power_usage", ("nvmlDeviceGetPowerUsage",), ("power_w",)),
        NvmlCall("energy", ("nvmlDeviceGetTotalEnergyConsumption",), ("energy_j",)),
        NvmlCall("pstate", ("nvmlDeviceGetPerformanceState",), ("pstate",)),
        NvmlCall(
            "reasons",
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            ("clock_event_reasons",),
        ),
        NvmlCall("util", ("nvmlDeviceGetUtilizationRates",), ("util_gpu_pct", "util_mem_pct")),
        NvmlCall("memory", ("nvmlDeviceGetMemoryInfo",), ("mem_used_bytes", "mem_total_bytes")),
        NvmlCall("pcie_gen", ("nvmlDeviceGetCurrPcieLinkGeneration",), ("pcie_gen",)),
        NvmlCall("pcie_width", ("nvmlDeviceGetCurrPcieLinkWidth",), ("pcie_width",)),
        NvmlCall("violation_power", ("nvmlDeviceGetViolationStatus",), ("power_violation_ns",)),
        NvmlCall("violation_thermal", ("nvmlDeviceGetViolationStatus",), ("thermal_violation_ns",)),
        NvmlCall("fan", ("nvmlDeviceGetFanSpeed",), ("fan_pct",)),
    ]
    return {c.key: c for c in calls}


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


def field_number(fv: Any) -> float | None:
    """The number in an ``nvmlFieldValue_t`` by its value type; ``None`` when it failed."""
    attr = VALUE_ATTR.get(int(getattr(fv, "valueType", -1)))
    if attr is None:
        return None
    try:
        return float(getattr(fv.value, attr))
    except Exception:
        return None
