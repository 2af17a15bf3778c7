"""A GPU reader: the shape of every one (NVML's ``GpuSampler``, dcgm-exporter's
``DcgmGpuSource``, Prometheus's) and the background loop they share.

A benchmark, a probe and the live session only use what :class:`GpuReader` names, so any
reader can stand behind them; every reader runs the same :class:`TickLoop` on its own thread
(sample, hand the tick over, wait the rest), only how a tick is read differs.
"""

from __future__ import annotations

import operator
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; the annotations are never evaluated (3.10 runs this)


class GpuReader(Protocol):
    """Opens to an inventory, samples ticks (on demand or on its own thread), keeps a history."""

    inventory: GpuInventory | None
    """What ``open()`` found, refreshed when fixed data changes."""
    on_tick: Callable[[GpuTick], None] | None
    """Called on the reader's thread after each background tick."""

    def open(self) -> GpuInventory:
        """Find the GPUs; never raises."""
        ...

    def sample(self) -> GpuTick:
        """One tick now, on the calling thread; never raises."""
        ...

    def start(self) -> None:
        """Sample on a background thread."""
        ...

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread and release the reader."""
        ...

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        ...

    def set_interval(self, interval_s: float) -> None:
        """Change the time between background ticks."""
        ...

    def ticks_since(self, t: float) -> list[GpuTick]:
        """Ticks with ``tick.t >= t``, oldest first."""
        ...


class TickLoop:
    """Runs :meth:`sample` every ``interval_s`` seconds on a daemon thread until stopped.

    A subclass implements :meth:`open`, :meth:`sample` and :meth:`stop` (which calls
    :meth:`_end_thread`); setting ``_wake`` cuts a wait short (a new interval, or stop).
    """

    thread_name: ClassVar[str]

    def __init__(self, interval_s: float, on_tick: Callable[[GpuTick], None] | None) -> None:
        check_interval(interval_s)
        self._interval_s = interval_s
        self.on_tick = on_tick
        """Called on the loop's thread after each background tick (may be replaced). Keep it
        short (post a message); exceptions are caught and kept in ``callback_error``."""
        self.callback_error: str | None = None
        """The last exception raised by ``on_tick``, as text."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> GpuInventory:
        """Find the GPUs (never raises)."""
        raise NotImplementedError

    def sample(self) -> GpuTick:
        """Read one tick (never raises)."""
        raise NotImplementedError

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the background thread (and release what the reader holds)."""
        raise NotImplementedError

    def start(self) -> None:
        """Open if needed and sample on a daemon thread.

        The next tick is scheduled only once the previous one has finished, so ticks never
        overlap or pile up. Does nothing when the thread is already running.
        """
        if self.running:
            return
        self.open()
        self._stop.clear()
        self._wake.clear()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _end_thread(self, timeout_s: float) -> bool:
        """Stop the thread and join it; ``False`` when it is still running after ``timeout_s``
        (stuck in a read)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        # From on_tick (the loop's own thread) there is nothing to join: the loop ends after
        # the callback returns.
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                return False
            self._thread = None
        return True

    def close(self) -> None:
        """The same as :meth:`stop`."""
        self.stop()

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def interval_s(self) -> float:
        """Seconds between background ticks."""
        return self._interval_s

    def set_interval(self, interval_s: float) -> None:
        """Change the interval; a running thread applies it to the wait in progress.

        Raises:
            ValueError: When ``interval_s`` is not a positive number.
        """
        check_interval(interval_s)
        self._interval_s = interval_s
        self._wake.set()

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


def check_interval(interval_s: float) -> None:
    """Raise ``ValueError`` unless ``interval_s`` is a positive number of seconds."""
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r}")


# --- the bounded tick history, packed -------------------------------------------------------

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
    raise RuntimeError("GpuSample changed: update specwatch.sources.gpu_reader._FORMATS")

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


__all__ = ["GpuReader", "GpuTickHistory", "TickLoop", "check_interval"]
