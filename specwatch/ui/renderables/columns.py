"""Column means of time-ordered points: the window found by bisection, and with many points
per column, each column's edges too.

The GPU trends ask at every redraw for every GPU over the graph's whole window (300 points
each at 5 minutes, 3600 at an hour) to fill eight cells, and the graph for its three series.
Their points come from a :class:`TimeSeries`, whose times never go backwards, so the window's
ends and, with many points per column, each column's edges are found by bisection and the
values summed at C speed instead of walking every point in Python (the tests keep that
point-by-point walk as the reference these means equal).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from operator import itemgetter

from specwatch.ui.renderables.text import fill_gaps

Point = tuple[float, float | None]

_value = itemgetter(1)

DENSE = 8
"""Below this many points per column, one pass over the points beats bisecting each edge."""


def _time(point: Point) -> float:
    return point[0]


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
