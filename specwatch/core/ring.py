"""Bounded, thread-safe ring buffers for history (GPU ticks, metric windows, graph series),
and the column means the graphs draw from a series' points.

One thread may append while others read: every read returns a snapshot list, so a reader
never sees the buffer change under it.

The graphs ask at every redraw for a series' means over the graph's columns, the GPU trends
for every GPU over the whole window into a few cells. A :class:`TimeSeries`' times never go
backwards, so :func:`bucket_sorted` finds the window's ends and, with many points per column,
each column's edges by bisection and sums the values at C speed instead of walking every point
in Python (the tests keep that point-by-point walk as the reference these means equal).
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
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


Point = tuple[float, float | None]
"""A series' point: its time and its value (``None``: a gap)."""


def _time(point: Point) -> float:
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


_value = itemgetter(1)

DENSE = 8
"""Below this many points per column, one pass over the points beats bisecting each edge."""


def bucket_sorted(
    points: Sequence[Point],
    t_end: float,
    span_s: float,
    width: int,
    hold_s: float = 0.0,
) -> list[float | None]:
    """Mean value per column over ``(t_end - span_s, t_end]`` of points whose times never
    decrease, oldest column first.

    A point falls in column ``int((t - t0) * width / span_s)`` (the last column takes the
    rest); that never decreases with time, so bisection finds the edges. Columns without a
    point (or with only ``None`` points) are ``None`` (drawn as a gap), unless the last point
    before them is at most ``hold_s`` older than the column's end: samples that arrive about
    once per column then draw a continuous line, not a comb (see :func:`fill_gaps`); a real
    outage, longer than ``hold_s``, still shows. Each column's values are added in order from
    zero; Python 3.12's ``sum`` compensates rounding, so there a mean of fractional values
    may differ from a plain loop's in the last bit (integer-valued points, such as clocks in
    MHz, are exact). With many points per column, a few Python steps per column and none per
    point.
    """
    if width <= 0 or span_s <= 0:
        return []
    t0 = t_end - span_s
    scale = width / span_s
    lo = bisect_right(points, t0, key=_time)  # points[:lo] are at or before t0
    hi = bisect_right(points, t_end, lo=lo, key=_time)  # points[hi:] are after t_end
    if (hi - lo) < width * DENSE:
        means, newest = _dense(points[lo:hi], t0, scale, width)
    else:
        means, newest = _sparse(points, lo, hi, t0, scale, width)
    if hold_s <= 0:
        return means
    ends = [t0 + (i + 1) / scale for i in range(width)]
    return fill_gaps(means, newest, ends, hold_s, _before(points, lo))


def _dense(
    points: Sequence[Point], t0: float, scale: float, width: int
) -> tuple[list[float | None], list[float | None]]:
    """Means and newest times per column for a few points per column (the graph): one pass,
    the points known to lie in the window."""
    sums = [0.0] * width
    counts = [0] * width
    newest: list[float | None] = [None] * width
    last = width - 1
    for t, v in points:
        if v is None:
            continue
        col = int((t - t0) * scale)
        if col > last:
            col = last
        sums[col] += v
        counts[col] += 1
        newest[col] = t
    return [s / n if n else None for s, n in zip(sums, counts, strict=True)], newest


def _sparse(
    points: Sequence[Point], lo: int, hi: int, t0: float, scale: float, width: int
) -> tuple[list[float | None], list[float | None]]:
    """Means and newest times per column for many points per column (the GPU trends)."""

    def column(p: Point) -> int:
        return int((p[0] - t0) * scale)  # the last column takes the rest

    edges = [lo, *(bisect_left(points, c, lo, hi, key=column) for c in range(1, width)), hi]
    means: list[float | None] = []
    newest: list[float | None] = []
    for c in range(width):
        a, b = edges[c], edges[c + 1]
        if a == b:
            means.append(None)
            newest.append(None)
            continue
        seg = points[a:b]
        try:
            total = sum(map(_value, seg))
        except TypeError:  # a gap (None) among them: only the known values count
            known = [p for p in seg if p[1] is not None]
            if not known:
                means.append(None)
                newest.append(None)
                continue
            seg = known
            total = sum(map(_value, seg))
        means.append(total / len(seg))
        newest.append(seg[-1][0])
    return means, newest


def _before(points: Sequence[Point], lo: int) -> tuple[float, float] | None:
    """The newest known point at or before the window's start (``points[:lo]``)."""
    for i in range(lo - 1, -1, -1):
        t, v = points[i]
        if v is not None:
            return (t, v)
    return None


def fill_gaps(
    means: Sequence[float | None],
    newest: Sequence[float | None],
    ends: Sequence[float],
    hold_s: float,
    before: tuple[float, float] | None = None,
) -> list[float | None]:
    """Carry each column's value into following empty columns that end within ``hold_s`` of
    its newest point (``before``: the last point left of the window, as ``(t, value)``)."""
    out: list[float | None] = []
    last = before
    for mean, t, end in zip(means, newest, ends, strict=True):
        if mean is not None and t is not None:
            last = (t, mean)
            out.append(mean)
        elif last is not None and end - last[0] <= hold_s:
            out.append(last[1])
        else:
            out.append(None)
    return out
