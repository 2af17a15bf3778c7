"""The structures the fake NVML returns, shaped like pynvml's ``c_nvml*`` types.

Only the members specwatch reads are here; names follow pynvml (``busId``, ``violationTime``),
so the reader cannot tell them from the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FakeHandle:
    """What ``nvmlDeviceGetHandleByIndex`` returns."""

    index: int


@dataclass(frozen=True, slots=True)
class FakePciInfo:
    """The part of ``nvmlPciInfo_t`` specwatch reads (``busId`` is bytes, as in pynvml)."""

    busId: bytes


@dataclass(frozen=True, slots=True)
class FakeUtilization:
    """``c_nvmlUtilization_t``."""

    gpu: int
    memory: int


@dataclass(frozen=True, slots=True)
class FakeMemory:
    """``c_nvmlMemory_t``."""

    total: int
    free: int
    used: int


@dataclass(frozen=True, slots=True)
class FakeViolationTime:
    """``c_nvmlViolationTime_t`` (nanoseconds)."""

    referenceTime: int
    violationTime: int


@dataclass(frozen=True, slots=True)
class FakeValue:
    """``c_nvmlValue_t`` with the members specwatch may read."""

    dVal: float = 0.0
    uiVal: int = 0
    ulVal: int = 0
    ullVal: int = 0
    sllVal: int = 0
    siVal: int = 0
    usVal: int = 0


@dataclass(frozen=True, slots=True)
class FakeFieldValue:
    """``c_nvmlFieldValue_t``."""

    fieldId: int
    nvmlReturn: int
    valueType: int
    value: FakeValue
    timestamp: int = 0
    """Microseconds, when the driver took the value."""
    scopeId: int = 0
    latencyUsec: int = 0


__all__ = [
    "FakeFieldValue",
    "FakeHandle",
    "FakeMemory",
    "FakePciInfo",
    "FakeUtilization",
    "FakeValue",
    "FakeViolationTime",
]
