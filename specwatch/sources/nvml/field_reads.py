"""Reading one GPU's field values: every ``nvmlDeviceGetFieldValues`` field in one call a tick.

A field the driver does not support is never asked again; where a field has a backup call (an
older function giving the same reading) the backup joins the GPU's plan, and a field that fails
once falls back to its backup for that tick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specwatch.sources.nvml.binding import (
    ERROR_GPU_IS_LOST,
    FIELD_UNSUPPORTED_CODES,
    SUCCESS,
    describe,
    error_text,
)
from specwatch.sources.nvml.calls import VALUE_ATTR, FieldRead
from specwatch.sources.nvml.state import SLOT, BoundCall, Failed, GpuLost, GpuState


class FieldValueReads:
    """Mixed into :class:`~specwatch.sources.nvml.reads.NvmlReader`: the field-value reads."""

    if TYPE_CHECKING:

        def _recover(self, gpu: GpuState, bound: BoundCall, exc: BaseException) -> Any: ...

        def _run(
            self, gpu: GpuState, bound: BoundCall, vals: list[Any], problems: dict[str, str]
        ) -> None: ...

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


__all__ = ["FieldValueReads"]
