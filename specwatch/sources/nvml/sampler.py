"""GPU sampler over NVML: one daemon thread samples every GPU; bounded history of ticks.

``GpuSampler`` initialises NVML once, takes the device handles once, reads the static fields
once, and then samples every GPU on its own daemon thread (the reads themselves are in
``reads``). Every reading that fails is ``None`` with a reason in the sample's
``missing`` map, never an exception:

* ``NOT_SUPPORTED`` and ``FUNCTION_NOT_FOUND`` give ``"n/s: ..."`` and the field is never
  asked again for that GPU;
* ``GPU_IS_LOST`` flags that GPU's sample ``lost=True`` while the other GPUs go on;
* anything else (``NO_PERMISSION``, ``TIMEOUT``, ``UNKNOWN``...) gives ``"N/A: ..."`` for
  this tick only.

With no driver, ``open()`` returns ``GpuInventory(available=False, reason=...)`` and every
tick carries no samples and that reason.

The history keeps each tick packed with :mod:`struct`
(:class:`~specwatch.sources.gpu_reader.GpuTickHistory`, which every GPU reader keeps; the
figures are in ``docs/costs.md``); ticks come back as the same frozen dataclasses when read,
which only a benchmark summary does (the live panes use the newest tick, kept as it came).

Tests and the demo pass ``nvml=FakeNvml(...)`` (``specwatch.sim.fake_nvml``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick, SystemInfo
from specwatch.sources.gpu_reader import GpuTickHistory, TickLoop
from specwatch.sources.nvml.binding import as_text, describe, real_nvml
from specwatch.sources.nvml.reads import SLOW_REFRESH_S, GpuState, NvmlReader


class GpuSampler(TickLoop):
    """Samples every GPU through NVML, on demand or on a background thread.

    Args:
        interval_s: Seconds between ticks on the background thread (default 1 s).
        nvml: A module-like object with the pynvml functions used here (the real ``pynvml``
            when ``None``; tests and the demo pass ``FakeNvml``).
        on_tick: Called on the sampler thread after each background tick. Keep it short
            (post a message); exceptions are caught and kept in ``callback_error``.
        clock: Monotonic seconds for tick timestamps and the slow-field cache.
        history: How many ticks the bounded history keeps.
    """

    thread_name = "specwatch-nvml"

    def __init__(
        self,
        interval_s: float = 1.0,
        nvml: object | None = None,
        on_tick: Callable[[GpuTick], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        history: int = 3600,
    ) -> None:
        super().__init__(interval_s, on_tick)
        self._nv: Any = real_nvml() if nvml is None else nvml
        self._clock = clock
        self._history = GpuTickHistory(history)
        self._poll_lock = threading.Lock()
        self._initialized = False
        self._shut_down = False
        self._gpus: list[GpuState] = []
        self._reader = NvmlReader(self._nv)
        self.inventory: GpuInventory | None = None
        """What ``open()`` found; refreshed when slow static fields change."""
        self.latest: GpuTick | None = None
        """The newest tick, from the thread or ``sample()``."""
        self.open_cost_ms: float | None = None
        """Wall milliseconds ``open()`` spent in NVML."""

    # --- lifecycle ---------------------------------------------------------------------

    def open(self) -> GpuInventory:
        """Initialise NVML (once), take the handles and read the static fields. Never raises.

        Returns:
            The inventory; ``available=False`` with a reason when NVML cannot be used.
        """
        with self._poll_lock:
            if self.inventory is not None and (self._initialized or not self.inventory.available):
                return self.inventory
            return self._open_locked()

    def _open_locked(self) -> GpuInventory:
        started = time.perf_counter()
        self._shut_down = False
        try:
            self._nv.nvmlInit()
        except Exception as exc:
            inv = GpuInventory(available=False, reason=f"NVML unavailable: {describe(exc)}")
            self.inventory = inv
            self.open_cost_ms = (time.perf_counter() - started) * 1000.0
            return inv
        self._initialized = True
        system = _system_info(self._nv)
        try:
            count = int(self._nv.nvmlDeviceGetCount())
        except Exception as exc:
            self._shutdown_locked()
            inv = GpuInventory(
                available=False, reason=f"NVML unavailable: {describe(exc)}", system=system
            )
            self.inventory = inv
            self.open_cost_ms = (time.perf_counter() - started) * 1000.0
            return inv
        now = self._clock()
        self._gpus = [GpuState(i) for i in range(count)]
        statics = []
        for gpu in self._gpus:
            statics.append(self._reader.read_static(gpu, now))
        inv = GpuInventory(
            available=True,
            reason=None if count else "no NVIDIA GPU found",
            system=system,
            gpus=tuple(statics),
        )
        self.inventory = inv
        self.open_cost_ms = (time.perf_counter() - started) * 1000.0
        return inv

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (joining it) and shut NVML down once. Safe to call repeatedly.

        Args:
            timeout_s: How long to wait for a tick stuck in the driver. If the thread is
                still inside NVML after that, NVML is left initialised rather than shut
                down under it (the process exit cleans up).

        A later ``open()``, ``start()`` or ``sample()`` initialises NVML again.
        """
        if not self._end_thread(timeout_s):
            return
        with self._poll_lock:
            self._shutdown_locked()

    def _shutdown_locked(self) -> None:
        if self._initialized and not self._shut_down:
            self._shut_down = True
            self._initialized = False
            self._reader.close()
            # Nothing useful can be done about a failing shutdown.
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()

    # --- history -------------------------------------------------------------------------

    @property
    def history(self) -> GpuTickHistory:
        """The bounded tick history, oldest first (packed: a tick is rebuilt when read)."""
        return self._history

    def ticks_since(self, t: float) -> list[GpuTick]:
        """Ticks with ``tick.t >= t`` from the bounded history, oldest first."""
        return self._history.since(lambda tick: tick.t >= t)

    # --- sampling ------------------------------------------------------------------------

    def sample(self) -> GpuTick:
        """Take one tick now on the calling thread (opening NVML first if needed). Never raises.

        The tick is recorded in the history and ``latest``; ``on_tick`` is not called (it is
        for background ticks).
        """
        with self._poll_lock:
            if self.inventory is None or (self.inventory.available and not self._initialized):
                self._open_locked()
            tick = self._tick_locked()
            self._history.append(tick)
            self.latest = tick
            return tick

    def _tick_locked(self) -> GpuTick:
        t = self._clock()
        wall = time.time()
        inv = self.inventory
        if inv is None or not inv.available:
            reason = inv.reason if inv is not None else "NVML not opened"
            return GpuTick(t=t, wall_time=wall, samples=(), cost_ms=0.0, error=reason)
        started = time.perf_counter()
        samples: list[GpuSample] = []
        statics_changed = False
        for gpu in self._gpus:
            if gpu.handle is None:
                # A GPU without a handle (lost or refused at start) is retried every tick.
                if self._reader.take_handle(gpu) is None:
                    old = gpu.static
                    statics_changed |= self._reader.read_static(gpu, t) != old
            elif t - gpu.static_read_at >= SLOW_REFRESH_S:
                statics_changed |= self._reader.refresh_static(gpu, t)
            samples.append(self._reader.sample_gpu_safely(gpu, t))
        if statics_changed:
            statics = tuple(g.static or GpuStatic(index=g.index) for g in self._gpus)
            self.inventory = dataclasses.replace(inv, gpus=statics)
        cost_ms = (time.perf_counter() - started) * 1000.0
        return GpuTick(t=t, wall_time=wall, samples=tuple(samples), cost_ms=cost_ms)


def _system_info(nv: Any) -> SystemInfo:
    """The driver's, NVML's and CUDA's versions (each ``None`` where NVML does not say)."""

    def text(function: str) -> str | None:
        try:
            return as_text(getattr(nv, function)())
        except Exception:
            return None

    cuda: str | None = None
    try:
        raw = int(nv.nvmlSystemGetCudaDriverVersion())
        cuda = f"{raw // 1000}.{(raw % 1000) // 10}"
    except Exception:
        cuda = None
    return SystemInfo(
        driver_version=text("nvmlSystemGetDriverVersion"),
        nvml_version=text("nvmlSystemGetNVMLVersion"),
        cuda_driver_version=cuda,
    )


__all__ = ["GpuSampler"]
