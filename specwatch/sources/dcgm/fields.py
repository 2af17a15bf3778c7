"""The DCGM fields specwatch reads: where each goes in its GPU samples and how it converts.

One home for the field table: the exporter parser (:mod:`specwatch.sources.dcgm.parse`), the
Prometheus queries for a fleet and the violation-share inference all read it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.sources.dcgm.parse import BLANK, NOT_EXPORTED, XID_GPU_FELL_OFF_BUS, DcgmGpu

MIB = 1024**2


@dataclass(frozen=True, slots=True)
class FieldMap:
    """One DCGM field: where it goes in specwatch's GPU samples and how it converts."""

    dcgm: str
    target: str
    """A ``GpuSample`` or ``GpuStatic`` attribute, or an ``extra:`` key."""
    scale: float = 1.0
    """Multiplier to specwatch's unit (MiB -> bytes 2^20, mJ -> J 1e-3)."""
    counter: bool = False
    """Cumulative 64-bit counter: only 64-bit sentinels apply (2^31 ns is a real reading)."""
    integer: bool = True
    help: str = ""


FIELDS: tuple[FieldMap, ...] = (
    FieldMap("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", help="SM clock frequency (in MHz)."),
    FieldMap("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", help="Memory clock frequency (in MHz)."),
    FieldMap("DCGM_FI_DEV_MAX_SM_CLOCK", "max_sm_clock_mhz", help="Maximum SM clock (in MHz)."),
    FieldMap(
        "DCGM_FI_DEV_MAX_MEM_CLOCK", "max_mem_clock_mhz", help="Maximum memory clock (in MHz)."
    ),
    FieldMap("DCGM_FI_DEV_APP_SM_CLOCK", "app_sm_clock_mhz", help="Application SM clock (in MHz)."),
    FieldMap(
        "DCGM_FI_DEV_APP_MEM_CLOCK", "app_mem_clock_mhz", help="Application memory clock (in MHz)."
    ),
    FieldMap(
        "DCGM_FI_DEV_PERSISTENCE_MODE", "persistence_mode", help="Persistence mode (1: enabled)."
    ),
    FieldMap("DCGM_FI_DEV_GPU_TEMP", "temp_c", help="GPU temperature (in C)."),
    FieldMap("DCGM_FI_DEV_MEMORY_TEMP", "hbm_temp_c", help="Memory temperature (in C)."),
    FieldMap("DCGM_FI_DEV_SLOWDOWN_TEMP", "slowdown_temp_c", help="Slowdown temperature (in C)."),
    FieldMap("DCGM_FI_DEV_SHUTDOWN_TEMP", "shutdown_temp_c", help="Shutdown temperature (in C)."),
    FieldMap("DCGM_FI_DEV_POWER_USAGE", "power_w", integer=False, help="Power draw (in W)."),
    FieldMap(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", integer=False, help="Power limit (in W)."
    ),
    FieldMap(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF",
        "power_default_limit_w",
        integer=False,
        help="Default power limit (in W).",
    ),
    FieldMap(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "energy_j",
        scale=1e-3,
        counter=True,
        integer=False,
        help="Total energy consumption since boot (in mJ).",
    ),
    FieldMap(
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "clock_event_reasons",
        help="Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*).",
    ),
    FieldMap("DCGM_FI_DEV_GPU_UTIL", "util_gpu_pct", help="GPU utilization (in %)."),
    FieldMap("DCGM_FI_DEV_MEM_COPY_UTIL", "util_mem_pct", help="Memory utilization (in %)."),
    FieldMap("DCGM_FI_DEV_FB_USED", "mem_used_bytes", scale=MIB, help="Framebuffer used (in MiB)."),
    FieldMap(
        "DCGM_FI_DEV_FB_TOTAL", "mem_total_bytes", scale=MIB, help="Framebuffer total (in MiB)."
    ),
    FieldMap("DCGM_FI_DEV_FB_FREE", "extra:fb_free", scale=MIB, help="Framebuffer free (in MiB)."),
    FieldMap("DCGM_FI_DEV_PCIE_LINK_GEN", "pcie_gen", help="PCIe link generation."),
    FieldMap("DCGM_FI_DEV_PCIE_LINK_WIDTH", "pcie_width", help="PCIe link width."),
    FieldMap("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "max_pcie_gen", help="Maximum PCIe generation."),
    FieldMap("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "max_pcie_width", help="Maximum PCIe link width."),
    FieldMap("DCGM_FI_DEV_FAN_SPEED", "fan_pct", help="Fan speed (in %)."),
    FieldMap(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "dram_active",
        integer=False,
        help="Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    FieldMap(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "tensor_active",
        integer=False,
        help="Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    # The violation counters are nanoseconds, as NVML's violationTime: DCGM's field reference
    # says so; the "(in us)" of dcgm-exporter's stock CSV was a wrong comment (fixed there in
    # late 2025), and scaling by 1000 made 0.1% of throttling read as 100%.
    FieldMap(
        "DCGM_FI_DEV_POWER_VIOLATION",
        "power_violation_ns",
        counter=True,
        help="Throttling duration due to power constraints (in ns).",
    ),
    FieldMap(
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "thermal_violation_ns",
        counter=True,
        help="Throttling duration due to thermal constraints (in ns).",
    ),
    FieldMap(
        "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
        "extra:sync_boost_violation_ns",
        counter=True,
        help="Throttling duration due to sync-boost constraints (in ns).",
    ),
    FieldMap(
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
        "extra:board_limit_violation_ns",
        counter=True,
        help="Throttling duration due to board limit constraints (in ns).",
    ),
    FieldMap(
        "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
        "extra:low_util_violation_ns",
        counter=True,
        help="Throttling duration due to low utilization (in ns).",
    ),
    FieldMap(
        "DCGM_FI_DEV_RELIABILITY_VIOLATION",
        "extra:reliability_violation_ns",
        counter=True,
        help="Throttling duration due to reliability constraints (in ns).",
    ),
    FieldMap("DCGM_FI_DEV_XID_ERRORS", "extra:xid", help="Value of the last XID error."),
    FieldMap(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "extra:pcie_replay",
        counter=True,
        help="Total number of PCIe retries.",
    ),
)
BY_NAME: dict[str, FieldMap] = {f.dcgm: f for f in FIELDS}
OLD_NAMES: dict[str, str] = {
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
}
"""Older exporter names -> the current ones (same field 112, same bits)."""

VIOLATION_BITS: dict[str, int] = {
    "DCGM_FI_DEV_POWER_VIOLATION": 0x004,
    "DCGM_FI_DEV_THERMAL_VIOLATION": 0x020,
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": 0x010,
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": 0x200,
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": 0x400,
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": 0x001,
}
"""Violation counter -> the clock-event reason bit it stands for (``specwatch.core.gpu``)."""


# --- a GPU's DCGM values as specwatch's samples and static facts (pure: no I/O) ---------------


_NO_SOURCE = {
    "pstate": "n/s: dcgm-exporter has no P-state field",
    "locked_sm_clock_mhz": "n/s: DCGM has no locked-clock field",
    "locked_mem_clock_mhz": "n/s: DCGM has no locked-clock field",
}
_DEFAULT_APP = (
    ("default_app_sm_clock_mhz", "app_sm_clock_mhz", "max_sm_clock_mhz"),
    ("default_app_mem_clock_mhz", "app_mem_clock_mhz", "max_mem_clock_mhz"),
)
"""DCGM has no default-application-clock field. On the data-centre boards DCGM serves (A100 and
later) the default application clocks are the maximum clocks, so the maximum stands in: an
application clock below it is one someone set (``nvidia-smi -ac``), NVML's ``app`` policy."""
_LABEL_STATICS = (("name", "modelName"), ("uuid", "UUID"), ("pci_bus_id", "pci_bus_id"))
_FIELDS_OF_SAMPLE = frozenset(GpuSample.__dataclass_fields__) - {"index", "t", "lost", "missing"}
_FIELDS_OF_STATIC = frozenset(GpuStatic.__dataclass_fields__) - {"index", "missing"}


def not_exported(gpu: DcgmGpu) -> dict[str, str]:
    """specwatch field -> reason, for every field ``gpu``'s exporter does not send at all."""
    return dict(_absent_of(frozenset(gpu.values), gpu.blank, _no_labels(gpu)))


def _no_labels(gpu: DcgmGpu) -> tuple[bool, bool, bool]:
    return gpu.model is None, gpu.uuid is None, gpu.pci_bus_id is None


@functools.lru_cache(maxsize=1024)
def _absent_of(
    values: frozenset[str], blank: frozenset[str], no_label: tuple[bool, bool, bool]
) -> Mapping[str, str]:
    # every GPU of a fleet has one of a few shapes: 80,000 GPUs spent seconds here otherwise
    out: dict[str, str] = {}
    for fmap in FIELDS:
        if fmap.dcgm not in values and fmap.dcgm not in blank:
            out[fmap.target] = f"{NOT_EXPORTED} ({fmap.dcgm})"
    if "mem_total_bytes" in out and {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} <= values:
        del out["mem_total_bytes"]  # used + free stands in for the total
    for (name, _), missing in zip(_LABEL_STATICS, no_label, strict=True):
        if missing:
            out[name] = f"{NOT_EXPORTED} (label)"
    return MappingProxyType(out)


def _convert(fmap: FieldMap, value: float) -> int | float:
    scaled = value * fmap.scale
    if fmap.integer:
        return round(scaled)
    return float(scaled)


@functools.lru_cache(maxsize=1024)
def _shape(
    sent: frozenset[str],
    blank: frozenset[str],
    no_label: tuple[bool, bool, bool],
    targets: frozenset[str],
) -> tuple[tuple[FieldMap, ...], Mapping[str, str]]:
    """The fields of ``targets`` a GPU of this shape has (in :data:`FIELDS` order) and the
    reasons for those it lacks; worked out once per shape, not per GPU."""
    present: list[FieldMap] = []
    missing: dict[str, str] = {}
    absent = _absent_of(sent, blank, no_label)
    for fmap in FIELDS:
        if fmap.target not in targets:
            continue
        if fmap.dcgm in sent:
            present.append(fmap)
        elif fmap.dcgm in blank:
            missing[fmap.target] = BLANK
        elif fmap.target in absent:
            missing[fmap.target] = absent[fmap.target]
    for name, reason in _NO_SOURCE.items():
        if name in targets:
            missing[name] = reason
    return tuple(present), MappingProxyType(missing)


@functools.lru_cache(maxsize=1024)
def _static_shape(
    sent: frozenset[str], blank: frozenset[str], no_label: tuple[bool, bool, bool]
) -> tuple[tuple[FieldMap, ...], tuple[tuple[str, str], ...], Mapping[str, str]]:
    """The static fields a GPU of this shape has, the ``(default, maximum)`` clocks that stand
    in for each other, and the reasons for the rest: one map for every GPU of the shape."""
    present, reasons = _shape(sent, blank, no_label, _FIELDS_OF_STATIC)
    missing = dict(reasons)
    for (name, _), absent in zip(_LABEL_STATICS, no_label, strict=True):
        if absent:
            missing[name] = f"{NOT_EXPORTED} (label)"
    have = {f.target for f in present}
    defaults = tuple((d, top) for d, app, top in _DEFAULT_APP if app in have and top in have)
    given = have | {name for name, _ in _LABEL_STATICS} | {d for d, _ in defaults}
    for name in sorted(_FIELDS_OF_STATIC - given - set(missing)):
        missing[name] = f"{NOT_EXPORTED} (no DCGM field)"
    return present, defaults, missing


def to_static(gpu: DcgmGpu, index: int) -> GpuStatic:
    """The ``GpuStatic`` for ``gpu`` at specwatch's ``index`` (labels give name, UUID, bus id).

    Its ``missing`` map is shared by every GPU of the same shape (80,000 GPUs of a fleet have a
    few shapes): read-only, as its ``Mapping`` type says.
    """
    present, defaults, missing = _static_shape(frozenset(gpu.values), gpu.blank, _no_labels(gpu))
    values: dict[str, Any] = {f.target: _convert(f, gpu.values[f.dcgm]) for f in present}
    if "persistence_mode" in values:
        values["persistence_mode"] = bool(values["persistence_mode"])
    for default, top in defaults:
        values[default] = values[top]
    return GpuStatic(
        index=index,
        missing=missing,
        name=gpu.model,
        uuid=gpu.uuid,
        pci_bus_id=gpu.pci_bus_id,
        **values,
    )


@functools.lru_cache(maxsize=1024)
def _sample_shape(
    sent: frozenset[str], blank: frozenset[str], no_label: tuple[bool, bool, bool]
) -> tuple[tuple[FieldMap, ...], bool, Mapping[str, str]]:
    """The sample fields a GPU of this shape has, whether its memory total is worked out from
    used + free, and the reasons for the rest (one map for every GPU of the shape)."""
    present, reasons = _shape(sent, blank, no_label, _FIELDS_OF_SAMPLE)
    total_of_parts = (
        "mem_total_bytes" not in {f.target for f in present}
        and {
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
        }
        <= sent
    )
    missing = dict(reasons)
    if total_of_parts:
        missing.pop("mem_total_bytes", None)
    return present, total_of_parts, missing


def to_sample(gpu: DcgmGpu, index: int, t: float, extra_reasons: int = 0) -> GpuSample:
    """The ``GpuSample`` for ``gpu`` at specwatch's ``index`` and time ``t``.

    Args:
        gpu: The parsed GPU.
        index: specwatch's GPU index (unique across nodes).
        t: Monotonic seconds of the poll.
        extra_reasons: Reason bits to add (from violation counters that grew since the last
            collection: a throttle that came and went between samples).

    As with :func:`to_static`, ``missing`` may be shared with other GPUs of the same shape.
    """
    if gpu.lost:
        reason = f"N/A: GPU is lost (XID {XID_GPU_FELL_OFF_BUS})"
        return GpuSample(
            index=index, t=t, lost=True, missing=dict.fromkeys(_FIELDS_OF_SAMPLE, reason)
        )
    present, total_of_parts, missing = _sample_shape(
        frozenset(gpu.values), gpu.blank, _no_labels(gpu)
    )
    values: dict[str, Any] = {f.target: _convert(f, gpu.values[f.dcgm]) for f in present}
    if total_of_parts:
        used, free = gpu.values["DCGM_FI_DEV_FB_USED"], gpu.values["DCGM_FI_DEV_FB_FREE"]
        reserved = gpu.values.get("DCGM_FI_DEV_FB_RESERVED", 0.0)
        values["mem_total_bytes"] = round((used + free + reserved) * MIB)
    if extra_reasons:
        values["clock_event_reasons"] = int(values.get("clock_event_reasons") or 0) | extra_reasons
        if "clock_event_reasons" in missing:
            missing = {k: v for k, v in missing.items() if k != "clock_event_reasons"}
    return GpuSample(index=index, t=t, missing=missing, **values)


def extras(gpu: DcgmGpu) -> dict[str, int | float]:
    """The DCGM readings with no ``GpuSample`` home (XID, other violation counters, replays)."""
    out: dict[str, int | float] = {}
    for fmap in FIELDS:
        if fmap.target.startswith("extra:") and fmap.dcgm in gpu.values:
            out[fmap.target.removeprefix("extra:")] = _convert(fmap, gpu.values[fmap.dcgm])
    return out


__all__ = [
    "BY_NAME",
    "FIELDS",
    "MIB",
    "OLD_NAMES",
    "VIOLATION_BITS",
    "FieldMap",
    "extras",
    "not_exported",
    "to_sample",
    "to_static",
]
