"""What a front end says about GPUs read from dcgm-exporter: their nodes and the gaps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specwatch.core.gpu import GpuOrigin

if TYPE_CHECKING:
    from specwatch.sources.dcgm.source import DcgmGpuSource


def dcgm_origin(source: DcgmGpuSource) -> GpuOrigin:
    """Where ``source``'s GPUs are, what its exporters leave out, how coarsely they collect."""
    not_sent = sorted({name for info in source.gpu_info for name in info.not_exported})
    interval = source.collection_interval_s if source.collection_warning else None
    return GpuOrigin(
        source="dcgm",
        nodes=tuple(info.node for info in source.gpu_info),
        not_exported=tuple(not_sent),
        # Two significant digits: a jittery estimate must not re-emit the inventory every tick.
        collection_interval_s=None if interval is None else float(f"{interval:.2g}"),
        view_interval_s=source.interval_s,
    )


__all__ = ["dcgm_origin"]
