"""The GPU trends' bisecting column means against the point-by-point ``bucket``."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

import pytest

from specwatch.ui.renderables import bucket_sorted, fill_gaps


def bucket(
    points: Iterable[tuple[float, float | None]],
    t_end: float,
    span_s: float,
    width: int,
    hold_s: float = 0.0,
) -> list[float | None]:
    """The point-by-point reference, for points in any order: mean value per column over
    ``(t_end - span_s, t_end]``, oldest column first.

    Columns without a point (or with only ``None`` points) are ``None`` (drawn as a gap), unless
    the last point before them is at most ``hold_s`` older than the column's end: samples that
    arrive about once per column then draw a continuous line, not a comb (see
    :func:`fill_gaps`); a real outage, longer than ``hold_s``, still shows.
    """
    if width <= 0 or span_s <= 0:
        return []
    sums = [0.0] * width
    counts = [0] * width
    newest: list[float | None] = [None] * width
    t0 = t_end - span_s
    scale = width / span_s
    last = width - 1
    before: tuple[float, float] | None = None
    # The hot loop of every graph redraw: no calls but int() per point.
    for t, v in points:
        if v is None or t > t_end:
            continue
        if t <= t0:
            before = (t, v)
            continue
        col = int((t - t0) * scale)
        if col > last:
            col = last
        sums[col] += v
        counts[col] += 1
        newest[col] = t
    means = [s / n if n else None for s, n in zip(sums, counts, strict=True)]
    if hold_s <= 0:
        return means
    ends = [t0 + (i + 1) / scale for i in range(width)]
    return fill_gaps(means, newest, ends, hold_s, before)


def _series(
    rng: random.Random, n: int, integer: bool, gaps: float
) -> list[tuple[float, float | None]]:
    t = rng.uniform(0, 100)
    out: list[tuple[float, float | None]] = []
    for _ in range(n):
        t += rng.choice([0.0, 1.0, 0.5, rng.uniform(0, 3), 37.5 / 8])
        if rng.random() < 0.3:
            t = float(math.ceil(t))  # times on the column edges of round spans
        v = float(rng.randint(1000, 2000)) if integer else rng.uniform(0, 3000)
        out.append((t, None if rng.random() < gaps else v))
    return out


@pytest.mark.parametrize("integer", [True, False])
def test_bucket_sorted_equals_bucket(integer: bool) -> None:
    rng = random.Random(5)
    for _ in range(3000):
        pts = _series(rng, rng.choice([0, 1, 2, 5, 30, 300]), integer, rng.choice([0, 0.05, 0.6]))
        t = pts[-1][0] if pts else 3.0
        span = rng.choice([60.0, 300.0, 3600.0, rng.uniform(1, 500)])
        t_end = rng.choice([t, math.ceil(t / (span / 8)) * (span / 8), t - rng.uniform(0, 50)])
        width = rng.choice([1, 2, 8, 80, rng.randint(0, 40)])
        hold = rng.choice([0.0, 3.0])
        want = bucket(pts, t_end, span, width, hold)
        got = bucket_sorted(pts, t_end, span, width, hold)
        if integer:
            assert got == want  # the same columns, exact sums
        else:
            assert [g is None for g in got] == [w is None for w in want]
            assert got == pytest.approx(want, rel=1e-12)


def test_bucket_sorted_gap_and_hold() -> None:
    pts: list[tuple[float, float | None]] = [(1.0, 10.0), (2.0, None), (5.0, 20.0), (6.0, None)]
    assert bucket_sorted(pts, 8.0, 8.0, 4) == [10.0, None, 20.0, None]
    # The last known point before the window carries into its first columns within hold_s.
    assert bucket_sorted(pts, 10.0, 4.0, 4, hold_s=2.5) == [20.0, None, None, None]
    assert bucket_sorted(pts, 10.0, 4.0, 0) == []
