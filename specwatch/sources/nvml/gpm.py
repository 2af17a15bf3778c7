"""DRAM bandwidth utilisation of one GPU through NVML's GPM metrics (Hopper and later).

GPM metrics are counter deltas between two samples, so each GPU keeps the previous tick's
sample and the metric is computed between it and this tick's: the first tick has no value. A
board or driver without GPM is asked once and gets a standing "n/s" reason; the samples are
freed on close.
"""

from __future__ import annotations

from typing import Any

from specwatch.sources.nvml.binding import (
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST,
    GPM_METRIC_DRAM_BW_UTIL,
    GPM_METRICS_GET_VERSION,
    SUCCESS,
    UNSUPPORTED_CODES,
    describe,
    error_code,
    error_text,
)
from specwatch.sources.nvml.state import Failed, GpuLost

DCGM_HINT = "--dcgm gives DCGM_FI_PROF_DRAM_ACTIVE"
NOT_A_GPM_BOARD = f"n/s: no GPM metrics on this GPU (Hopper or later; {DCGM_HINT})"
FIRST_SAMPLE = "N/A: GPM needs two samples: DRAM bandwidth from the next tick"
_STRUCT = "c_nvmlGpmMetricsGet_t"
_FUNCTIONS = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmSampleFree",
)


class GpmDram:
    """Reads ``NVML_GPM_METRIC_DRAM_BW_UTIL`` for one GPU, one sample per tick.

    Args:
        nv: The NVML module (the real ``pynvml`` or the simulator's fake).
    """

    def __init__(self, nv: Any) -> None:
        self._nv = nv
        self._samples: list[Any] = []
        """Two samples, allocated once: this tick fills ``[_cur]``, the other is the last."""
        self._cur = 0
        self._have_prev = False
        self._get: Any = None
        """The ``c_nvmlGpmMetricsGet_t`` asking for the one metric, built once."""

    def read(self, handle: Any) -> float | Failed:
        """This tick's DRAM bandwidth utilisation (0-1) since the last tick's sample.

        Returns:
            The share, or a ``Failed``: ``unsupported`` means never ask again (call
            :meth:`close`).

        Raises:
            GpuLost: On ``NVML_ERROR_GPU_IS_LOST``.
        """
        if not self._samples:
            failed = self._start(handle)
            if failed is not None:
                return failed
        nv = self._nv
        cur = self._cur
        try:
            nv.nvmlGpmSampleGet(handle, self._samples[cur])
        except Exception as exc:
            return self._failed(exc, "nvmlGpmSampleGet")
        self._cur = 1 - cur
        if not self._have_prev:
            self._have_prev = True
            return Failed(FIRST_SAMPLE, False)
        get = self._get
        get.sample1 = self._samples[1 - cur]
        get.sample2 = self._samples[cur]
        try:
            nv.nvmlGpmMetricsGet(get)
        except Exception as exc:
            return self._failed(exc, "nvmlGpmMetricsGet")
        metric = get.metrics[0]
        code = int(metric.nvmlReturn)
        if code != SUCCESS:
            if code in UNSUPPORTED_CODES:
                return Failed(f"n/s: DRAM bandwidth: {error_text(code)} ({DCGM_HINT})", True)
            return Failed(f"N/A: DRAM bandwidth: {error_text(code)}", False)
        return min(1.0, max(0.0, float(metric.value) / 100.0))

    def forget(self) -> None:
        """Drop the previous sample (after a lost GPU): the next tick starts a new pair."""
        self._have_prev = False

    def close(self) -> None:
        """Free the samples (before ``nvmlShutdown``). Safe to call repeatedly."""
        for sample in self._samples:
            try:
                self._nv.nvmlGpmSampleFree(sample)
            except Exception:
                # Nothing useful can be done about a sample the driver will not take back.
                continue
        self._samples = []
        self._have_prev = False
        self._get = None

    def _start(self, handle: Any) -> Failed | None:
        """Ask once whether the GPU has GPM; allocate the first sample and the request."""
        nv = self._nv
        missing = [name for name in (*_FUNCTIONS, _STRUCT) if getattr(nv, name, None) is None]
        if missing:
            return Failed(f"n/s: {missing[0]} is not in this nvidia-ml-py ({DCGM_HINT})", True)
        try:
            support = nv.nvmlGpmQueryDeviceSupport(handle)
        except Exception as exc:
            return self._failed(exc, "nvmlGpmQueryDeviceSupport")
        if not support.isSupportedDevice:
            return Failed(NOT_A_GPM_BOARD, True)
        try:
            while len(self._samples) < 2:
                self._samples.append(nv.nvmlGpmSampleAlloc())
        except Exception as exc:
            self.close()
            return self._failed(exc, "nvmlGpmSampleAlloc")
        get = getattr(nv, _STRUCT)()
        get.version = GPM_METRICS_GET_VERSION
        get.numMetrics = 1
        get.metrics[0].metricId = GPM_METRIC_DRAM_BW_UTIL
        self._get = get
        return None

    def _failed(self, exc: BaseException, function: str) -> Failed:
        code = error_code(exc)
        if code == ERROR_GPU_IS_LOST:
            raise GpuLost() from exc
        if code in UNSUPPORTED_CODES:
            hint = f" ({function}: driver older than nvidia-ml-py)"
            if code != ERROR_FUNCTION_NOT_FOUND:
                hint = ""
            return Failed(f"n/s: GPM: {describe(exc)}{hint} ({DCGM_HINT})", True)
        return Failed(f"N/A: GPM: {describe(exc)}", False)


__all__ = ["DCGM_HINT", "FIRST_SAMPLE", "NOT_A_GPM_BOARD", "GpmDram"]
