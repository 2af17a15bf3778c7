"""Reading one GPU through NVML: handles, static fields, per-tick fields, field values, fans.

Every reading that fails is ``None`` with a reason in ``missing``, never an exception; a call
NVML does not support is never made again for that GPU, and fallback chains try the next
function of a call when the driver lacks one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from specwatch.core.gpu import GpuSample, GpuStatic, SystemInfo
from specwatch.sources.nvml.binding import (
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST,
    FALLBACK_CODES,
    UNSUPPORTED_CODES,
    describe,
    error_code,
)
from specwatch.sources.nvml.calls import (
    BACKUP_CALLS,
    FAN_CALL,
    FIELD_READS,
    FIELD_VALUES_CALL,
    STATIC_READS,
    TICK_CALLS,
    UNAVAILABLE,
    NvmlCall,
    as_text,
    opt,
)
from specwatch.sources.nvml.field_reads import FieldValueReads
from specwatch.sources.nvml.gpm import GpmDram
from specwatch.sources.nvml.state import (
    DRAM_SLOT,
    FAN_SLOT,
    SAMPLE_FIELDS,
    BoundCall,
    Failed,
    GpuLost,
    GpuState,
    NotInBinding,
    resolve,
)

SLOW_REFRESH_S = 5.0
"""How long slow fields (fan, persistence, power limit, application clock) are cached."""

_NOT_READ = {"index", "missing", "locked_sm_clock_mhz", "locked_mem_clock_mhz"}
_STATIC_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuStatic) if f.name not in _NOT_READ
)
_SLOW_STATIC_FIELDS = ("persistence_mode", "power_limit_w", "app_sm_clock_mhz", "app_mem_clock_mhz")
_STATIC_CALLS = tuple(
    (NvmlCall(f"static:{name}", (function,), (name,), args), convert)
    for name, function, args, convert in STATIC_READS
)


class NvmlReader(FieldValueReads):
    """Reads GPUs through one NVML module (the real ``pynvml`` or the simulator's fake)."""

    def __init__(self, nv: Any) -> None:
        self._nv = nv
        self._gpm: dict[int, GpmDram] = {}
        """GPU index -> its GPM reads (absent: not prepared yet, or no GPM there)."""

    def read_system(self) -> SystemInfo:
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
            return as_text(getattr(self._nv, function)())
        except Exception:
            return None

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
        for call, convert in _STATIC_CALLS:
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
        for call, convert in _STATIC_CALLS:
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


def _mark(missing: dict[str, str], fields: Iterable[str], reason: str) -> None:
    for name in fields:
        missing[name] = reason
