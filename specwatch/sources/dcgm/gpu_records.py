"""What a dcgm-exporter GPU source tells beyond ``GpuSample``: where each GPU lives, the
readings ``GpuSample`` has no field for, and how each exporter answered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DcgmGpuInfo:
    """Where one of specwatch's GPUs lives."""

    index: int
    """specwatch's index (unique across nodes)."""
    node: str
    """``Hostname`` label, else the exporter URL's host."""
    url: str
    node_gpu: int | None
    """The GPU's index on its node (the exporter's ``gpu`` label)."""
    key: str
    not_exported: Mapping[str, str] = field(default_factory=dict)
    """specwatch field -> ``"n/s: not exported (DCGM_FI_...)"`` for fields the exporter omits."""
    k8s: Mapping[str, str] = field(default_factory=dict)
    """Non-empty ``pod`` / ``namespace`` / ``container`` labels."""


@dataclass(frozen=True, slots=True)
class DcgmGpuExtra:
    """DCGM readings of one GPU at one tick that ``GpuSample`` has no field for."""

    index: int
    exported_reasons: int | None
    """``clock_event_reasons`` as the exporter sent it (before violation bits were added)."""
    violation_share: Mapping[str, float]
    """``"power"``, ``"thermal"``... -> share of time throttled over the last collection."""
    values: Mapping[str, int | float]
    """``xid``, ``pcie_replay``, ``fb_free`` and the other ``*_violation_ns`` counters."""


@dataclass(frozen=True, slots=True)
class DcgmEndpointState:
    """One exporter as the last poll saw it."""

    url: str
    node: str
    error: str | None
    """Why the last poll failed (``None``: it answered)."""
    parse_error: str | None
    gpus: int
    collection_interval_s: float | None
    """Inferred from how often values change; ``None`` until three changes were seen."""
    unchanged_s: float | None
    """Seconds since the values last changed."""


__all__ = ["DcgmEndpointState", "DcgmGpuExtra", "DcgmGpuInfo"]
