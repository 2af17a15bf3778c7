"""The GPU part of ``specwatch probe``: read once from NVML or dcgm-exporter, and its JSON.

Every GPU entry has the same keys whichever source read it (:data:`GPU_KEYS`); a value the
source did not give is ``null`` with its reason in the entry's ``missing``.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from specwatch.core.clocks import policy_of
from specwatch.core.gpu import GpuInventory, GpuOrigin, GpuSample, GpuStatic, GpuTick, decode
from specwatch.core.values import to_jsonable

if TYPE_CHECKING:
    from specwatch.sources.gpu_reader import GpuReader

STATIC_KEYS = (
    "name",
    "uuid",
    "pci_bus_id",
    "max_sm_clock_mhz",
    "power_limit_w",
    "max_pcie_gen",
    "max_pcie_width",
    "persistence_mode",
    "power_default_limit_w",
    "app_sm_clock_mhz",
    "app_mem_clock_mhz",
    "default_app_sm_clock_mhz",
    "default_app_mem_clock_mhz",
)
SAMPLE_KEYS = (
    "sm_clock_mhz",
    "mem_clock_mhz",
    "temp_c",
    "hbm_temp_c",
    "power_w",
    "clock_event_reasons",
    "pcie_gen",
    "pcie_width",
    "dram_active",
    "tensor_active",
)
GPU_KEYS = (
    "index",
    "node",
    "source",
    *STATIC_KEYS,
    *SAMPLE_KEYS,
    "clock_policy",
    "clock_event_reason_names",
    "missing",
)
"""The keys of every GPU entry, in order."""


@dataclasses.dataclass(frozen=True, slots=True)
class GpuSnapshotRead:
    """What one read of the GPUs gave."""

    inventory: GpuInventory
    tick: GpuTick | None


def read_gpus(nvml: object | None = None, dcgm: Sequence[str] = ()) -> GpuSnapshotRead:
    """Open a reader (dcgm-exporter when ``dcgm`` names any, else NVML) and take one tick."""
    reader: GpuReader
    origin: Callable[[], GpuOrigin] | None = None
    if dcgm:
        from specwatch.sources.dcgm.source import DcgmGpuSource, dcgm_origin

        exporters = DcgmGpuSource(dcgm)
        reader = exporters

        def origin() -> GpuOrigin:
            return dcgm_origin(exporters)
    else:
        from specwatch.sources.nvml.sampler import GpuSampler

        reader = GpuSampler(nvml=nvml)
    try:
        inventory = reader.open()
        tick = reader.sample() if inventory.available else None
        inventory = reader.inventory or inventory
        if origin is not None:
            inventory = dataclasses.replace(inventory, origin=origin())
        return GpuSnapshotRead(inventory, tick)
    finally:
        reader.stop()


def gpu_entry(
    static: GpuStatic | None, sample: GpuSample | None, index: int, node: str | None, source: str
) -> dict[str, Any]:
    """One GPU's JSON entry: :data:`GPU_KEYS`, nulls explained in ``missing``."""
    out: dict[str, Any] = {"index": index, "node": node, "source": source}
    missing: dict[str, str] = {}
    for key in STATIC_KEYS:
        value = getattr(static, key) if static is not None else None
        out[key] = to_jsonable(value)
        if value is None:
            why = static.missing.get(key) if static is not None else None
            missing[key] = why or "not reported by the source"
    for key in SAMPLE_KEYS:
        value = getattr(sample, key) if sample is not None else None
        out[key] = to_jsonable(value)
        if value is None:
            if sample is None:
                missing[key] = "no sample was taken"
            elif sample.lost:
                missing[key] = "the GPU fell off the bus"
            else:
                missing[key] = sample.missing.get(key) or "not reported by the source"
    out["clock_policy"] = policy_of(static).text() if static is not None else None
    if static is None:
        missing["clock_policy"] = "no static facts were read"
    reasons = sample.clock_event_reasons if sample is not None else None
    out["clock_event_reason_names"] = (
        [r.short for r in decode(reasons)] if reasons is not None else None
    )
    if reasons is None:
        missing["clock_event_reason_names"] = missing["clock_event_reasons"]
    out["missing"] = missing
    return out


def gpus_document(
    inventory: GpuInventory | None, tick: GpuTick | None
) -> tuple[list[dict[str, Any]], str | None]:
    """(the GPU entries, why there are none or the read failed)."""
    if inventory is None:
        return [], "GPUs were not read"
    origin = inventory.origin
    source = origin.source if origin is not None else "nvml"
    if not inventory.available:
        return [], inventory.reason or f"{source} unavailable"
    local = socket.gethostname() if origin is None else None
    samples = {s.index: s for s in (tick.samples if tick else ())}
    entries: list[dict[str, Any]] = []
    for static in inventory.gpus:
        node = local
        if origin is not None and static.index < len(origin.nodes):
            node = origin.nodes[static.index]
        entries.append(gpu_entry(static, samples.get(static.index), static.index, node, source))
    if tick is not None and tick.error:
        return entries, tick.error
    if not entries:
        return entries, "NVML found no GPUs" if source == "nvml" else "no GPUs found"
    return entries, None


__all__ = ["GPU_KEYS", "GpuSnapshotRead", "gpu_entry", "gpus_document", "read_gpus"]
