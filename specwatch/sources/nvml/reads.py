"""Reading one GPU through NVML: handles, static fields, per-tick fields, field values, GPM.

Every reading that fails is ``None`` with a reason in ``missing``, never an exception; a call
NVML does not support is never made again for that GPU, and fallback chains try the next
function of a call when the driver lacks one.

Every ``nvmlDeviceGetFieldValues`` field is read in one call a tick. A field the driver does
not support is never asked again; where a field has a backup call (an older function giving
the same reading) the backup joins the GPU's plan, and a field that fails once falls back to
its backup for that tick.

DRAM bandwidth comes from GPM metrics (Hopper and later), counter deltas between two samples:
each GPU keeps the previous tick's sample and the metric is computed between it and this
tick's, so the first tick has no value. A board or driver without GPM is asked once and gets a
standing "n/s" reason; the samples are freed on close.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.sources.nvml.binding import (
    BACKUP_CALLS,
    DRAM_SLOT,
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST,
    FALLBACK_CODES,
    FAN_CALL,
    FAN_SLOT,
    FIELD_READS,
    FIELD_UNSUPPORTED_CODES,
    FIELD_VALUES_CALL,
    GPM_METRIC_DRAM_BW_UTIL,
    GPM_METRICS_GET_VERSION,
    SAMPLE_FIELDS,
    SLOT,
    STATIC_CALLS,
    SUCCESS,
    TICK_CALLS,
    UNAVAILABLE,
    UNSUPPORTED_CODES,
    VALUE_ATTR,
    BoundCall,
    Failed,
    FieldRead,
    GpuLost,
    NotInBinding,
    NvmlCall,
    describe,
    error_code,
    error_text,
    opt,
    resolve,
)

NO_TENSOR = "n/s: tensor activity is not read through NVML (--dcgm gives it)"
SLOW_REFRESH_S = 5.0
"""How long slow fields (fan, persistence, power limit, application clock) are cached."""

_NOT_READ = {"index", "missing", "locked_sm_clock_mhz", "locked_mem_clock_mhz"}
_STATIC_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuStatic) if f.name not in _NOT_READ
)
_SLOW_STATIC_FIELDS = ("persistence_mode", "power_limit_w", "app_sm_clock_mhz", "app_mem_clock_mhz")
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


@dataclass
class GpuState:
    """Per-GPU mutable sampler state (only touched under the poll lock)."""

    index: int
    handle: Any = None
    handle_lost: bool = False
    """Taking the handle failed with ``GPU_IS_LOST``."""
    handle_error: str | None = None
    unsupported: dict[str, str] = field(default_factory=dict)
    """Call key (``field:ID`` for a field value) -> "n/s: ..." reason; never asked again."""
    fan: tuple[float, int | None] | None = None
    """(read at, value) of the last good fan reading."""
    static: GpuStatic | None = None
    static_read_at: float = 0.0
    plan: tuple[BoundCall, ...] | None = None
    """The classic calls made every tick (``None`` until the first tick)."""
    backups: dict[str, BoundCall] = field(default_factory=dict)
    fields: tuple[FieldRead, ...] = ()
    """What the field-values call still asks for."""
    field_ids: list[int] = field(default_factory=list)
    field_call: BoundCall | None = None
    fan_call: BoundCall | None = None
    standing: dict[str, str] = field(default_factory=lambda: {"tensor_active": NO_TENSOR})
    """The "n/s" reasons of per-tick fields, shared by samples (replaced, never changed)."""
    static_calls: dict[str, BoundCall] = field(default_factory=dict)


class NvmlReader:
    """Reads GPUs through one NVML module (the real ``pynvml`` or the simulator's fake)."""

    def __init__(self, nv: Any) -> None:
        self._nv = nv
        self._gpm: dict[int, GpmDram] = {}
        """GPU index -> its GPM reads (absent: not prepared yet, or no GPM there)."""

    def take_handle(self, gpu: GpuState) -> str | None:
        """Get ``gpu``'s handle; on failure return (and remember) why."""
        try:
            gpu.handle = self._nv.nvmlDeviceGetHandleByIndex(gpu.index)
        except Exception as exc:
            gpu.handle = None
            gpu.handle_lost = error_code(exc) == ERROR_GPU_IS_LOST
            gpu.handle_error = f"N/A: no handle: {describe(exc)}"
            return gpu.handle_error
        gpu.handle_lost = False
        gpu.handle_error = None
        return None

    def read_static(self, gpu: GpuState, now: float) -> GpuStatic:
        """Read every static field of ``gpu`` (handles first when missing)."""
        gpu.static_read_at = now
        values: dict[str, Any] = {}
        missing: dict[str, str] = {}
        if gpu.handle is None:
            reason = self.take_handle(gpu)
            if reason is not None:
                gpu.static = GpuStatic(
                    index=gpu.index, missing=dict.fromkeys(_STATIC_FIELDS, reason)
                )
                return gpu.static
        for call, convert in STATIC_CALLS:
            name = call.fields[0]
            try:
                raw = self._call(gpu, call, missing)
            except GpuLost:
                for rest in _STATIC_FIELDS:
                    if rest not in values:
                        missing.setdefault(rest, "N/A: GPU is lost")
                break
            if raw is UNAVAILABLE:
                continue
            try:
                values[name] = convert(raw)
            except Exception as exc:
                missing[name] = f"N/A: unreadable value: {describe(exc)}"
        gpu.static = GpuStatic(index=gpu.index, missing=missing, **values)
        return gpu.static

    def refresh_static(self, gpu: GpuState, now: float) -> bool:
        """Re-read the slow static fields (and any that failed transiently). True if changed."""
        old = gpu.static
        if (
            old is None
            or gpu.handle is None
            or any(not r.startswith("n/s") for r in old.missing.values())
        ):
            new = self.read_static(gpu, now)
            return new != old
        gpu.static_read_at = now
        values: dict[str, Any] = {}
        missing = {k: v for k, v in old.missing.items() if k not in _SLOW_STATIC_FIELDS}
        for call, convert in STATIC_CALLS:
            name = call.fields[0]
            if name not in _SLOW_STATIC_FIELDS:
                continue
            try:
                raw = self._call(gpu, call, missing)
            except GpuLost:
                return False
            values[name] = opt(convert, raw)
        new = dataclasses.replace(old, missing=missing, **values)
        gpu.static = new
        return new != old

    def _call(self, gpu: GpuState, call: NvmlCall, missing: dict[str, str]) -> Any:
        """Make one (static) device call; on failure record the reason for ``call.fields``.

        Returns:
            The raw value, or ``UNAVAILABLE`` when it did not come back.

        Raises:
            GpuLost: On ``NVML_ERROR_GPU_IS_LOST``.
        """
        known = gpu.unsupported.get(call.key)
        if known is not None:
            _mark(missing, call.fields, known)
            return UNAVAILABLE
        bound = gpu.static_calls.get(call.key)
        if bound is None:
            bound = gpu.static_calls[call.key] = BoundCall(self._nv, call, standing=False)
        try:
            return bound.fn(gpu.handle, *bound.args)
        except Exception as exc:
            got = self._recover(gpu, bound, exc)
        if type(got) is Failed:
            _mark(missing, call.fields, got.reason)
            return UNAVAILABLE
        return got

    def _recover(self, gpu: GpuState, bound: BoundCall, exc: BaseException) -> Any:
        """After ``bound``'s function raised ``exc``: walk its fallback chain, else say why.

        Returns:
            The raw value from a later function of the chain, or a ``Failed`` (an "n/s"
            answer is remembered in ``gpu.unsupported``).

        Raises:
            GpuLost: On ``NVML_ERROR_GPU_IS_LOST``.
        """
        call = bound.call
        while True:
            if isinstance(exc, NotInBinding):
                code: int | None = ERROR_FUNCTION_NOT_FOUND
                text = f"{exc.function} is not in this nvidia-ml-py"
                hint = ""
            else:
                code = error_code(exc)
                text = describe(exc)
                hint = f" ({call.functions[bound.pos]}: driver older than nvidia-ml-py)"
            if code in FALLBACK_CODES and bound.pos + 1 < len(call.functions):
                bound.pos += 1
                bound.fn = resolve(self._nv, call.functions[bound.pos])
                try:
                    return bound.fn(gpu.handle, *bound.args)
                except Exception as again:
                    exc = again
                    continue
            if code == ERROR_GPU_IS_LOST:
                raise GpuLost() from exc
            if code in UNSUPPORTED_CODES:
                reason = f"n/s: {text}"
                if code == ERROR_FUNCTION_NOT_FOUND:
                    reason += hint
                gpu.unsupported[call.key] = reason
                return Failed(reason, True)
            return Failed(f"N/A: {text}", False)

    def sample_gpu_safely(self, gpu: GpuState, t: float) -> GpuSample:
        """One GPU's sample at ``t``; never raises."""
        try:
            return self._sample_gpu(gpu, t)
        except Exception as exc:
            # A binding or fake returning something unexpected must not end the sampler.
            reason = f"N/A: internal error: {describe(exc)}"
            return GpuSample(index=gpu.index, t=t, missing=dict.fromkeys(SAMPLE_FIELDS, reason))

    def _sample_gpu(self, gpu: GpuState, t: float) -> GpuSample:
        handle = gpu.handle
        if handle is None:
            reason = gpu.handle_error or "N/A: no handle"
            return GpuSample(
                index=gpu.index,
                t=t,
                lost=gpu.handle_lost,
                missing=dict.fromkeys(SAMPLE_FIELDS, reason),
            )
        if gpu.plan is None:
            self._prepare(gpu)
        vals: list[Any] = [None] * len(SAMPLE_FIELDS)
        problems: dict[str, str] = {}
        try:
            if gpu.fields:
                self._read_fields(gpu, vals, problems)
            # _run's body, inlined: the hot loop of every tick (about ten calls per GPU); the
            # plan holds no unsupported call, so _run's check is not needed here.
            for bound in gpu.plan or ():
                try:
                    raw = bound.fn(handle, *bound.args)
                except Exception as exc:
                    raw = self._failed(gpu, bound, exc, problems)
                    if raw is UNAVAILABLE:
                        continue
                for slot, convert, name in bound.outs:
                    try:
                        vals[slot] = convert(raw)
                    except Exception as exc:
                        problems[name] = f"N/A: unreadable value: {describe(exc)}"
            fan = gpu.fan
            if fan is not None and t - fan[0] < SLOW_REFRESH_S:
                vals[FAN_SLOT] = fan[1]
            else:
                self._read_fan(gpu, t, vals, problems)
            gpm = self._gpm.get(gpu.index)
            if gpm is not None:
                self._read_dram(gpu, gpm, handle, vals, problems)
        except GpuLost:
            gpm = self._gpm.get(gpu.index)
            if gpm is not None:
                gpm.forget()
            return GpuSample(
                index=gpu.index,
                t=t,
                lost=True,
                missing=dict.fromkeys(SAMPLE_FIELDS, "N/A: GPU is lost"),
            )
        missing = {**gpu.standing, **problems} if problems else gpu.standing
        vals += (False, missing)  # lost, missing: positional is the cheapest way in
        return GpuSample(gpu.index, t, *vals)

    def _prepare(self, gpu: GpuState) -> None:
        """Look up every per-tick function once for ``gpu``."""
        nv = self._nv
        gpu.plan = tuple(BoundCall(nv, c, standing=True) for c in TICK_CALLS)
        self._gpm[gpu.index] = GpmDram(nv)
        gpu.backups = {k: BoundCall(nv, c, standing=False) for k, c in BACKUP_CALLS.items()}
        gpu.field_call = BoundCall(nv, FIELD_VALUES_CALL, standing=False)
        gpu.fan_call = BoundCall(nv, FAN_CALL, standing=True)
        self._set_fields(gpu, FIELD_READS)

    def _read_dram(
        self,
        gpu: GpuState,
        gpm: GpmDram,
        handle: Any,
        vals: list[Any],
        problems: dict[str, str],
    ) -> None:
        """DRAM bandwidth through GPM; an unsupported board gets its reason once."""
        got = gpm.read(handle)
        if type(got) is not Failed:
            vals[DRAM_SLOT] = got
        elif got.unsupported:
            gpm.close()
            del self._gpm[gpu.index]
            gpu.standing = {**gpu.standing, "dram_active": got.reason}
        else:
            problems["dram_active"] = got.reason

    def close(self) -> None:
        """Free what NVML allocated here (the GPM samples); call before ``nvmlShutdown``."""
        for gpm in self._gpm.values():
            gpm.close()
        self._gpm.clear()

    def _failed(
        self, gpu: GpuState, bound: BoundCall, exc: BaseException, problems: dict[str, str]
    ) -> Any:
        """Handle ``bound`` raising ``exc``: its fallback's value, or ``UNAVAILABLE``."""
        got = self._recover(gpu, bound, exc)
        if type(got) is not Failed:
            return got
        fields = bound.call.fields
        if got.unsupported and bound.standing:
            gpu.standing = {**gpu.standing, **dict.fromkeys(fields, got.reason)}
            if gpu.plan is not None and bound in gpu.plan:
                gpu.plan = tuple(b for b in gpu.plan if b is not bound)
        else:
            _mark(problems, fields, got.reason)
        return UNAVAILABLE

    def _run(
        self, gpu: GpuState, bound: BoundCall, vals: list[Any], problems: dict[str, str]
    ) -> None:
        """Make one call outside the plan (a backup of a field value, the fan)."""
        known = gpu.unsupported.get(bound.call.key)
        if known is not None:
            if not bound.standing:
                _mark(problems, bound.call.fields, known)
            return
        try:
            raw = bound.fn(gpu.handle, *bound.args)
        except Exception as exc:
            raw = self._failed(gpu, bound, exc, problems)
            if raw is UNAVAILABLE:
                return
        for slot, convert, name in bound.outs:
            try:
                vals[slot] = convert(raw)
            except Exception as exc:
                problems[name] = f"N/A: unreadable value: {describe(exc)}"

    def _read_fan(self, gpu: GpuState, t: float, vals: list[Any], problems: dict[str, str]) -> None:
        call = gpu.fan_call
        assert call is not None
        self._run(gpu, call, vals, problems)
        # Only a good reading is cached; an unsupported fan has a standing reason and is never
        # asked again, a transient failure retries next tick.
        if "fan_pct" not in problems and vals[FAN_SLOT] is not None:
            gpu.fan = (t, vals[FAN_SLOT])
        else:
            gpu.fan = None

    def _set_fields(self, gpu: GpuState, fields: tuple[FieldRead, ...]) -> None:
        gpu.fields = fields
        gpu.field_ids = [f.field_id for f in fields]

    def _read_fields(self, gpu: GpuState, vals: list[Any], problems: dict[str, str]) -> None:
        """Every field value in one ``nvmlDeviceGetFieldValues`` call; backups where it failed."""
        fields = gpu.fields
        call = gpu.field_call
        assert call is not None
        try:
            raw = call.fn(gpu.handle, gpu.field_ids)
        except Exception as exc:
            got = self._recover(gpu, call, exc)
            if type(got) is Failed:
                for f in fields:
                    if got.unsupported:
                        self._field_unsupported(gpu, f, got.reason)
                    else:
                        self._field_failed(gpu, f, got.reason, vals, problems)
                return
            raw = got
        try:
            results = list(raw)
        except Exception as exc:
            results = []
            unreadable = f"N/A: unreadable field values: {describe(exc)}"
        else:
            unreadable = "N/A: no value returned"
        for i, f in enumerate(fields):
            if i >= len(results):
                self._field_failed(gpu, f, unreadable, vals, problems)
                continue
            fv = results[i]
            try:
                code = fv.nvmlReturn
                if code == SUCCESS:
                    attr = VALUE_ATTR.get(fv.valueType)
                    if attr is not None:
                        vals[SLOT[f.name]] = f.convert(getattr(fv.value, attr))
                        continue
                    reason = "N/A: unknown field value type"
                elif code == ERROR_GPU_IS_LOST:
                    raise GpuLost()
                elif code in FIELD_UNSUPPORTED_CODES:
                    self._field_unsupported(gpu, f, f"n/s: {error_text(code)}")
                    continue
                else:
                    reason = f"N/A: {error_text(code)}"
            except GpuLost:
                raise
            except Exception as exc:
                reason = f"N/A: unreadable value: {describe(exc)}"
            self._field_failed(gpu, f, reason, vals, problems)

    def _field_failed(
        self,
        gpu: GpuState,
        f: FieldRead,
        reason: str,
        vals: list[Any],
        problems: dict[str, str],
    ) -> None:
        """A field value that failed this tick: its backup call, else the reason."""
        if f.backup is None:
            problems[f.name] = reason
        else:
            self._run(gpu, gpu.backups[f.backup], vals, problems)

    def _field_unsupported(self, gpu: GpuState, f: FieldRead, reason: str) -> None:
        """Never ask for ``f`` again; its backup call joins the plan."""
        gpu.unsupported[f"field:{f.field_id}"] = reason
        self._set_fields(gpu, tuple(x for x in gpu.fields if x is not f))
        if f.backup is None:
            gpu.standing = {**gpu.standing, f.name: reason}
            return
        bound = gpu.backups[f.backup]
        known = gpu.unsupported.get(bound.call.key)
        if known is not None:
            gpu.standing = {**gpu.standing, **dict.fromkeys(bound.call.fields, known)}
            return
        bound.standing = True
        # The plan is read after the field values: the backup is made this tick already.
        gpu.plan = (*(gpu.plan or ()), bound)


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


def _mark(missing: dict[str, str], fields: Iterable[str], reason: str) -> None:
    for name in fields:
        missing[name] = reason
