"""Where a session's GPU readings come from, behind one small protocol.

A source is started with an ``emit`` callback and from then on emits
:class:`~specwatch.session.events.GpuInventoryChanged` (first when it opens, then on every change
of fixed data) and :class:`~specwatch.session.events.GpuTicked`. The GPUs are the local ones
through NVML (:class:`NvmlGpuSource`), those of dcgm-exporter endpoints over HTTP
(:class:`DcgmExporterGpuSource`; :class:`NvmlOrNodeExporter` falls back on the server host's
exporter where NVML is unavailable), both a :class:`ReaderGpuSource` over a reader with the same
shape, or a Prometheus node's (:class:`PrometheusGpuSource`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.session.events import GpuInventoryChanged, GpuTicked, SessionEvent

if TYPE_CHECKING:
    from specwatch.sources.dcgm.source import Fetch
    from specwatch.sources.gpu_reader import GpuReader
    from specwatch.sources.prometheus.gpus import PrometheusGpuSampler

Emit = Callable[[SessionEvent], None]


class GpuSource(Protocol):
    """A source of GPU inventory and ticks."""

    opening: str
    """What a front end says until the first inventory arrives (``"opening NVML…"``)."""

    def start(self, emit: Emit) -> None:
        """Open the source and start ticking; blocking (call from a thread). Never raises."""
        ...

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop ticking and release the source; safe to call repeatedly."""
        ...

    def set_interval(self, interval_s: float) -> None:
        """Change the time between ticks."""
        ...


class ReaderGpuSource:
    """Any :class:`~specwatch.sources.gpu_reader.GpuReader`, ticking on the reader's own thread.

    After each tick the inventory (as :meth:`inventory_of` presents it) is compared with the one
    last emitted, so a power limit, a maximum clock or a PCIe maximum that changed reaches
    subscribers as a new inventory, before the tick that first saw it.

    Args:
        reader: The reader; its ``on_tick`` is taken over.
        what: Its name in the reason given when opening it failed.
    """

    opening = "opening the GPU source…"

    def __init__(self, reader: GpuReader | None, what: str = "the GPU source") -> None:
        self._reader = reader
        if reader is not None:
            reader.on_tick = self._on_tick
        self._what = what
        self._building = threading.Lock()
        self._emit: Emit | None = None
        self._emitted: GpuInventory | None = None
        self._stopped = False

    @property
    def sampler(self) -> GpuReader:
        """The reader; a benchmark reads its history for per-run GPU summaries."""
        if self._reader is None:
            with self._building:  # the GPU thread (start) and the UI (a benchmark) may race
                if self._reader is None:
                    reader = self._make_reader()
                    reader.on_tick = self._on_tick
                    self._reader = reader
        return self._reader

    def _make_reader(self) -> GpuReader:
        raise RuntimeError("no GPU reader")  # only a subclass that passes no reader builds one

    def inventory_of(self, inventory: GpuInventory) -> GpuInventory:
        """The inventory subscribers see (a remote source adds where the GPUs are)."""
        return inventory

    def open_inventory(self) -> GpuInventory:
        """Open the reader; the inventory subscribers see (unavailable, with why, on failure)."""
        try:
            return self.inventory_of(self.sampler.open())
        except Exception as e:  # open() should never raise; if it does, say why and carry on
            return GpuInventory(available=False, reason=f"{self._what} failed: {e}")

    def start(self, emit: Emit) -> None:
        """Open the reader, emit the inventory, start its thread when there are GPUs."""
        self._emit = emit
        inventory = self.open_inventory()
        self._emitted = inventory
        emit(GpuInventoryChanged(inventory))
        if inventory.available and not self._stopped:
            self.sampler.start()

    def _on_tick(self, tick: GpuTick) -> None:
        emit = self._emit
        if emit is None or self._stopped:
            return
        raw = self.sampler.inventory
        inventory = self.inventory_of(raw) if raw is not None else None
        if inventory is not None and inventory != self._emitted:
            self._emitted = inventory
            emit(GpuInventoryChanged(inventory))
        emit(GpuTicked(tick))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the reader's thread and release it."""
        self._stopped = True
        if self._reader is None:
            return  # never opened: nothing to release (and no reason to build one now)
        with contextlib.suppress(Exception):
            self._reader.stop(timeout_s=timeout_s)

    def set_interval(self, interval_s: float) -> None:
        """Change the sampling interval (applies to the wait in progress)."""
        self.sampler.set_interval(interval_s)


class NvmlGpuSource(ReaderGpuSource):
    """The local GPUs through NVML.

    The sampler (and with it the NVML binding, about 1 MiB of ``pynvml``) is built when first
    needed: when the source starts, on the session's GPU thread, after the monitor's first
    frame; a source stopped before it started never loads it.

    Args:
        interval_s: Seconds between ticks.
        nvml: The NVML module (``None``: the real ``pynvml``; the demo and tests: ``FakeNvml``).
        clock: Monotonic seconds for tick timestamps (the session's clock).
    """

    opening = "opening NVML…"

    def __init__(
        self,
        interval_s: float = 1.0,
        nvml: object | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(None, "NVML")
        self._interval_s = interval_s
        self._nvml = nvml
        self._clock = clock

    def _make_reader(self) -> GpuReader:
        from specwatch.sources.nvml.sampler import GpuSampler

        return GpuSampler(interval_s=self._interval_s, nvml=self._nvml, clock=self._clock)


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
        from specwatch.sources.dcgm.source import dcgm_origin

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
        from specwatch.sources.dcgm.parse import dcgm_url

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
            from specwatch.core.redaction import strip_userinfo

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


class NoGpus:
    """A source that only says GPU sampling is off."""

    def __init__(self, reason: str = "GPU sampling disabled") -> None:
        self.reason = reason
        self.opening = reason

    def start(self, emit: Emit) -> None:
        """Emit an unavailable inventory."""
        emit(GpuInventoryChanged(GpuInventory(available=False, reason=self.reason)))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Nothing to stop."""

    def set_interval(self, interval_s: float) -> None:
        """Nothing ticks."""


class PrometheusGpuSource:
    """The session's :class:`~specwatch.session.gpu_source.GpuSource` over a Prometheus sampler."""

    opening = "asking Prometheus for the node's GPUs…"

    def __init__(self, sampler: PrometheusGpuSampler) -> None:
        self.sampler = sampler
        self._emit: Callable[[SessionEvent], None] | None = None
        self._emitted: GpuInventory | None = None

    def start(self, emit: Callable[[SessionEvent], None]) -> None:
        """Poll once, emit the inventory, then tick on the sampler's thread."""
        self._emit = emit
        self._emitted = self.sampler.open()
        emit(GpuInventoryChanged(self._emitted))
        self.sampler.on_tick = self._on_tick
        self.sampler.start()

    def _on_tick(self, tick: GpuTick) -> None:
        emit, inventory = self._emit, self.sampler.inventory
        if emit is None:
            return
        if inventory is not None and inventory != self._emitted:
            self._emitted = inventory
            emit(GpuInventoryChanged(inventory))
        emit(GpuTicked(tick))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop polling."""
        self.sampler.stop(timeout_s)

    def set_interval(self, interval_s: float) -> None:
        """Change the time between polls."""
        self.sampler.set_interval(interval_s)
