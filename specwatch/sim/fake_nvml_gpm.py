"""The GPM part of the fake NVML: samples of the simulated boards' DRAM activity.

A sample holds the board's accumulated DRAM-busy seconds; ``NVML_GPM_METRIC_DRAM_BW_UTIL``
between two samples is their difference over the time between them, in percent, as the driver
computes it from its counters. ``gpm_supported = False`` is a board before Hopper:
``nvmlGpmQueryDeviceSupport`` says so and sampling raises ``NOT_SUPPORTED``. Every other metric
comes back ``NOT_SUPPORTED`` in its ``nvmlReturn``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specwatch.sim.fake_nvml_structs import (
    FakeGpmMetricsGet,
    FakeGpmSample,
    FakeGpmSupport,
)
from specwatch.sources.nvml import binding as N

if TYPE_CHECKING:
    from specwatch.sim.gpus import SimGpuState


class FakeGpm:
    """Mixed into ``FakeNvml``: ``nvmlGpm*`` and the ``c_nvmlGpmMetricsGet_t`` struct."""

    if TYPE_CHECKING:
        _instant: float

        def _device(self, function: str, handle: Any) -> SimGpuState: ...
        def _enter(
            self, function: str, index: int | None = None, needs_init: bool = True
        ) -> None: ...

    c_nvmlGpmMetricsGet_t = FakeGpmMetricsGet

    gpm_supported: bool = True
    """False: a board without GPM (before Hopper)."""

    @property
    def gpm_samples_live(self) -> int:
        """Samples allocated and not yet freed."""
        live: int = self.__dict__.get("_gpm_live", 0)
        return live

    def _gpm_count(self, step: int) -> None:
        self.__dict__["_gpm_live"] = self.gpm_samples_live + step

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> FakeGpmSupport:
        """Whether the board has GPM (``gpm_supported``)."""
        self._device("nvmlGpmQueryDeviceSupport", handle)
        return FakeGpmSupport(version=1, isSupportedDevice=int(self.gpm_supported))

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:
        """A new, empty sample (counted until freed)."""
        self._enter("nvmlGpmSampleAlloc")
        self._gpm_count(1)
        return FakeGpmSample()

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Free ``sample``; ``INVALID_ARGUMENT`` for one not allocated here or freed twice."""
        self._enter("nvmlGpmSampleFree")
        if type(sample) is not FakeGpmSample or sample.freed:
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        sample.freed = True
        self._gpm_count(-1)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> FakeGpmSample:
        """Fill ``sample`` with the board's counters now."""
        state = self._device("nvmlGpmSampleGet", handle)
        if not self.gpm_supported:
            raise N.nvml_error(N.ERROR_NOT_SUPPORTED)
        if type(sample) is not FakeGpmSample or sample.freed:
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        sample.index = state.index
        sample.t = self._instant
        sample.dram_busy_s = state.dram_busy_s
        return sample

    def nvmlGpmMetricsGet(self, get: Any) -> FakeGpmMetricsGet:
        """Compute ``get.metrics[:numMetrics]`` between ``get.sample1`` and ``get.sample2``."""
        self._enter("nvmlGpmMetricsGet")
        if type(get) is not FakeGpmMetricsGet:
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        if get.version != N.GPM_METRICS_GET_VERSION:
            raise N.nvml_error(N.ERROR_ARGUMENT_VERSION_MISMATCH)
        one, two = get.sample1, get.sample2
        if (
            type(one) is not FakeGpmSample
            or type(two) is not FakeGpmSample
            or one.index is None
            or one.index != two.index
            or not 0 < get.numMetrics <= len(get.metrics)
        ):
            raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)
        span = two.t - one.t
        for metric in get.metrics[: get.numMetrics]:
            if metric.metricId != N.GPM_METRIC_DRAM_BW_UTIL:
                metric.nvmlReturn = N.ERROR_NOT_SUPPORTED
                metric.value = 0.0
                continue
            metric.nvmlReturn = N.SUCCESS
            busy = two.dram_busy_s - one.dram_busy_s
            metric.value = 100.0 * busy / span if span > 0 else 0.0
        return get


__all__ = ["FakeGpm"]
