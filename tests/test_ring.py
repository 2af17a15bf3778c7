"""Ring and TimeSeries: bounded history used across specwatch."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specwatch.core.ring import Ring, TimeSeries


def test_ring_drops_oldest_when_full() -> None:
    ring: Ring[int] = Ring(3)
    assert len(ring) == 0 and not ring and ring.latest is None
    ring.extend([1, 2, 3, 4])
    ring.append(5)
    assert list(ring) == [3, 4, 5]
    assert len(ring) == 3 and ring.maxlen == 3 and bool(ring)
    assert ring.latest == 5 and ring[0] == 3 and ring[-1] == 5


def test_ring_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError):
        Ring[int](0)


def test_last_since_where_map() -> None:
    ring = Ring(10, range(8))
    assert ring.last(3) == [5, 6, 7]
    assert ring.last(0) == []
    assert ring.last(50) == list(range(8))
    assert ring.since(lambda v: v >= 5) == [5, 6, 7]
    # since() stops at the first failing item from the newest end.
    assert Ring(5, [9, 1, 9, 9]).since(lambda v: v > 5) == [9, 9]
    assert ring.since(lambda v: v > 100) == []
    assert ring.where(lambda v: v % 2 == 0) == [0, 2, 4, 6]
    assert ring.map(lambda v: v * 10)[-1] == 70
    ring.clear()
    assert ring.snapshot() == []


def test_iteration_is_a_snapshot() -> None:
    ring = Ring(4, [1, 2])
    seen = []
    for item in ring:
        ring.append(item + 10)
        seen.append(item)
    assert seen == [1, 2]
    assert list(ring) == [1, 2, 11, 12]


def test_concurrent_append_and_read() -> None:
    ring: Ring[int] = Ring(100)
    done = threading.Event()

    def writer() -> None:
        for i in range(20_000):
            ring.append(i)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    while not done.is_set() or reads == 0:
        items = ring.snapshot()
        assert items == sorted(items)
        assert len(items) <= 100
        reads += 1
    thread.join()
    assert ring.last(1) == [19_999]


def test_time_series_window_and_gaps() -> None:
    series = TimeSeries(4)
    for t, v in [(1.0, 10.0), (2.0, None), (3.0, 30.0), (4.0, 40.0), (5.0, 50.0)]:
        series.append(t, v)
    assert len(series) == 4 and series.maxlen == 4
    assert series.values() == [None, 30.0, 40.0, 50.0]
    assert series.known() == [30.0, 40.0, 50.0]
    assert series.window(3.0) == [(3.0, 30.0), (4.0, 40.0), (5.0, 50.0)]
    assert series.window(3.0, 4.0) == [(3.0, 30.0), (4.0, 40.0)]
    assert series.latest == (5.0, 50.0)
    assert series.points()[0] == (2.0, None)
    series.clear()
    assert series.latest is None


@given(
    times=st.lists(st.integers(0, 50), max_size=60).map(sorted),
    t0=st.integers(-1, 51),
    maxlen=st.integers(1, 40),
)
def test_after_is_the_tail_past_t0(times: list[int], t0: int, maxlen: int) -> None:
    """By bisection, equal to the plain scan, on a full ring that dropped its oldest too."""
    ts = TimeSeries(maxlen)
    for i, t in enumerate(times):
        ts.append(float(t), None if i % 5 == 4 else float(i))
    assert ts.after(float(t0)) == [p for p in ts.points() if p[0] > t0]
