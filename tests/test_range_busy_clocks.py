"""Issue 21 item 18: a recording's range compared as a snapshot takes the GPUs' clocks while
they work. The pauses between requests (idle boards at a low clock) are no part of what a
decode runs at, as they are no part of a benchmark's runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

from specwatch.core.identity import ServerIdentity
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


def _restarted(draft_max: str) -> Iterator[ev.SessionEvent]:
    """The story of a llama-server identified at start and restarted at 300 s with another
    ``--spec-draft-n-max``, at the same speed."""
    argv = ["llama-server", "-m", "/m/t.gguf", "-md", "/m/d.gguf", "--spec-draft-n-max"]
    for e in story(600, drop_at=1e9):
        if isinstance(e, ev.ServerReady):
            yield e
            yield ev.ServerIdentified(0.5, ServerIdentity(pid=7, cmdline=(*argv, "4")))
        elif isinstance(e, ev.GpuTicked) and e.tick.t == 300.0:
            yield e
            yield ev.ServerIdentified(300.0, ServerIdentity(pid=8, cmdline=(*argv, draft_max)))
        else:
            yield e


def test_ranges_across_a_restart_with_another_configuration(tmp_path: Path) -> None:
    from specwatch.core.compare import compare
    from specwatch.core.outcomes import Outcome

    for draft_max, verdict in (("8", Outcome.CONFIG), ("4", Outcome.NO_CHANGE)):
        night = tmp_path / f"night-{draft_max}.sqlite"
        record_story(night, _restarted(draft_max))
        before, after = (parse_range_spec(f"{night}@{r}") for r in ("-590s/-310s", "-280s/-10s"))
        assert before is not None and after is not None
        c = compare(load_range(before), load_range(after))
        assert c.verdict is verdict, c.reason
        if verdict is Outcome.CONFIG:
            assert c.reason.startswith("configuration changed: draft length 4 → 8")
            assert "same code" not in c.reason
