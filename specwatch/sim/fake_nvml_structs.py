"""The structures the fake NVML returns, shaped like pynvml's ``c_nvml*`` types.

Only the members specwatch reads are here; names follow pynvml (``busId``, ``violationTime``),
so the reader cannot tell them from the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True, slots=True)
class FakeGpmSupport:
    """``c_nvmlGpmSupport_t``."""

    version: int
    isSupportedDevice: int


@dataclass(slots=True)
class FakeGpmSample:
    """An opaque ``nvmlGpmSample_t``: which GPU, when, and its DRAM-busy counter (seconds)."""

    index: int | None = None
    t: float = 0.0
    dram_busy_s: float = 0.0
    freed: bool = False


@dataclass(slots=True)
class FakeGpmMetric:
    """``c_nvmlGpmMetric_t`` (without ``metricInfo``)."""

    metricId: int = 0
    nvmlReturn: int = 0
    value: float = 0.0


GPM_METRIC_SLOTS = 8
"""How many metric slots ``FakeGpmMetricsGet`` has (the real struct has ``NVML_GPM_METRIC_MAX``)."""


@dataclass(slots=True)
class FakeGpmMetricsGet:
    """``c_nvmlGpmMetricsGet_t``: filled in by the caller, answered by ``nvmlGpmMetricsGet``."""

    version: int = 0
    numMetrics: int = 0
    sample1: Any = None
    sample2: Any = None
    metrics: list[FakeGpmMetric] = field(
        default_factory=lambda: [FakeGpmMetric() for _ in range(GPM_METRIC_SLOTS)]
    )


__all__ = [
    "GPM_METRIC_SLOTS",
    "FakeFieldValue",
    "FakeGpmMetric",
    "FakeGpmMetricsGet",
    "FakeGpmSample",
    "FakeGpmSupport",
    "FakeHandle",
    "FakeMemory",
    "FakePciInfo",
    "FakeUtilization",
    "FakeValue",
    "FakeViolationTime",
]
