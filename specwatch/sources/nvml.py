"""GPU sampler over NVML (nvidia-ml-py). The only module in specwatch that imports ``pynvml``.

``GpuSampler`` initialises NVML once, takes the device handles once, reads the static fields
once, and then samples every GPU on its own daemon thread. Every reading that fails is
``None`` with a reason in the sample's ``missing`` map, never an exception:

* ``NOT_SUPPORTED`` and ``FUNCTION_NOT_FOUND`` give ``"n/s: ..."`` and the field is never
  asked again for that GPU;
* ``GPU_IS_LOST`` flags that GPU's sample ``lost=True`` while the other GPUs go on;
* anything else (``NO_PERMISSION``, ``TIMEOUT``, ``UNKNOWN``...) gives ``"N/A: ..."`` for
  this tick only.

With no driver, ``open()`` returns ``GpuInventory(available=False, reason=...)`` and every
tick carries no samples and that reason.

Tests and the demo pass ``nvml=FakeNvml(...)`` (``specwatch.sim.fake_nvml``); the NVML
constants (clock types, field ids, error codes) always come from the real ``pynvml`` here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pynvml

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick, SystemInfo
from specwatch.core.ring import Ring

# NVML constants, re-exported so the fake speaks the same numbers without importing pynvml.
CLOCK_SM: int = pynvml.NVML_CLOCK_SM
CLOCK_MEM: int = pynvml.NVML_CLOCK_MEM
TEMPERATURE_GPU: int = pynvml.NVML_TEMPERATURE_GPU
TEMPERATURE_THRESHOLD_SHUTDOWN: int = pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
TEMPERATURE_THRESHOLD_SLOWDOWN: int = pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
PERF_POLICY_POWER: int = pynvml.NVML_PERF_POLICY_POWER
PERF_POLICY_THERMAL: int = pynvml.NVML_PERF_POLICY_THERMAL
FI_DEV_MEMORY_TEMP: int = pynvml.NVML_FI_DEV_MEMORY_TEMP
FI_DEV_POWER_INSTANT: int = pynvml.NVML_FI_DEV_POWER_INSTANT
VALUE_TYPE_DOUBLE: int = pynvml.NVML_VALUE_TYPE_DOUBLE
VALUE_TYPE_UNSIGNED_INT: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
VALUE_TYPE_UNSIGNED_LONG: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG
VALUE_TYPE_UNSIGNED_LONG_LONG: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
VALUE_TYPE_SIGNED_LONG_LONG: int = pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG
VALUE_TYPE_SIGNED_INT: int = pynvml.NVML_VALUE_TYPE_SIGNED_INT
VALUE_TYPE_UNSIGNED_SHORT: int = pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT

SUCCESS: int = pynvml.NVML_SUCCESS
ERROR_UNINITIALIZED: int = pynvml.NVML_ERROR_UNINITIALIZED
ERROR_INVALID_ARGUMENT: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
ERROR_NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
ERROR_NO_PERMISSION: int = pynvml.NVML_ERROR_NO_PERMISSION
ERROR_DRIVER_NOT_LOADED: int = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
ERROR_TIMEOUT: int = pynvml.NVML_ERROR_TIMEOUT
ERROR_LIBRARY_NOT_FOUND: int = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
ERROR_FUNCTION_NOT_FOUND: int = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
ERROR_GPU_IS_LOST: int = pynvml.NVML_ERROR_GPU_IS_LOST
ERROR_ARGUMENT_VERSION_MISMATCH: int = getattr(pynvml, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 25)
ERROR_UNKNOWN: int = pynvml.NVML_ERROR_UNKNOWN

NVMLError: type[Exception] = pynvml.NVMLError

MIN_RECOMMENDED_INTERVAL_S = 0.25
"""Below this, sampling has been measured to slow decode on a busy server."""
SLOW_REFRESH_S = 5.0
"""How long slow fields (fan, persistence, power limit, application clock) are cached."""

_UNSUPPORTED_CODES = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND})
# A field id the driver does not know comes back per value as INVALID_ARGUMENT.
_FIELD_UNSUPPORTED_CODES = _UNSUPPORTED_CODES | {ERROR_INVALID_ARGUMENT}
# Codes after which the next function in a fallback chain is tried.
_FALLBACK_CODES = frozenset({ERROR_FUNCTION_NOT_FOUND, ERROR_ARGUMENT_VERSION_MISMATCH})

_SAMPLE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuSample) if f.name not in {"index", "t", "lost", "missing"}
)
_STATIC_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuStatic) if f.name not in {"index", "missing"}
)
_SLOW_STATIC_FIELDS = ("persistence_mode", "power_limit_w", "app_sm_clock_mhz")


def nvml_error(code: int) -> Exception:
    """A real ``pynvml.NVMLError`` for ``code``: the matching subclass (``NVMLError_GpuIsLost``...).

    Args:
        code: An ``NVML_ERROR_*`` value.
    """
    err: Exception = pynvml.NVMLError(code)
    return err


def error_text(code: int) -> str:
    """The short text NVML gives for ``code`` (``"Not Supported"``, ``"GPU is lost"``...)."""
    try:
        return str(nvml_error(code))
    except Exception:
        return f"NVML error {code}"


def _error_code(exc: BaseException) -> int | None:
    if isinstance(exc, pynvml.NVMLError):
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, pynvml.NVMLError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class _Unavailable:
    """Marker for a reading that did not come back this tick (its reason is already recorded)."""


_NONE = _Unavailable()


class _GpuLost(Exception):
    """Raised inside a GPU's tick to abandon its remaining fields."""


@dataclass
class _Gpu:
    """Per-GPU mutable sampler state (only touched under the poll lock)."""

    index: int
    handle: Any = None
    handle_lost: bool = False
    """Taking the handle failed with ``GPU_IS_LOST``."""
    handle_error: str | None = None
    unsupported: dict[str, str] = field(default_factory=dict)
    """Call key -> "n/s: ..." reason; these calls are never made again."""
    chain_pos: dict[str, int] = field(default_factory=dict)
    """Call key -> index of the function now used in its fallback chain."""
    fan: tuple[float, int | None, str | None] | None = None
    """(read at, value, missing reason) for the cached fan reading."""
    static: GpuStatic | None = None
    static_read_at: float = 0.0


@dataclass(frozen=True, slots=True)
class _Call:
    """One NVML device read: which functions to try and which sample fields it fills."""

    key: str
    functions: tuple[str, ...]
    fields: tuple[str, ...]


class GpuSampler:
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

    def __init__(
        self,
        interval_s: float = 1.0,
        nvml: object | None = None,
        on_tick: Callable[[GpuTick], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        history: int = 3600,
    ) -> None:
        _check_interval(interval_s)
        self._nv: Any = pynvml if nvml is None else nvml
        self._interval_s = interval_s
        self.on_tick = on_tick
        """Called on the sampler thread after each background tick (may be replaced)."""
        self._clock = clock
        self._history: Ring[GpuTick] = Ring(history)
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._initialized = False
        self._shut_down = False
        self._gpus: list[_Gpu] = []
        self._calls = _device_calls()
        self.inventory: GpuInventory | None = None
        """What ``open()`` found; refreshed when slow static fields change."""
        self.latest: GpuTick | None = None
        """The newest tick, from the thread or ``sample()``."""
        self.open_cost_ms: float | None = None
        """Wall milliseconds ``open()`` spent in NVML."""
        self.callback_error: str | None = None
        """The last exception raised by ``on_tick``, as text."""

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
            inv = GpuInventory(available=False, reason=f"NVML unavailable: {_describe(exc)}")
            self.inventory = inv
            self.open_cost_ms = (time.perf_counter() - started) * 1000.0
            return inv
        self._initialized = True
        system = self._read_system()
        try:
            count = int(self._nv.nvmlDeviceGetCount())
        except Exception as exc:
            self._shutdown_locked()
            inv = GpuInventory(
                available=False, reason=f"NVML unavailable: {_describe(exc)}", system=system
            )
            self.inventory = inv
            self.open_cost_ms = (time.perf_counter() - started) * 1000.0
            return inv
        now = self._clock()
        self._gpus = [_Gpu(i) for i in range(count)]
        statics = []
        for gpu in self._gpus:
            statics.append(self._read_static(gpu, now))
        inv = GpuInventory(
            available=True,
            reason=None if count else "no NVIDIA GPU found",
            system=system,
            gpus=tuple(statics),
        )
        self.inventory = inv
        self.open_cost_ms = (time.perf_counter() - started) * 1000.0
        return inv

    def start(self) -> None:
        """Open if needed and start sampling on a daemon thread.

        The next tick is scheduled only once the previous one has finished, so ticks never
        overlap or pile up. Does nothing when the thread is already running.
        """
        if self._thread is not None and self._thread.is_alive():
            return
        self.open()
        self._stop.clear()
        self._wake.clear()
        self._thread = threading.Thread(target=self._run, name="specwatch-nvml", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (joining it) and shut NVML down once. Safe to call repeatedly.

        Args:
            timeout_s: How long to wait for a tick stuck in the driver. If the thread is
                still inside NVML after that, NVML is left initialised rather than shut
                down under it (the process exit cleans up).

        A later ``open()``, ``start()`` or ``sample()`` initialises NVML again.
        """
        self._stop.set()
        self._wake.set()
        thread = self._thread
        # From on_tick (the sampler thread itself) there is nothing to join: the loop ends
        # after the callback returns.
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                return
            self._thread = None
        with self._poll_lock:
            self._shutdown_locked()

    close = stop

    def __enter__(self) -> GpuSampler:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def _shutdown_locked(self) -> None:
        if self._initialized and not self._shut_down:
            self._shut_down = True
            self._initialized = False
            # Nothing useful can be done about a failing shutdown.
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()

    # --- interval ------------------------------------------------------------------------

    @property
    def interval_s(self) -> float:
        """Seconds between background ticks."""
        return self._interval_s

    def set_interval(self, interval_s: float) -> None:
        """Change the tick interval; a running thread applies it to the wait in progress.

        Raises:
            ValueError: When ``interval_s`` is not a positive number.
        """
        _check_interval(interval_s)
        self._interval_s = interval_s
        self._wake.set()

    @property
    def interval_warning(self) -> str | None:
        """A note when the interval is short enough to slow the server being watched."""
        if self._interval_s < MIN_RECOMMENDED_INTERVAL_S:
            return (
                f"GPU sampling every {self._interval_s * 1000:.0f} ms: below "
                f"{MIN_RECOMMENDED_INTERVAL_S * 1000:.0f} ms NVML polling measurably slows "
                "decode on a busy server (about 2% at 100 ms); 1 s is the default"
            )
        return None

    # --- history -------------------------------------------------------------------------

    @property
    def history(self) -> Ring[GpuTick]:
        """The bounded tick history, oldest first."""
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
                if self._take_handle(gpu) is None:
                    old = gpu.static
                    statics_changed |= self._read_static(gpu, t) != old
            elif t - gpu.static_read_at >= SLOW_REFRESH_S:
                statics_changed |= self._refresh_static(gpu, t)
            samples.append(self._sample_gpu_safely(gpu, t))
        if statics_changed:
            statics = tuple(g.static or GpuStatic(index=g.index) for g in self._gpus)
            self.inventory = dataclasses.replace(inv, gpus=statics)
        cost_ms = (time.perf_counter() - started) * 1000.0
        return GpuTick(t=t, wall_time=wall, samples=tuple(samples), cost_ms=cost_ms)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            tick = self.sample()
            if self.on_tick is not None:
                try:
                    self.on_tick(tick)
                except Exception as exc:
                    self.callback_error = f"{type(exc).__name__}: {exc}"
            self._wait_after(started)

    def _wait_after(self, started: float) -> None:
        while True:
            self._wake.clear()
            # Checked after clearing: stop() sets the stop flag before the wake event.
            if self._stop.is_set():
                return
            due = started + self._interval_s
            now = time.monotonic()
            if now >= due:
                if now - due > self._interval_s:
                    # A tick overran by more than an interval: pause a full interval rather
                    # than firing back to back.
                    started = now
                    continue
                return
            self._wake.wait(due - now)

    # --- NVML reads ----------------------------------------------------------------------

    def _read_system(self) -> SystemInfo:
        driver = self._system_str("nvmlSystemGetDriverVersion")
        nvml_version = self._system_str("nvmlSystemGetNVMLVersion")
        cuda: str | None = None
        try:
            raw = int(self._nv.nvmlSystemGetCudaDriverVersion())
            cuda = f"{raw // 1000}.{(raw % 1000) // 10}"
        except Exception:
            cuda = None
        return SystemInfo(
            driver_version=driver, nvml_version=nvml_version, cuda_driver_version=cuda
        )

    def _system_str(self, function: str) -> str | None:
        try:
            return _text(getattr(self._nv, function)())
        except Exception:
            return None

    def _take_handle(self, gpu: _Gpu) -> str | None:
        """Get ``gpu``'s handle; on failure return (and remember) why."""
        try:
            gpu.handle = self._nv.nvmlDeviceGetHandleByIndex(gpu.index)
        except Exception as exc:
            gpu.handle = None
            gpu.handle_lost = _error_code(exc) == ERROR_GPU_IS_LOST
            gpu.handle_error = f"N/A: no handle: {_describe(exc)}"
            return gpu.handle_error
        gpu.handle_lost = False
        gpu.handle_error = None
        return None

    def _read_static(self, gpu: _Gpu, now: float) -> GpuStatic:
        """Read every static field of ``gpu`` (handles first when missing)."""
        gpu.static_read_at = now
        values: dict[str, Any] = {}
        missing: dict[str, str] = {}
        if gpu.handle is None:
            reason = self._take_handle(gpu)
            if reason is not None:
                gpu.static = GpuStatic(
                    index=gpu.index, missing=dict.fromkeys(_STATIC_FIELDS, reason)
                )
                return gpu.static
        for name, function, args, convert in _STATIC_READS:
            call = _Call(f"static:{name}", (function,), (name,))
            try:
                raw = self._call(gpu, call, args, missing)
            except _GpuLost:
                for rest in _STATIC_FIELDS:
                    if rest not in values:
                        missing.setdefault(rest, "N/A: GPU is lost")
                break
            if raw is _NONE:
                continue
            try:
                values[name] = convert(raw)
            except Exception as exc:
                missing[name] = f"N/A: unreadable value: {_describe(exc)}"
        gpu.static = GpuStatic(index=gpu.index, missing=missing, **values)
        return gpu.static

    def _refresh_static(self, gpu: _Gpu, now: float) -> bool:
        """Re-read the slow static fields (and any that failed transiently). True if changed."""
        old = gpu.static
        if (
            old is None
            or gpu.handle is None
            or any(not r.startswith("n/s") for r in old.missing.values())
        ):
            new = self._read_static(gpu, now)
            return new != old
        gpu.static_read_at = now
        values: dict[str, Any] = {}
        missing = {k: v for k, v in old.missing.items() if k not in _SLOW_STATIC_FIELDS}
        for name, function, args, convert in _STATIC_READS:
            if name not in _SLOW_STATIC_FIELDS:
                continue
            call = _Call(f"static:{name}", (function,), (name,))
            try:
                raw = self._call(gpu, call, args, missing)
            except _GpuLost:
                return False
            values[name] = _opt(convert, raw)
        new = dataclasses.replace(old, missing=missing, **values)
        gpu.static = new
        return new != old

    def _call(self, gpu: _Gpu, call: _Call, args: tuple[Any, ...], missing: dict[str, str]) -> Any:
        """Make one device call; on failure record the reason for ``call.fields``.

        Returns:
            The raw value, or ``_NONE`` when it did not come back.

        Raises:
            _GpuLost: On ``NVML_ERROR_GPU_IS_LOST``.
        """
        known = gpu.unsupported.get(call.key)
        if known is not None:
            _mark(missing, call.fields, known)
            return _NONE
        pos = gpu.chain_pos.get(call.key, 0)
        while True:
            function = call.functions[pos]
            fn = getattr(self._nv, function, None)
            exc: BaseException | None = None
            hint = f" ({function}: driver older than nvidia-ml-py)"
            if fn is None:
                code: int | None = ERROR_FUNCTION_NOT_FOUND
                text = f"{function} is not in this nvidia-ml-py"
                hint = ""
            else:
                try:
                    return fn(gpu.handle, *args)
                except Exception as caught:
                    exc = caught
                    code = _error_code(caught)
                    text = _describe(caught)
            if code in _FALLBACK_CODES and pos + 1 < len(call.functions):
                pos += 1
                gpu.chain_pos[call.key] = pos
                continue
            if code == ERROR_GPU_IS_LOST:
                raise _GpuLost() from exc
            if code in _UNSUPPORTED_CODES:
                reason = f"n/s: {text}"
                if code == ERROR_FUNCTION_NOT_FOUND:
                    reason += hint
                gpu.unsupported[call.key] = reason
                _mark(missing, call.fields, reason)
                return _NONE
            _mark(missing, call.fields, f"N/A: {text}")
            return _NONE

    def _sample_gpu_safely(self, gpu: _Gpu, t: float) -> GpuSample:
        try:
            return self._sample_gpu(gpu, t)
        except Exception as exc:
            # A binding or fake returning something unexpected must not end the sampler.
            reason = f"N/A: internal error: {_describe(exc)}"
            return GpuSample(index=gpu.index, t=t, missing=dict.fromkeys(_SAMPLE_FIELDS, reason))

    def _sample_gpu(self, gpu: _Gpu, t: float) -> GpuSample:
        if gpu.handle is None:
            reason = gpu.handle_error or "N/A: no handle"
            return GpuSample(
                index=gpu.index,
                t=t,
                lost=gpu.handle_lost,
                missing=dict.fromkeys(_SAMPLE_FIELDS, reason),
            )
        values: dict[str, Any] = {}
        missing: dict[str, str] = {}
        try:
            self._read_fast(gpu, t, values, missing)
        except _GpuLost:
            return GpuSample(
                index=gpu.index,
                t=t,
                lost=True,
                missing=dict.fromkeys(_SAMPLE_FIELDS, "N/A: GPU is lost"),
            )
        return GpuSample(index=gpu.index, t=t, missing=missing, **values)

    def _read_fast(
        self, gpu: _Gpu, t: float, values: dict[str, Any], missing: dict[str, str]
    ) -> None:
        c = self._calls

        def read(call: _Call, *args: Any) -> Any:
            return self._call(gpu, call, args, missing)

        def put(name: str, convert: Callable[[Any], Any], raw: Any) -> None:
            if raw is _NONE:
                values[name] = None
                return
            try:
                values[name] = convert(raw)
            except Exception as exc:
                values[name] = None
                missing[name] = f"N/A: unreadable value: {_describe(exc)}"

        put("sm_clock_mhz", int, read(c["sm_clock"], CLOCK_SM))
        put("mem_clock_mhz", int, read(c["mem_clock"], CLOCK_MEM))
        put("temp_c", int, read(c["temp"], TEMPERATURE_GPU))
        self._read_field_values(gpu, values, missing)
        if values.get("power_w") is None:
            missing.pop("power_w", None)
            put("power_w", _mw_to_w, read(c["power_usage"]))
        put("energy_j", lambda v: int(v) / 1000.0, read(c["energy"]))
        put("pstate", int, read(c["pstate"]))
        put("clock_event_reasons", int, read(c["reasons"]))
        util = read(c["util"])
        put("util_gpu_pct", lambda u: int(u.gpu), util)
        put("util_mem_pct", lambda u: int(u.memory), util)
        mem = read(c["memory"])
        put("mem_used_bytes", lambda m: int(m.used), mem)
        put("mem_total_bytes", lambda m: int(m.total), mem)
        put("pcie_gen", int, read(c["pcie_gen"]))
        put("pcie_width", int, read(c["pcie_width"]))
        violation = read(c["violation_power"], PERF_POLICY_POWER)
        put("power_violation_ns", lambda v: int(v.violationTime), violation)
        violation = read(c["violation_thermal"], PERF_POLICY_THERMAL)
        put("thermal_violation_ns", lambda v: int(v.violationTime), violation)
        self._read_fan(gpu, t, values, missing)

    def _read_field_values(
        self, gpu: _Gpu, values: dict[str, Any], missing: dict[str, str]
    ) -> None:
        """HBM temperature and instant power in one ``nvmlDeviceGetFieldValues`` call."""
        wanted: list[tuple[int, str, Callable[[float], Any]]] = [
            (FI_DEV_MEMORY_TEMP, "hbm_temp_c", lambda v: int(v)),
            (FI_DEV_POWER_INSTANT, "power_w", lambda v: v / 1000.0),
        ]
        asking = []
        for field_id, name, convert in wanted:
            key = f"field:{field_id}"
            if key in gpu.unsupported:
                if name != "power_w":
                    missing[name] = gpu.unsupported[key]
                continue
            asking.append((field_id, name, convert))
        if not asking:
            return
        call = _Call("field_values", ("nvmlDeviceGetFieldValues",), tuple(n for _, n, _ in asking))
        raw = self._call(gpu, call, ([fid for fid, _, _ in asking],), missing)
        if raw is _NONE:
            if "field_values" in gpu.unsupported:
                for fid, _, _ in asking:
                    gpu.unsupported[f"field:{fid}"] = gpu.unsupported["field_values"]
            return
        try:
            results = list(raw)
        except Exception as exc:
            _mark(missing, call.fields, f"N/A: unreadable field values: {_describe(exc)}")
            return
        for (field_id, name, convert), fv in zip(asking, results, strict=False):
            code = int(getattr(fv, "nvmlReturn", SUCCESS))
            if code == SUCCESS:
                number = _field_number(fv)
                if number is None:
                    missing[name] = "N/A: unknown field value type"
                else:
                    values[name] = _safe(convert, number)
            elif code == ERROR_GPU_IS_LOST:
                raise _GpuLost()
            elif code in _FIELD_UNSUPPORTED_CODES:
                reason = f"n/s: {error_text(code)}"
                gpu.unsupported[f"field:{field_id}"] = reason
                missing[name] = reason
            else:
                missing[name] = f"N/A: {error_text(code)}"

    def _read_fan(
        self, gpu: _Gpu, t: float, values: dict[str, Any], missing: dict[str, str]
    ) -> None:
        cached = gpu.fan
        if cached is not None and t - cached[0] < SLOW_REFRESH_S:
            values["fan_pct"] = cached[1]
            if cached[2] is not None:
                missing["fan_pct"] = cached[2]
            return
        local: dict[str, str] = {}
        raw = self._call(gpu, self._calls["fan"], (), local)
        value = _opt(int, raw)
        reason = local.get("fan_pct")
        values["fan_pct"] = value
        if reason is not None:
            missing["fan_pct"] = reason
        # Only a good or unsupported reading is cached; a transient failure retries next tick.
        if reason is None or reason.startswith("n/s"):
            gpu.fan = (t, value, reason)
        else:
            gpu.fan = None


def _device_calls() -> dict[str, _Call]:
    calls = [
        _Call("sm_clock", ("nvmlDeviceGetClockInfo",), ("sm_clock_mhz",)),
        _Call("mem_clock", ("nvmlDeviceGetClockInfo",), ("mem_clock_mhz",)),
        _Call("temp", ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"), ("temp_c",)),
        _Call("power_usage", ("nvmlDeviceGetPowerUsage",), ("power_w",)),
        _Call("energy", ("nvmlDeviceGetTotalEnergyConsumption",), ("energy_j",)),
        _Call("pstate", ("nvmlDeviceGetPerformanceState",), ("pstate",)),
        _Call(
            "reasons",
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            ("clock_event_reasons",),
        ),
        _Call("util", ("nvmlDeviceGetUtilizationRates",), ("util_gpu_pct", "util_mem_pct")),
        _Call("memory", ("nvmlDeviceGetMemoryInfo",), ("mem_used_bytes", "mem_total_bytes")),
        _Call("pcie_gen", ("nvmlDeviceGetCurrPcieLinkGeneration",), ("pcie_gen",)),
        _Call("pcie_width", ("nvmlDeviceGetCurrPcieLinkWidth",), ("pcie_width",)),
        _Call("violation_power", ("nvmlDeviceGetViolationStatus",), ("power_violation_ns",)),
        _Call("violation_thermal", ("nvmlDeviceGetViolationStatus",), ("thermal_violation_ns",)),
        _Call("fan", ("nvmlDeviceGetFanSpeed",), ("fan_pct",)),
    ]
    return {c.key: c for c in calls}


def _check_interval(interval_s: float) -> None:
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r}")


def _mark(missing: dict[str, str], fields: Iterable[str], reason: str) -> None:
    for name in fields:
        missing[name] = reason


def _opt(convert: Callable[[Any], Any], raw: Any) -> Any:
    return None if raw is _NONE else _safe(convert, raw)


def _safe(convert: Callable[[Any], Any], raw: Any) -> Any:
    try:
        return convert(raw)
    except Exception:
        return None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def _mw_to_w(value: Any) -> float:
    return int(value) / 1000.0


def _positive_int(value: Any) -> int | None:
    number = int(value)
    return number if number > 0 else None


_STATIC_READS: tuple[tuple[str, str, tuple[Any, ...], Callable[[Any], Any]], ...] = (
    # (GpuStatic field, NVML function, its arguments after the handle, conversion)
    ("name", "nvmlDeviceGetName", (), _text),
    ("uuid", "nvmlDeviceGetUUID", (), _text),
    ("pci_bus_id", "nvmlDeviceGetPciInfo", (), lambda v: _text(v.busId)),
    ("max_sm_clock_mhz", "nvmlDeviceGetMaxClockInfo", (CLOCK_SM,), int),
    ("max_mem_clock_mhz", "nvmlDeviceGetMaxClockInfo", (CLOCK_MEM,), int),
    ("max_pcie_gen", "nvmlDeviceGetMaxPcieLinkGeneration", (), int),
    ("max_pcie_width", "nvmlDeviceGetMaxPcieLinkWidth", (), int),
    (
        "slowdown_temp_c",
        "nvmlDeviceGetTemperatureThreshold",
        (TEMPERATURE_THRESHOLD_SLOWDOWN,),
        int,
    ),
    (
        "shutdown_temp_c",
        "nvmlDeviceGetTemperatureThreshold",
        (TEMPERATURE_THRESHOLD_SHUTDOWN,),
        int,
    ),
    ("persistence_mode", "nvmlDeviceGetPersistenceMode", (), lambda v: bool(int(v))),
    ("power_default_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit", (), _mw_to_w),
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", (), _mw_to_w),
    ("app_sm_clock_mhz", "nvmlDeviceGetApplicationsClock", (CLOCK_SM,), _positive_int),
)


_VALUE_ATTR = {
    VALUE_TYPE_DOUBLE: "dVal",
    VALUE_TYPE_UNSIGNED_INT: "uiVal",
    VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    VALUE_TYPE_SIGNED_INT: "siVal",
    VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def _field_number(fv: Any) -> float | None:
    attr = _VALUE_ATTR.get(int(getattr(fv, "valueType", -1)))
    if attr is None:
        return None
    try:
        return float(getattr(fv.value, attr))
    except Exception:
        return None


class CountingNvml:
    """Wraps an NVML module-like object and counts the calls and time spent in each function.

    Used by the device check and overhead measurements to prove that static fields are read
    once, that ``nvmlInit`` runs once, and which calls cost what.

    Args:
        inner: The object to wrap (the real ``pynvml`` when ``None``).
    """

    def __init__(self, inner: object | None = None) -> None:
        self._inner: Any = pynvml if inner is None else inner
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        """Calls per function name."""
        self.seconds: dict[str, float] = {}
        """Wall seconds per function name."""

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target) or not name.startswith("nvml"):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                with self._lock:
                    self.calls[name] = self.calls.get(name, 0) + 1
                    self.seconds[name] = self.seconds.get(name, 0.0) + spent

        return counted
