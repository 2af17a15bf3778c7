"""The NVML binding: the only module in specwatch that imports ``pynvml``, and what is asked of it.

NVML's constants (clock types, field ids, error codes) come from the real ``pynvml`` here and
are re-exported, so the fake NVML of the simulator speaks the same numbers without importing
it; also NVML errors, their texts, and a call-counting wrapper for overhead checks.

Then the calls specwatch makes per GPU and the conversions of their answers: each
:class:`NvmlCall` names the functions to try in order (newer first, older drivers lack them)
and the sample fields it fills; each :class:`FieldRead` is one value of the per-tick
``nvmlDeviceGetFieldValues`` call, with the classic call to use where the driver lacks it. A
:class:`BoundCall` looks its function up once per GPU (and again only when a fallback chain
moves on), so a tick makes each NVML call without a lookup or a key built per call.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from specwatch.core.gpu import GpuSample

# NVML constants, re-exported so the fake speaks the same numbers without importing pynvml.
CLOCK_SM: int = pynvml.NVML_CLOCK_SM
CLOCK_MEM: int = pynvml.NVML_CLOCK_MEM
TEMPERATURE_GPU: int = pynvml.NVML_TEMPERATURE_GPU
TEMPERATURE_THRESHOLD_SHUTDOWN: int = pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
TEMPERATURE_THRESHOLD_SLOWDOWN: int = pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
PERF_POLICY_POWER: int = pynvml.NVML_PERF_POLICY_POWER
PERF_POLICY_THERMAL: int = pynvml.NVML_PERF_POLICY_THERMAL
FI_DEV_MEMORY_TEMP: int = pynvml.NVML_FI_DEV_MEMORY_TEMP
FI_DEV_POWER_INSTANT: int = pynvml.NVML_FI_DEV_POWER_INSTANT
FI_DEV_TOTAL_ENERGY_CONSUMPTION: int = pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
FI_DEV_PERF_POLICY_POWER: int = pynvml.NVML_FI_DEV_PERF_POLICY_POWER
"""Nanoseconds held back by the power limit: the counter ``nvmlDeviceGetViolationStatus`` reads."""
FI_DEV_PERF_POLICY_THERMAL: int = pynvml.NVML_FI_DEV_PERF_POLICY_THERMAL
VALUE_TYPE_DOUBLE: int = pynvml.NVML_VALUE_TYPE_DOUBLE
VALUE_TYPE_UNSIGNED_INT: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
VALUE_TYPE_UNSIGNED_LONG: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG
VALUE_TYPE_UNSIGNED_LONG_LONG: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
VALUE_TYPE_SIGNED_LONG_LONG: int = pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG
VALUE_TYPE_SIGNED_INT: int = pynvml.NVML_VALUE_TYPE_SIGNED_INT
VALUE_TYPE_UNSIGNED_SHORT: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT

GPM_METRIC_DRAM_BW_UTIL: int = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
"""GPM's DRAM bandwidth used against the board's peak, as a percentage (0-100)."""
GPM_METRICS_GET_VERSION: int = pynvml.NVML_GPM_METRICS_GET_VERSION

SUCCESS: int = pynvml.NVML_SUCCESS
ERROR_UNINITIALIZED: int = pynvml.NVML_ERROR_UNINITIALIZED
ERROR_INVALID_ARGUMENT: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
ERROR_NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
ERROR_NO_PERMISSION: int = pynvml.NVML_ERROR_NO_PERMISSION
ERROR_DRIVER_NOT_LOADED: int = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
ERROR_TIMEOUT: int = pynvml.NVML_ERROR_TIMEOUT
ERROR_LIBRARY_NOT_FOUND: int = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
ERROR_FUNCTION_NOT_FOUND: int = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
ERROR_GPU_IS_LOST: int = pynvml.NVML_ERROR_GPU_IS_LOST
ERROR_ARGUMENT_VERSION_MISMATCH: int = getattr(pynvml, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 25)
ERROR_UNKNOWN: int = pynvml.NVML_ERROR_UNKNOWN

NVMLError: type[Exception] = pynvml.NVMLError

UNSUPPORTED_CODES = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND})
# A field id the driver does not know comes back per value as INVALID_ARGUMENT.
FIELD_UNSUPPORTED_CODES = UNSUPPORTED_CODES | {ERROR_INVALID_ARGUMENT}
# Codes after which the next function in a fallback chain is tried.
FALLBACK_CODES = frozenset({ERROR_FUNCTION_NOT_FOUND, ERROR_ARGUMENT_VERSION_MISMATCH})


def nvml_error(code: int) -> Exception:
    """A real ``pynvml.NVMLError`` for ``code``: the matching subclass (``NVMLError_GpuIsLost``...).

    Args:
        code: An ``NVML_ERROR_*`` value.
    """
    err: Exception = pynvml.NVMLError(code)
    return err


def error_text(code: int) -> str:
    """The short text NVML gives for ``code`` (``"Not Supported"``, ``"GPU is lost"``...)."""
    try:
        return str(nvml_error(code))
    except Exception:
        return f"NVML error {code}"


def error_code(exc: BaseException) -> int | None:
    """The NVML error code of ``exc`` (``None`` when it is not an NVML error)."""
    if isinstance(exc, pynvml.NVMLError):
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None
    return None


def describe(exc: BaseException) -> str:
    """One line for an exception from an NVML call."""
    if isinstance(exc, pynvml.NVMLError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def real_nvml() -> Any:
    """The ``pynvml`` module itself, for a sampler given no other NVML."""
    return pynvml


class CountingNvml:
    """Wraps an NVML module-like object and counts the calls and time spent in each function.

    Used by the device check and overhead measurements to prove that static fields are read
    once, that ``nvmlInit`` runs once, and which calls cost what.

    Args:
        inner: The object to wrap (the real ``pynvml`` when ``None``).
    """

    def __init__(self, inner: object | None = None) -> None:
        self._inner: Any = pynvml if inner is None else inner
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        """Calls per function name."""
        self.seconds: dict[str, float] = {}
        """Wall seconds per function name."""

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target) or not name.startswith("nvml"):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                with self._lock:
                    self.calls[name] = self.calls.get(name, 0) + 1
                    self.seconds[name] = self.seconds.get(name, 0.0) + spent

        return counted


# --- what is asked of NVML, per GPU -----------------------------------------------------


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
    if raw is UNAVAILABLE:
        return None
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


_STATIC_READS: tuple[tuple[str, str, tuple[Any, ...], Callable[[Any], Any]], ...] = (
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
STATIC_CALLS: tuple[tuple[NvmlCall, Callable[[Any], Any]], ...] = tuple(
    (NvmlCall(f"static:{name}", (function,), (name,), args), convert)
    for name, function, args, convert in _STATIC_READS
)
"""The static fields' calls, each with the conversion of its answer."""


VALUE_ATTR = {
    VALUE_TYPE_DOUBLE: "dVal",
    VALUE_TYPE_UNSIGNED_INT: "uiVal",
    VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    VALUE_TYPE_SIGNED_INT: "siVal",
    VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


SAMPLE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuSample) if f.name not in {"index", "t", "lost", "missing"}
)
SLOT = {name: i for i, name in enumerate(SAMPLE_FIELDS)}
FAN_SLOT = SLOT["fan_pct"]
DRAM_SLOT = SLOT["dram_active"]
if [f.name for f in dataclasses.fields(GpuSample)] != [
    "index",
    "t",
    *SAMPLE_FIELDS,
    "lost",
    "missing",
]:  # pragma: no cover
    raise RuntimeError("GpuSample changed: NvmlReader builds samples positionally")


class GpuLost(Exception):
    """Raised inside a GPU's tick to abandon its remaining fields."""


@dataclass(frozen=True, slots=True)
class Failed:
    """A call that gave no value: why, and whether it will never be made again."""

    reason: str
    unsupported: bool


class NotInBinding(Exception):
    """Raised in place of a function this nvidia-ml-py does not have."""

    def __init__(self, function: str) -> None:
        super().__init__(function)
        self.function = function


def resolve(nv: Any, function: str) -> Callable[..., Any]:
    """``nv``'s ``function``, or a stand-in raising :class:`NotInBinding` when it lacks it."""
    fn: Callable[..., Any] | None = getattr(nv, function, None)
    if fn is not None:
        return fn

    def absent(*_: Any) -> Any:
        raise NotInBinding(function)

    return absent


class BoundCall:
    """One :class:`NvmlCall` for one GPU, its function in the fallback chain looked up once."""

    __slots__ = ("args", "call", "fn", "outs", "pos", "standing")

    def __init__(self, nv: Any, call: NvmlCall, standing: bool) -> None:
        self.call = call
        self.pos = 0
        self.fn = resolve(nv, call.functions[0])
        self.args = call.args
        # Static calls convert apart (their fields are not a sample's).
        self.outs = tuple(
            (SLOT[name], convert, name)
            for name, convert in zip(call.fields, call.converts, strict=False)
        )
        self.standing = standing
        """Whether a "n/s" answer is a standing reason (else: this tick's only)."""
