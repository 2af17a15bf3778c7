"""Issue 21 item 18: a recording's range compared as a snapshot takes the GPUs' clocks while
they work. The pauses between requests (idle boards at a low clock) are no part of what a
decode runs at, as they are no part of a benchmark's runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

from specwatch.record.compare_range import load_range, parse_range_spec
from specwatch.session import events as ev
from tests.record_world import MAX_CLOCK, record_story, story

IDLE_CLOCK = 345


def _with_pauses() -> Iterator[ev.SessionEvent]:
    """The story with every third second idle: 0% util, the idle reason set, a low clock."""
    for e in story(120, drop_at=1e9):
        if isinstance(e, ev.GpuTicked) and int(e.tick.t) % 3 == 0:
            idle = tuple(
                dataclasses.replace(
                    s, sm_clock_mhz=IDLE_CLOCK, util_gpu_pct=0, clock_event_reasons=0x01
                )
                for s in e.tick.samples
            )
            yield ev.GpuTicked(dataclasses.replace(e.tick, samples=idle))
        else:
            yield e


def test_a_range_takes_the_clock_of_busy_gpus(tmp_path: Path) -> None:
    night = tmp_path / "night.sqlite"
    record_story(night, _with_pauses())
    spec = parse_range_spec(f"{night}@-100s/-10s")
    assert spec is not None
    snap = load_range(spec)
    for g in snap.overall.gpus:
        assert g.sm_clock_mean_mhz == MAX_CLOCK, g  # was ~1440 with the idle third in it
        assert g.sm_clock_min_mhz == MAX_CLOCK
    for run in snap.runs:
        assert all(g.sm_clock_mean_mhz == MAX_CLOCK for g in run.gpus), run.index
