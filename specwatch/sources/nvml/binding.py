"""The NVML binding: the only module in specwatch that imports ``pynvml``.

NVML's constants (clock types, field ids, error codes) come from the real ``pynvml`` here and
are re-exported, so the fake NVML of the simulator speaks the same numbers without importing
it; also NVML errors, their texts, and a call-counting wrapper for overhead checks.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pynvml

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


__all__ = [
    "CLOCK_MEM",
    "CLOCK_SM",
    "ERROR_ARGUMENT_VERSION_MISMATCH",
    "ERROR_DRIVER_NOT_LOADED",
    "ERROR_FUNCTION_NOT_FOUND",
    "ERROR_GPU_IS_LOST",
    "ERROR_INVALID_ARGUMENT",
    "ERROR_LIBRARY_NOT_FOUND",
    "ERROR_NOT_SUPPORTED",
    "ERROR_NO_PERMISSION",
    "ERROR_TIMEOUT",
    "ERROR_UNINITIALIZED",
    "ERROR_UNKNOWN",
    "FALLBACK_CODES",
    "FIELD_UNSUPPORTED_CODES",
    "FI_DEV_MEMORY_TEMP",
    "FI_DEV_PERF_POLICY_POWER",
    "FI_DEV_PERF_POLICY_THERMAL",
    "FI_DEV_POWER_INSTANT",
    "FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "GPM_METRICS_GET_VERSION",
    "GPM_METRIC_DRAM_BW_UTIL",
    "PERF_POLICY_POWER",
    "PERF_POLICY_THERMAL",
    "SUCCESS",
    "TEMPERATURE_GPU",
    "TEMPERATURE_THRESHOLD_SHUTDOWN",
    "TEMPERATURE_THRESHOLD_SLOWDOWN",
    "UNSUPPORTED_CODES",
    "VALUE_TYPE_DOUBLE",
    "VALUE_TYPE_SIGNED_INT",
    "VALUE_TYPE_SIGNED_LONG_LONG",
    "VALUE_TYPE_UNSIGNED_INT",
    "VALUE_TYPE_UNSIGNED_LONG",
    "VALUE_TYPE_UNSIGNED_LONG_LONG",
    "VALUE_TYPE_UNSIGNED_SHORT",
    "CountingNvml",
    "NVMLError",
    "describe",
    "error_code",
    "error_text",
    "nvml_error",
    "real_nvml",
]
