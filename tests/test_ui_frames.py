"""Issue 21's frame capture: three simulated minutes of the demo's drift and regression stories,
with a `b` benchmark in the middle, captured every simulated second at 80×24, 120×40 and
160×48, on the real app, session, simulator and HTTP.

Time runs four times faster than the wall clock (:class:`ScaledClock`, shared by the world, the
session and the benchmark), so three minutes take 45 seconds. What the frames must
show:

- no number cut inside (a figure followed by the ellipsis a cut leaves);
- no row whose state flips more than twice in any minute while the simulated truth holds
  still: a GPU row's busy/idle word, the verify pane's figures present or blank, the load
  pane's latency rows present or gone;
- the verdict line never blames the code while the session's own benchmark runs.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widget import Widget

from specwatch.session import LiveSession
from specwatch.session.gpu_source import NvmlGpuSource
from specwatch.sim.demo import SCENARIO_CHANGE_S, start_demo
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.settings import AppSettings
from tests.sim_fixtures import ScaledClock

FACTOR = 4.0
"""Simulated seconds per real second."""
RUN_S = 180.0
BENCH_AT_S = 100.0
"""When `b` is pressed (simulated seconds after start): after the scenario's change and the
verdict that follows it."""
SIZES = ((80, 24), (120, 40), (160, 48))
SIZE_EVERY_S = 10
"""The size changes every ten simulated seconds, so each size sees every phase of the story."""
CUT_NUMBER = re.compile(r"\d[.,]?…")
CODE_WORDS = ("not explained by GPU state", "look at code")


def _rendered(widget: Widget) -> list[str]:
    w, h = widget.region.size
    if w <= 0 or h <= 0:
        return []
    return [s.text for s in widget.render_lines(Region(0, 0, w, h))]


@dataclass
class Frame:
    """One captured screen: its simulated time, size and each pane's lines."""

    t: float
    size: tuple[int, int]
    panes: dict[str, list[str]]
    bench_running: bool

    def states(self) -> dict[str, str]:
        """The rows' discrete states, keyed by row."""
        out: dict[str, str] = {}
        gpus = self.panes.get("gpus", [])
        for line in gpus[2:]:  # title and header first
            m = re.match(r" (\d) +\d+ ", line)
            if m:  # a GPU's row in the table
                out[f"gpu {m.group(1)}"] = "idle" if " idle" in line else "busy"
            elif re.match(r" \d+ GPUs ", line):  # the summary a small terminal shows instead
                out["gpus summary"] = "idle" if "idle" in line else "busy"
        verify = "\n".join(self.panes.get("verify", []))
        if verify:
            out["verify"] = "blank" if "tok/step –" in verify else "figures"
        load = "\n".join(self.panes.get("load", []))
        if load:
            out["load ttft"] = "shown" if "TTFT" in load else "gone"
        return out


@dataclass
class Film:
    frames: list[Frame] = field(default_factory=list)

    def flips(self, row: str, t0: float, t1: float) -> int:
        seen = [f.states()[row] for f in self.frames if t0 <= f.t < t1 and row in f.states()]
        return sum(1 for a, b in pairwise(seen) if a != b)


@contextmanager
def _demo_app(scenario: str, tmp_path: Path) -> Iterator[tuple[SpecwatchApp, ScaledClock]]:
    clock = ScaledClock(FACTOR)
    demo = start_demo(scenario=scenario, clock=clock)
    gpus = NvmlGpuSource(1.0 / FACTOR, nvml=FakeNvml(demo.world.gpus), clock=clock.now)
    session = LiveSession(
        [parse_endpoint(demo.url, env={})],
        gpus,
        metrics_interval_s=1.0 / FACTOR,
        clock=clock.now,
        demo=demo,
    )
    settings = AppSettings(
        watch_terminal=False, live_cpu=False, redraw_s=0.05, snapshot_dir=tmp_path
    )
    yield SpecwatchApp(settings, session), clock


async def _film(scenario: str, tmp_path: Path) -> Film:
    film = Film()
    with _demo_app(scenario, tmp_path) as (app, clock):
        start = clock.now()
        async with app.run_test(size=SIZES[-1]) as pilot:
            pressed = False
            next_t = 1.0
            while (t := clock.now() - start) < RUN_S:
                if t < next_t:
                    # The film's frame rate, not a wait for something: the app runs on.
                    await asyncio.sleep(clock.real_s(next_t - t))
                    continue
                next_t = float(int(t)) + 1.0
                if not pressed and t >= BENCH_AT_S:
                    await pilot.press("b")
                    pressed = True
                size = SIZES[int(t) // SIZE_EVERY_S % len(SIZES)]
                if app.size != size:
                    await pilot.resize_terminal(*size)
                panes = {
                    str(w.id): _rendered(w)
                    # The live screen, under any modal a benchmark's end puts up.
                    for w in app.screen_stack[0].query("*")
                    if w.id and w.region.area
                }
                film.frames.append(
                    Frame(t, app.size, panes, app.model.bench is not None and _running(app))
                )
            assert pressed and app.model.bench is not None
    return film


def _running(app: SpecwatchApp) -> bool:
    bench = app.model.bench
    return bench is not None and bench.active


@pytest.mark.parametrize("scenario", ["drift", "regression"])
@pytest.mark.slow
async def test_three_minutes_of_frames_hold_still(scenario: str, tmp_path: Path) -> None:
    film = await _film(scenario, tmp_path)
    # One frame per simulated second; a loaded machine skips some (the app runs on meanwhile).
    assert len(film.frames) > RUN_S * 0.5, len(film.frames)
    assert {f.size for f in film.frames} == set(SIZES)

    for f in film.frames:
        for pane, lines in f.panes.items():
            for line in lines:
                assert not CUT_NUMBER.search(line), (f.t, f.size, pane, line)

    during = [f for f in film.frames if f.bench_running]
    assert during, "the benchmark never showed as running"
    for f in during:
        verdict = " ".join(f.panes.get("verdict", []))
        assert not any(w in verdict for w in CODE_WORDS), (f.t, verdict)

    # The truth changes at the scenario's onset and when the benchmark starts and ends; a row
    # may change state then. Anywhere else, at most two changes in any minute.
    bench_t = [f.t for f in during]
    changes = [SCENARIO_CHANGE_S, min(bench_t), max(bench_t)]
    rows = {row for f in film.frames for row in f.states()}
    assert any(r.startswith("gpu") for r in rows) and "verify" in rows, rows
    for row in sorted(rows):
        for t0 in range(30, int(RUN_S) - 59, 10):
            allowed = 2 + sum(1 for c in changes if t0 <= c < t0 + 60)
            flips = film.flips(row, t0, t0 + 60)
            assert flips <= allowed, (row, t0, flips, allowed)
