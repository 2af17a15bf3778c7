"""A bounded GPU tick history packed into bytes: an hour of 8 GPUs in about 3 MB, not 15.

A :class:`~specwatch.core.gpu.GpuSample` as Python objects costs about 500 bytes (the object,
an int or float object per reading, a ``missing`` dict); packed with :mod:`struct` it costs
about 100. Ticks come back as the same frozen dataclasses when read, which only a benchmark
summary does (the live panes use the newest tick, kept as it came).
"""

from __future__ import annotations

import operator
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from typing import Any

from specwatch.core.gpu import GpuSample, GpuTick

_FORMATS: dict[str, str] = {
    "index": "H",
    "t": "d",
    "sm_clock_mhz": "i",
    "mem_clock_mhz": "i",
    "temp_c": "h",
    "hbm_temp_c": "h",
    "power_w": "d",
    "energy_j": "d",
    "pstate": "h",
    "clock_event_reasons": "Q",
    "util_gpu_pct": "h",
    "util_mem_pct": "h",
    "mem_used_bytes": "q",
    "mem_total_bytes": "q",
    "pcie_gen": "h",
    "pcie_width": "h",
    "power_violation_ns": "q",
    "thermal_violation_ns": "q",
    "fan_pct": "h",
    "dram_active": "d",
    "tensor_active": "d",
    "lost": "?",
}
_NAMES = tuple(_FORMATS)
_FLOAT_BITS = frozenset(bit for bit, code in enumerate(_FORMATS.values()) if code == "d")
_READ = operator.attrgetter(*_NAMES)
_SAMPLE = struct.Struct("<I" + "".join(_FORMATS.values()))
"""A bit per field that was ``None``, then the fields."""
_HEADER = struct.Struct("<3d")
"""``t``, ``wall_time``, ``cost_ms`` of the tick."""

if {f.name for f in fields(GpuSample)} != {*_NAMES, "missing"}:  # pragma: no cover
    raise RuntimeError("GpuSample changed: update specwatch.core.tick_history._FORMATS")

_Packed = tuple[bytes, tuple[Mapping[str, str], ...], "str | None"]


class GpuTickHistory:
    """A bounded, thread-safe history of :class:`GpuTick` that drops the oldest when full.

    Reads return snapshots (new lists of ticks). A tick whose readings do not fit the packed
    form (a value out of range, a float where an int belongs) is kept as it came.

    Args:
        maxlen: How many ticks to keep (at least 1).
    """

    def __init__(self, maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self._items: deque[_Packed | GpuTick] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self._latest: GpuTick | None = None
        self._missing: tuple[Mapping[str, str], ...] = ()

    @property
    def maxlen(self) -> int:
        """The capacity in ticks."""
        return self._items.maxlen or 0

    def append(self, tick: GpuTick) -> None:
        """Add ``tick`` as the newest, dropping the oldest when full."""
        packed = self._pack(tick)
        with self._lock:
            self._items.append(packed)
            self._latest = tick

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._items.clear()
            self._latest = None

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return len(self._items) > 0

    def __iter__(self) -> Iterator[GpuTick]:
        return iter(self.snapshot())

    @property
    def latest(self) -> GpuTick | None:
        """The newest tick, or ``None`` when empty."""
        return self._latest

    def snapshot(self) -> list[GpuTick]:
        """Every tick, oldest first."""
        with self._lock:
            items = list(self._items)
        return [_unpack(item) for item in items]

    def last(self, n: int) -> list[GpuTick]:
        """The newest ``n`` ticks, oldest first."""
        if n <= 0:
            return []
        with self._lock:
            items = list(self._items)[-n:]
        return [_unpack(item) for item in items]

    def since(self, pred: Callable[[GpuTick], bool]) -> list[GpuTick]:
        """The newest run of ticks for which ``pred`` holds, oldest first."""
        with self._lock:
            items = list(self._items)
        out: list[GpuTick] = []
        for item in reversed(items):
            tick = _unpack(item)
            if not pred(tick):
                break
            out.append(tick)
        out.reverse()
        return out

    def _pack(self, tick: GpuTick) -> _Packed | GpuTick:
        parts = [_HEADER.pack(tick.t, tick.wall_time, tick.cost_ms)]
        try:
            for sample in tick.samples:
                parts.append(_pack_sample(sample))
        except (struct.error, TypeError, OverflowError):
            return tick
        # Which readings are missing rarely changes from tick to tick: share the maps.
        previous = self._missing
        missing = tuple(
            previous[i] if i < len(previous) and previous[i] == s.missing else s.missing
            for i, s in enumerate(tick.samples)
        )
        if len(missing) == len(previous) and all(
            a is b for a, b in zip(missing, previous, strict=True)
        ):
            missing = previous
        self._missing = missing
        return b"".join(parts), missing, tick.error


def _pack_sample(sample: GpuSample) -> bytes:
    values = list(_READ(sample))
    mask = 0
    for bit, value in enumerate(values):
        if value is None:
            mask |= 1 << bit
            values[bit] = 0
        elif type(value) is float and bit not in _FLOAT_BITS:
            raise TypeError(f"{_NAMES[bit]} is not an int")
    return _SAMPLE.pack(mask, *values)


def _unpack(item: _Packed | GpuTick) -> GpuTick:
    if isinstance(item, GpuTick):
        return item
    data, missing, error = item
    t, wall, cost = _HEADER.unpack_from(data)
    samples = []
    for i, row in enumerate(_SAMPLE.iter_unpack(data[_HEADER.size :])):
        mask = row[0]
        kwargs: dict[str, Any] = {
            name: None if mask & (1 << bit) else row[bit + 1] for bit, name in enumerate(_NAMES)
        }
        samples.append(GpuSample(missing=missing[i], **kwargs))
    return GpuTick(t=t, wall_time=wall, samples=tuple(samples), cost_ms=cost, error=error)


__all__ = ["GpuTickHistory"]
