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
from specwatch.core.redaction import strip_userinfo
from specwatch.session.gpu_source import NvmlGpuSource, ReaderGpuSource
from specwatch.sources.dcgm.parse import dcgm_url
from specwatch.sources.dcgm.source import dcgm_origin

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

    opening = "reading dcgm-exporter…"

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


class NvmlOrNodeExporter(NvmlGpuSource):
    """The local GPUs through NVML; where NVML is unavailable, the GPUs of a dcgm-exporter on
    the server's host at dcgm-exporter's own port, when one answers.

    A monitor in a container without the driver library, or beside ``specwatch sim`` (which
    serves its exporter twin on that port), then shows the GPUs without ``--dcgm``; where no
    exporter answers, the pane says both why NVML failed and where it looked.

    Args:
        server_host: The host of the watched server.
        interval_s: Seconds between ticks.
        nvml: The NVML module (``None``: the real ``pynvml``).
        clock: Monotonic seconds for tick timestamps (the session's clock).
    """

    def __init__(
        self,
        server_host: str,
        interval_s: float = 1.0,
        nvml: object | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(interval_s, nvml=nvml, clock=clock)
        self.exporter_url = dcgm_url(f"[{server_host}]" if ":" in server_host else server_host)
        self._found: DcgmExporterGpuSource | None = None

    def open_inventory(self) -> GpuInventory:
        """NVML's inventory, or the exporter's when NVML has no GPUs and the exporter has."""
        inventory = super().open_inventory()
        if inventory.available or self._stopped:
            return inventory
        found = DcgmExporterGpuSource([self.exporter_url], self._interval_s, self._clock)
        seen = found.open_inventory()
        if not seen.available:
            found.stop()
            shown = strip_userinfo(self.exporter_url)
            why = f"{inventory.reason}; no dcgm-exporter at {shown}"
            return dataclasses.replace(inventory, reason=why)
        nvml = self._reader
        with self._building:
            self._found = found
            self._reader = found.dcgm
            found.dcgm.on_tick = self._on_tick
        if nvml is not None:
            nvml.stop(timeout_s=1.0)
        return seen

    def inventory_of(self, inventory: GpuInventory) -> GpuInventory:
        """With where the GPUs are, once they come from the exporter."""
        found = self._found
        return found.inventory_of(inventory) if found is not None else inventory


__all__ = ["DcgmExporterGpuSource", "NvmlOrNodeExporter"]
