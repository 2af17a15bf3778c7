"""Per-GPU state of the NVML sampler: the calls bound to one GPU and what it does not support.

A :class:`BoundCall` looks its function up once per GPU (and again only when a fallback chain
moves on), so a tick makes each NVML call without a lookup or a key built per call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.sources.nvml.calls import FieldRead, NvmlCall

NO_TENSOR = "n/s: tensor activity is not read through NVML (--dcgm gives it)"
SAMPLE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(GpuSample) if f.name not in {"index", "t", "lost", "missing"}
)
SLOT = {name: i for i, name in enumerate(SAMPLE_FIELDS)}
FAN_SLOT = SLOT["fan_pct"]
DRAM_SLOT = SLOT["dram_active"]
if [f.name for f in dataclasses.fields(GpuSample)] != [
    "index",
    "t",
    *SAMPLE_FIELDS,
    "lost",
    "missing",
]:  # pragma: no cover
    raise RuntimeError("GpuSample changed: samples are built positionally in sources/nvml/reads")


class GpuLost(Exception):
    """Raised inside a GPU's tick to abandon its remaining fields."""


class NotInBinding(Exception):
    """Raised in place of a function this nvidia-ml-py does not have."""

    def __init__(self, function: str) -> None:
        super().__init__(function)
        self.function = function


@dataclass(frozen=True, slots=True)
class Failed:
    """A call that gave no value: why, and whether it will never be made again."""

    reason: str
    unsupported: bool


def resolve(nv: Any, function: str) -> Callable[..., Any]:
    """``nv``'s ``function``, or a stand-in raising :class:`NotInBinding` when it lacks it."""
    fn: Callable[..., Any] | None = getattr(nv, function, None)
    if fn is not None:
        return fn

    def absent(*_: Any) -> Any:
        raise NotInBinding(function)

    return absent


class BoundCall:
    """One :class:`NvmlCall` for one GPU, its function in the fallback chain looked up once."""

    __slots__ = ("args", "call", "fn", "outs", "pos", "standing")

    def __init__(self, nv: Any, call: NvmlCall, standing: bool) -> None:
        self.call = call
        self.pos = 0
        self.fn = resolve(nv, call.functions[0])
        self.args = call.args
        # Static calls convert apart (their fields are not a sample's).
        self.outs = tuple(
            (SLOT[name], convert, name)
            for name, convert in zip(call.fields, call.converts, strict=False)
        )
        self.standing = standing
        """Whether a "n/s" answer is a standing reason (else: this tick's only)."""


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


__all__ = [
    "DRAM_SLOT",
    "FAN_SLOT",
    "SAMPLE_FIELDS",
    "SLOT",
    "BoundCall",
    "Failed",
    "GpuLost",
    "GpuState",
    "NotInBinding",
    "resolve",
]
