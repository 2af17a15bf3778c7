"""The session's GPU source over dcgm-exporter: any node's GPUs, as the same events as NVML.

The inventory subscribers see carries a :class:`~specwatch.core.gpu.GpuOrigin`: the node of
each GPU, the fields the exporters do not send, and the collection interval when it is coarser
than the view. A change of any of them is a new inventory event, so the GPU pane can say it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from specwatch.core.gpu import GpuInventory
from specwatch.session.gpu_source import ReaderGpuSource
from specwatch.sources.dcgm.origin import dcgm_origin

if TYPE_CHECKING:
    from specwatch.sources.dcgm.source import Fetch


class DcgmExporterGpuSource(ReaderGpuSource):
    """GPUs read from one or more dcgm-exporter endpoints.

    Args:
        urls: Exporter addresses (a bare ``host`` means ``http://host:9400/metrics``).
        interval_s: Seconds between polls (the view interval).
        clock: Monotonic seconds for tick timestamps (the session's clock).
        fetch: Replaces the HTTP fetch (tests).
    """

    def __init__(
        self,
        urls: Sequence[str],
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        fetch: Fetch | None = None,
    ) -> None:
        from specwatch.sources.dcgm.source import DcgmGpuSource

        self.dcgm = DcgmGpuSource(urls, interval_s=interval_s, clock=clock, fetch=fetch)
        """The reader, with its DCGM specifics (endpoints, extras, nodes)."""
        super().__init__(self.dcgm, "dcgm-exporter")

    def inventory_of(self, inventory: GpuInventory) -> GpuInventory:
        """The reader's inventory with where the GPUs are."""
        return dataclasses.replace(inventory, origin=dcgm_origin(self.dcgm))


__all__ = ["DcgmExporterGpuSource"]
