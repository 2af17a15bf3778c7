"""The DCGM fields specwatch reads: where each goes in its GPU samples and how it converts.

One home for the field table: the exporter parser (:mod:`specwatch.sources.dcgm.parse`), the
Prometheus queries for a fleet and the violation-share inference all read it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


__all__ = ["BY_NAME", "FIELDS", "MIB", "OLD_NAMES", "VIOLATION_BITS", "FieldMap"]
