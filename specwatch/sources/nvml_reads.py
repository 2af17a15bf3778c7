"""Reading one GPU through NVML: handles, static fields, per-tick fields, field values, fans.

Every reading that fails is ``None`` with a reason in ``missing``, never an exception; a call
NVML does not support is never made again for that GPU, and fallback chains try the next
function of a call when the driver lacks one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.gpu import GpuSample, GpuStatic, SystemInfo
from specwatch.sources.nvml_binding import (
    CLOCK_MEM,
    CLOCK_SM,
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST,
    FALLBACK_CODES,
    FI_DEV_MEMORY_TEMP,
    FI_DEV_POWER_INSTANT,
    FIELD_UNSUPPORTED_CODES,
    PERF_POLICY_POWER,
    PERF_POLICY_THERMAL,
    SUCCESS,
    TEMPERATURE_GPU,
    UNSUPPORTED_CODES,
    describe,
    error_code,
    error_text,
)
from specwatch.sources.nvml_calls import (
    STATIC_READS,
    UNAVAILABLE,
    NvmlCall,
    as_text,
    device_calls,
    field_number,
    mw_to_w,
    opt,
    safe,
)

SLOW_REFRESH_S = 5.0
"""How long slow fields (fan, persistence, power limit, application clock) are cached."""

_SAMPLE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuSample) if f.name not in {"index", "t", "lost", "missing"}
)
_STATIC_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuStatic) if f.name not in {"index", "missing"}
)
_SLOW_STATIC_FIELDS = ("persistence_mode", "power_limit_w", "app_sm_clock_mhz")


class _GpuLost(Exception):
    """Raised inside a GPU's tick to abandon its remaining fields."""


@dataclass
class GpuState:
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


class NvmlReader:
    """Reads GPUs through one NVML module (the real ``pynvml`` or the simulator's fake)."""

    def __init__(self, nv: Any) -> None:
        self._nv = nv
        self._calls = device_calls()

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
        for name, function, args, convert in STATIC_READS:
            call = NvmlCall(f"static:{name}", (function,), (name,))
            try:
                raw = self._call(gpu, call, args, missing)
            except _GpuLost:
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
        for name, function, args, convert in STATIC_READS:
            if name not in _SLOW_STATIC_FIELDS:
                continue
            call = NvmlCall(f"static:{name}", (function,), (name,))
            try:
                raw = self._call(gpu, call, args, missing)
            except _GpuLost:
                return False
            values[name] = opt(convert, raw)
        new = dataclasses.replace(old, missing=missing, **values)
        gpu.static = new
        return new != old

    def _call(
        self, gpu: GpuState, call: NvmlCall, args: tuple[Any, ...], missing: dict[str, str]
    ) -> Any:
        """Make one device call; on failure record the reason for ``call.fields``.

        Returns:
            The raw value, or ``UNAVAILABLE`` when it did not come back.

        Raises:
            _GpuLost: On ``NVML_ERROR_GPU_IS_LOST``.
        """
        known = gpu.unsupported.get(call.key)
        if known is not None:
            _mark(missing, call.fields, known)
            return UNAVAILABLE
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
                    code = error_code(caught)
                    text = describe(caught)
            if code in FALLBACK_CODES and pos + 1 < len(call.functions):
                pos += 1
                gpu.chain_pos[call.key] = pos
                continue
            if code == ERROR_GPU_IS_LOST:
                raise _GpuLost() from exc
            if code in UNSUPPORTED_CODES:
                reason = f"n/s: {text}"
                if code == ERROR_FUNCTION_NOT_FOUND:
                    reason += hint
                gpu.unsupported[call.key] = reason
                _mark(missing, call.fields, reason)
                return UNAVAILABLE
            _mark(missing, call.fields, f"N/A: {text}")
            return UNAVAILABLE

    def sample_gpu_safely(self, gpu: GpuState, t: float) -> GpuSample:
        try:
            return self._sample_gpu(gpu, t)
        except Exception as exc:
            # A binding or fake returning something unexpected must not end the sampler.
            reason = f"N/A: internal error: {describe(exc)}"
            return GpuSample(index=gpu.index, t=t, missing=dict.fromkeys(_SAMPLE_FIELDS, reason))

    def _sample_gpu(self, gpu: GpuState, t: float) -> GpuSample:
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
        self, gpu: GpuState, t: float, values: dict[str, Any], missing: dict[str, str]
    ) -> None:
        c = self._calls

        def read(call: NvmlCall, *args: Any) -> Any:
            return self._call(gpu, call, args, missing)

        def put(name: str, convert: Callable[[Any], Any], raw: Any) -> None:
            if raw is UNAVAILABLE:
                values[name] = None
                return
            try:
                values[name] = convert(raw)
            except Exception as exc:
                values[name] = None
                missing[name] = f"N/A: unreadable value: {describe(exc)}"

        put("sm_clock_mhz", int, read(c["sm_clock"], CLOCK_SM))
        put("mem_clock_mhz", int, read(c["mem_clock"], CLOCK_MEM))
        put("temp_c", int, read(c["temp"], TEMPERATURE_GPU))
        self._read_field_values(gpu, values, missing)
        if values.get("power_w") is None:
            missing.pop("power_w", None)
            put("power_w", mw_to_w, read(c["power_usage"]))
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
        self, gpu: GpuState, values: dict[str, Any], missing: dict[str, str]
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
        call = NvmlCall(
            "field_values", ("nvmlDeviceGetFieldValues",), tuple(n for _, n, _ in asking)
        )
        raw = self._call(gpu, call, ([fid for fid, _, _ in asking],), missing)
        if raw is UNAVAILABLE:
            if "field_values" in gpu.unsupported:
                for fid, _, _ in asking:
                    gpu.unsupported[f"field:{fid}"] = gpu.unsupported["field_values"]
            return
        try:
            results = list(raw)
        except Exception as exc:
            _mark(missing, call.fields, f"N/A: unreadable field values: {describe(exc)}")
            return
        for (field_id, name, convert), fv in zip(asking, results, strict=False):
            code = int(getattr(fv, "nvmlReturn", SUCCESS))
            if code == SUCCESS:
                number = field_number(fv)
                if number is None:
                    missing[name] = "N/A: unknown field value type"
                else:
                    values[name] = safe(convert, number)
            elif code == ERROR_GPU_IS_LOST:
                raise _GpuLost()
            elif code in FIELD_UNSUPPORTED_CODES:
                reason = f"n/s: {error_text(code)}"
                gpu.unsupported[f"field:{field_id}"] = reason
                missing[name] = reason
            else:
                missing[name] = f"N/A: {error_text(code)}"

    def _read_fan(
        self, gpu: GpuState, t: float, values: dict[str, Any], missing: dict[str, str]
    ) -> None:
        cached = gpu.fan
        if cached is not None and t - cached[0] < SLOW_REFRESH_S:
            values["fan_pct"] = cached[1]
            if cached[2] is not None:
                missing["fan_pct"] = cached[2]
            return
        local: dict[str, str] = {}
        raw = self._call(gpu, self._calls["fan"], (), local)
        value = opt(int, raw)
        reason = local.get("fan_pct")
        values["fan_pct"] = value
        if reason is not None:
            missing["fan_pct"] = reason
        # Only a good or unsupported reading is cached; a transient failure retries next tick.
        if reason is None or reason.startswith("n/s"):
            gpu.fan = (t, value, reason)
        else:
            gpu.fan = None


def _mark(missing: dict[str, str], fields: Iterable[str], reason: str) -> None:
    for name in fields:
        missing[name] = reason
