"""Bounded, thread-safe ring buffers for history (GPU ticks, metric windows, graph series).

One thread may append while others read: every read returns a snapshot list, so a reader
never sees the buffer change under it.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class Ring(Generic[T]):
    """A bounded buffer that drops its oldest item when full.

    Args:
        maxlen: How many items to keep (at least 1).
        items: Optional initial items (only the newest ``maxlen`` are kept).
    """

    def __init__(self, maxlen: int, items: Iterable[T] = ()) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self._items: deque[T] = deque(items, maxlen=maxlen)
        self._lock = threading.Lock()

    @property
    def maxlen(self) -> int:
        """The capacity."""
        return self._items.maxlen or 0

    def append(self, item: T) -> None:
        """Add ``item`` as the newest, dropping the oldest when full."""
        with self._lock:
            self._items.append(item)

    def extend(self, items: Iterable[T]) -> None:
        """Append each of ``items`` in order."""
        with self._lock:
            self._items.extend(items)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return len(self._items) > 0

    def __iter__(self) -> Iterator[T]:
        return iter(self.snapshot())

    def __getitem__(self, index: int) -> T:
        with self._lock:
            return self._items[index]

    def snapshot(self) -> list[T]:
        """Every item, oldest first, as a new list."""
        with self._lock:
            return list(self._items)

    @property
    def latest(self) -> T | None:
        """The newest item, or ``None`` when empty."""
        with self._lock:
            return self._items[-1] if self._items else None

    def last(self, n: int) -> list[T]:
        """The newest ``n`` items, oldest first (fewer when the buffer holds fewer)."""
        if n <= 0:
            return []
        with self._lock:
            count = min(n, len(self._items))
            return [self._items[i] for i in range(len(self._items) - count, len(self._items))]

    def after(self, x: object, key: Callable[[T], object]) -> list[T]:
        """The items whose ``key`` is greater than ``x``, oldest first, for items whose keys
        never decrease: found by bisection, and only they are copied (a graph asks for its
        window of a ring that holds hours)."""
        with self._lock:
            items = self._items
            lo = bisect_right(items, x, key=key)  # type: ignore[call-overload]
            out = list(islice(reversed(items), len(items) - lo))
        out.reverse()
        return out

    def since(self, pred: Callable[[T], bool]) -> list[T]:
        """The newest run of items for which ``pred`` holds, oldest first.

        Scans from the newest item backwards and stops at the first item that fails, so for
        time-ordered items ``since(lambda x: x.t >= t0)`` costs only the items it returns.
        """
        out: list[T] = []
        with self._lock:
            for item in reversed(self._items):
                if not pred(item):
                    break
                out.append(item)
        out.reverse()
        return out

    def where(self, pred: Callable[[T], bool]) -> list[T]:
        """Every item for which ``pred`` holds, oldest first."""
        return [item for item in self.snapshot() if pred(item)]

    def map(self, fn: Callable[[T], U]) -> list[U]:
        """``fn`` applied to every item, oldest first."""
        return [fn(item) for item in self.snapshot()]


def _time(point: tuple[float, float | None]) -> float:
    return point[0]


class TimeSeries:
    """A ring of ``(t, value)`` points for graphs; ``None`` marks a gap (unknown reading).

    Args:
        maxlen: How many points to keep.
    """

    def __init__(self, maxlen: int) -> None:
        self._ring: Ring[tuple[float, float | None]] = Ring(maxlen)

    @property
    def maxlen(self) -> int:
        """The capacity."""
        return self._ring.maxlen

    def append(self, t: float, value: float | None) -> None:
        """Add a point at time ``t`` (times should not go backwards)."""
        self._ring.append((t, value))

    def clear(self) -> None:
        """Drop every point."""
        self._ring.clear()

    def __len__(self) -> int:
        return len(self._ring)

    def points(self) -> list[tuple[float, float | None]]:
        """Every point, oldest first."""
        return self._ring.snapshot()

    def values(self, n: int | None = None) -> list[float | None]:
        """Every value (or the newest ``n``), oldest first (gaps as ``None``)."""
        points = self._ring.snapshot() if n is None else self._ring.last(n)
        return [v for _, v in points]

    def after(self, t0: float) -> list[tuple[float, float | None]]:
        """Points with ``t > t0``, oldest first (times never go backwards: by bisection)."""
        return self._ring.after(t0, _time)

    def window(self, t0: float, t1: float | None = None) -> list[tuple[float, float | None]]:
        """Points with ``t0 <= t`` (and ``t <= t1`` when given), oldest first."""
        pts = self._ring.since(lambda p: p[0] >= t0)
        if t1 is None:
            return pts
        return [p for p in pts if p[0] <= t1]

    @property
    def latest(self) -> tuple[float, float | None] | None:
        """The newest point, or ``None`` when empty."""
        return self._ring.latest

    def known(self) -> list[float]:
        """Every non-gap value, oldest first."""
        return [v for _, v in self._ring.snapshot() if v is not None]

    def __iter__(self) -> Iterator[tuple[float, float | None]]:
        return iter(self._ring.snapshot())

    def last(self) -> float | None:
        """The newest value, or ``None`` (when empty, or when the newest point is a gap)."""
        latest = self._ring.latest
        return latest[1] if latest is not None else None

    def since(self, t0: float) -> list[tuple[float, float | None]]:
        """Points with ``t > t0``, oldest first (scans from the newest end)."""
        return self._ring.since(lambda p: p[0] > t0)
