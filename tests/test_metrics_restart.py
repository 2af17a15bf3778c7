"""The restart check compares changed samples a column at a time: the same answers as one by one."""

from __future__ import annotations

import itertools
import random

from specwatch.sources.metrics.prom import Sample, Scrape, make_series_key
from specwatch.sources.watcher import _restarted, _restarted_by_key, _Snapshot, _went_back

NAMES = ("a_total", "a_created", "g", "h_bucket", "h_count", "h_sum", "c_total")


def _sample(name: str, engine: str, value: float, keyed: bool = True) -> Sample:
    labels = {"engine": engine}
    return Sample(name, labels, value, make_series_key(name, labels) if keyed else "")


def _one_by_one(prev: _Snapshot, cur: _Snapshot) -> bool:
    """The check as it was written before: sample by sample."""
    if prev.start_header and cur.start_header and prev.start_header != cur.start_header:
        return True
    before, now = prev.scrape.samples, cur.scrape.samples
    if len(before) != len(now):
        return _restarted_by_key(before, now)
    for old, new in zip(before, now, strict=True):
        if old is new:
            continue
        if old.key != new.key or not new.key:
            return _restarted_by_key(before, now)
        if _went_back(new.name, old.value, new.value):
            return True
    return False


def _snap(samples: list[Sample]) -> _Snapshot:
    return _Snapshot(0.0, Scrape(tuple(samples)), None)


def test_went_back_counters_and_moved_created_are_restarts_gauges_are_not() -> None:
    base = [_sample(n, "0", 10.0) for n in NAMES]
    for i, name in enumerate(NAMES):
        moved = list(base)
        moved[i] = base[i]._replace(value=9.0)
        expected = name != "g"
        assert _restarted(_snap(base), _snap(moved)) is expected, name
        grown = list(base)
        grown[i] = base[i]._replace(value=11.0)
        assert _restarted(_snap(base), _snap(grown)) is (name == "a_created"), name


def test_a_restart_before_series_stop_lining_up_is_seen_as_one_by_one_would() -> None:
    base = [_sample(n, "0", 10.0) for n in NAMES]
    cur = list(base)
    cur[0] = base[0]._replace(value=1.0)  # went back ...
    cur[3] = _sample("h_bucket", "1", 50.0)  # ... before a series that does not line up
    assert _restarted(_snap(base), _snap(cur)) is True
    assert _one_by_one(_snap(base), _snap(cur)) is True


def test_column_check_equals_the_sample_by_sample_one() -> None:
    rng = random.Random(13)
    for _ in range(400):
        engines = ("0", "1")
        before = [
            _sample(n, e, rng.choice((0.0, 5.0, 10.0)))
            for n, e in itertools.product(NAMES, engines)
        ]
        now = list(before)
        for i in rng.sample(range(len(now)), rng.randint(0, 6)):
            kind = rng.random()
            if kind < 0.6:
                now[i] = now[i]._replace(value=rng.choice((0.0, 4.0, 10.0, 11.0, float("nan"))))
            elif kind < 0.8:
                now[i] = _sample(now[i].name, rng.choice(("0", "1", "2")), rng.choice((1.0, 20.0)))
            else:
                now[i] = _sample(now[i].name, "0", now[i].value, keyed=False)
        if rng.random() < 0.1:
            now.pop()
        prev, cur = _snap(before), _snap(now)
        assert _restarted(prev, cur) is _one_by_one(prev, cur)
