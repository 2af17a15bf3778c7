"""GPU samples: what the NVML sampler (or the simulator behind a fake NVML) produces.

Every reading that can be missing is ``None`` with the reason in ``missing[field_name]``.
Reasons start with ``"n/s"`` (the board or driver does not support the field; it will not be
asked again) or ``"N/A"`` (a transient error this tick).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """Driver-wide facts, read once."""

    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    """CUDA driver version as ``"12.8"``."""


@dataclass(frozen=True, slots=True)
class GpuStatic:
    """Per-GPU facts read once (or rarely)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    max_pcie_gen: int | None = None
    max_pcie_width: int | None = None
    slowdown_temp_c: int | None = None
    shutdown_temp_c: int | None = None
    persistence_mode: bool | None = None
    power_default_limit_w: float | None = None
    power_limit_w: float | None = None
    """Enforced power limit."""
    app_sm_clock_mhz: int | None = None
    """Application clock, if one is set."""
    app_mem_clock_mhz: int | None = None
    default_app_sm_clock_mhz: int | None = None
    """The board's default application clocks (what ``nvidia-smi -rac`` restores)."""
    default_app_mem_clock_mhz: int | None = None
    locked_sm_clock_mhz: int | None = None
    """Locked GPU clock; NVML cannot read these back, so only set when specwatch locked them."""
    locked_mem_clock_mhz: int | None = None
    missing: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one tick."""

    index: int
    t: float
    """Monotonic seconds (the sampler's clock)."""
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temp_c: int | None = None
    hbm_temp_c: int | None = None
    power_w: float | None = None
    energy_j: float | None = None
    """Energy counter since driver load, joules."""
    pstate: int | None = None
    clock_event_reasons: int | None = None
    """Bitmask of ``nvmlClocksEventReason*`` bits; decode with ``specwatch.core.gpu_rules``."""
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    power_violation_ns: int | None = None
    thermal_violation_ns: int | None = None
    fan_pct: int | None = None
    dram_active: float | None = None
    """Share of time the HBM interface was busy (0-1): achieved bandwidth against the board's
    peak (DCGM's ``DCGM_FI_PROF_DRAM_ACTIVE``). Near 1 under decode: tokens wait on memory."""
    tensor_active: float | None = None
    """Share of cycles a tensor pipe was active (0-1; DCGM's
    ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``): the compute side of a step."""
    lost: bool = False
    """The GPU fell off the bus (``NVML_ERROR_GPU_IS_LOST``); all readings are ``None``."""
    missing: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuOrigin:
    """Where a session's GPU readings come from, for the pane to say (remote sources only)."""

    source: str
    """``"nvml"`` (this machine) or ``"dcgm"`` (dcgm-exporter over HTTP)."""
    nodes: tuple[str | None, ...] = ()
    """The node of each GPU, by index."""
    not_exported: tuple[str, ...] = ()
    """``GpuSample``/``GpuStatic`` fields the exporter does not send (for any GPU), sorted."""
    collection_interval_s: float | None = None
    """The exporter's inferred collection interval, when coarser than the view."""
    view_interval_s: float | None = None
    """The sampling interval of the view, next to the collection interval."""


@dataclass(frozen=True, slots=True)
class GpuInventory:
    """What the sampler found at start-up."""

    available: bool
    reason: str | None = None
    """Why there are no GPUs (e.g. ``"NVML unavailable: NVML Shared Library Not Found"``)."""
    system: SystemInfo = field(default_factory=SystemInfo)
    gpus: tuple[GpuStatic, ...] = ()
    origin: GpuOrigin | None = None
    """Set by a remote source's session adapter (``None``: the local NVML)."""


@dataclass(frozen=True, slots=True)
class GpuTick:
    """All GPUs at one tick, plus what the tick cost the monitor."""

    t: float
    """Monotonic seconds."""
    wall_time: float
    """Unix seconds."""
    samples: tuple[GpuSample, ...]
    cost_ms: float
    """Wall milliseconds the sampler spent in NVML for this tick."""
    error: str | None = None
