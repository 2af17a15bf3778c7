#!/usr/bin/env python3
"""Regenerate the pictures in ``screenshots/`` from the seeded simulator.

    .venv/bin/python tests/tools/screenshots.py            # SVG + PNG for every theme, and 80x24

It also draws the story (``specwatch-story``): the demo's ``drift`` scenario after the drift,
the live verdict saying the GPU state explains the slowdown; and the third story
(``specwatch-profile``, ``--profile-only`` for it alone): ``P`` on a simulated SGLang whose
verify step runs eager, the profile read from the simulator's Kineto trace.

The simulator (8 GPUs, SGLang dialect, EAGLE-3, seed 0) runs on a ManualClock: the script moves
the clock one second at a time, samples the fake NVML and scrapes ``/metrics`` over HTTP exactly
as the live app does, restarts the server once, runs a short benchmark (its runs are marked on
the graph), and then draws the app from that history in each theme. Everything but the
benchmark is identical from run to run; the benchmark's streams follow real scheduling while the
clock is moved beside them, so a few numbers can differ by a unit (``--no-bench``: byte-identical
pictures). The monitor's own
CPU and NVML cost are left out of these pictures (they are measured, so they vary; see
``tests/tools/cost_report.py``). PNGs need ``rsvg-convert`` (Debian: ``librsvg2-bin``; install
``fonts-firacode`` for the intended font); without it only SVGs are written.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specwatch.bench.runner import BenchEvent, run_benchmark  # noqa: E402
from specwatch.core.gpu import GpuTick  # noqa: E402
from specwatch.core.snapshot_records import BenchConfig  # noqa: E402
from specwatch.sim.demo import demo_world  # noqa: E402
from specwatch.sim.fake_nvml import FakeNvml  # noqa: E402
from specwatch.sim.presets import preset  # noqa: E402
from specwatch.sim.server import SimServer  # noqa: E402
from specwatch.sim.world import SimWorld  # noqa: E402
from specwatch.sources.detect import detect  # noqa: E402
from specwatch.sources.http.client import ServerClient  # noqa: E402
from specwatch.sources.http.endpoint import parse_endpoint  # noqa: E402
from specwatch.sources.http.server_errors import ServerError  # noqa: E402
from specwatch.sources.nvml.sampler import GpuSampler  # noqa: E402
from specwatch.sources.watcher import MetricsWatcher  # noqa: E402
from specwatch.ui.app import SpecwatchApp  # noqa: E402
from specwatch.ui.model import MonitorModel  # noqa: E402
from specwatch.ui.settings import AppSettings  # noqa: E402
from specwatch.ui.themes import BUILTIN_ORDER  # noqa: E402
from tests.scene import JudgedModel  # noqa: E402
from tests.sim_fixtures import ManualClock  # noqa: E402

START = 1000.0
PLAIN_ITL_MS = 11.5
"""The baseline for the verdict: the simulated server's plain decode step (9 ms) under load."""


async def record(seconds: int, restart_at: int, bench_at: int, story: bool = False) -> MonitorModel:
    """Run the seeded simulator on a manual clock and fill a model as the live app would.

    ``story``: the demo's ``drift`` scenario instead (cold GPUs, then the boost clock falls
    about 8% with no clock-event reason set), so the live verdict turns to GPU state.
    """
    clock = ManualClock(START)
    if story:
        world, _ = demo_world(seed=0, gpus=8, clock=clock, scenario="drift")
    else:
        config = preset(
            "sglang",
            seed=0,
            gpu_count=8,
            load_time_s=4.0,
            background_concurrency=3,
            warmup_requests=2,
        )
        world = SimWorld(config, clock=clock)
    server = SimServer(world)
    url = server.start()
    model = JudgedModel(baseline_ms=PLAIN_ITL_MS, baseline_source="--baseline-itl 11.5")
    sampler = GpuSampler(nvml=FakeNvml(world.gpus, clock=clock.now), clock=clock.now)
    model.set_inventory(sampler.open())

    def tick() -> None:
        t: GpuTick = sampler.sample()
        model.add_tick(t)

    try:
        async with ServerClient(parse_endpoint(url), timeout_s=10.0) as client:

            async def wait_ready() -> MetricsWatcher:
                attempt, since = 0, clock.now()
                while True:
                    attempt += 1
                    try:
                        info = await detect(client)
                    except ServerError as e:
                        state = (
                            "loading"
                            if e.loading
                            else ("refused" if e.kind == "refused" else "error")
                        )
                        model.set_waiting(clock.now(), state, attempt, clock.now() - since, "")
                        clock.advance(1.0)
                        tick()
                        continue
                    model.set_ready(clock.now(), info)
                    watcher = MetricsWatcher(client, info, clock=clock.now)
                    model.add_window(await watcher.scrape())
                    return watcher

            watcher = await wait_ready()
            s = 0
            while s < seconds:
                s += 1
                if s == restart_at:
                    world.restart()
                    model.set_lost(clock.now(), "server restarted")
                    watcher = await wait_ready()
                if s == bench_at:
                    await bench(client, watcher, model, clock, sampler)
                clock.advance(1.0)
                tick()
                model.add_window(await watcher.scrape())
    finally:
        server.stop()
        sampler.stop()
    return model


async def bench(
    client: ServerClient,
    watcher: MetricsWatcher,
    model: MonitorModel,
    clock: ManualClock,
    sampler: GpuSampler,
) -> None:
    """A short benchmark with the manual clock moved along beside it."""
    info = model.server
    assert info is not None
    done = asyncio.Event()

    def on_event(e: BenchEvent) -> None:
        tok_s = e.run.tok_s if e.run is not None and not e.run.warmup else None
        model.bench_event(clock.now(), e.kind, e.index, e.total, e.message, tok_s)

    model.bench_event(clock.now(), "started", 0, 1, "warming up", None)
    config = BenchConfig(runs=3, warmup=1, max_tokens=1024)
    task = asyncio.create_task(
        run_benchmark(client, info, config, sampler=sampler, on_event=on_event, clock=clock.now)
    )
    task.add_done_callback(lambda _: done.set())
    next_second = clock.now() + 1.0
    while not done.is_set():
        clock.advance(0.02)
        await asyncio.sleep(0.004)
        if clock.now() >= next_second:
            next_second += 1.0
            model.add_tick(sampler.sample())
            model.add_window(await watcher.scrape())
    await task


async def shoot(
    model: MonitorModel, theme: str, size: tuple[int, int], out: Path, title: str = "--demo"
) -> Path:
    """Draw the app from ``model`` and write the SVG."""
    settings = AppSettings(theme=theme, watch_terminal=False, live_cpu=False, show_overhead=False)
    app = SpecwatchApp(settings, model=model)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.redraw()
        await pilot.pause()
        svg = app.export_screenshot(title=f"specwatch {title}  ({theme}, {size[0]}x{size[1]})")
    out.write_text(svg, encoding="utf-8")
    return out


async def profile_shot(out: Path) -> Path:
    """The live app on a simulated SGLang whose verify runs eager, after ``P`` and ``y``: the
    profile's figures and verdict over the live screen."""
    import tempfile

    from specwatch.ui.modals import TextModal
    from tests.session_world import drive_until, manual_sim

    with (
        tempfile.TemporaryDirectory() as snapshots,
        manual_sim(
            verify_eager=True, base_step_ms=12.0, plain_step_ms=12.0, gpu_count=8, seed=0
        ) as sim,
    ):
        settings = AppSettings(
            watch_terminal=False,
            live_cpu=False,
            show_overhead=False,
            redraw_s=0.1,
            snapshot_dir=Path(snapshots),
        )
        app = SpecwatchApp(settings, sim.session())
        async with app.run_test(size=(120, 36)) as pilot:

            async def pause() -> None:
                await pilot.pause(0.05)

            await drive_until(sim, lambda: app.model.connection_ok, 20, 0.5, pause)
            await drive_until(sim, lambda: app.model.now > START + 60, 60, 0.5, pause)
            await pilot.press("P")
            await pilot.press("y")
            await drive_until(sim, lambda: isinstance(app.screen, TextModal), 60, 0.05, pause)
            await pilot.pause()
            svg = app.export_screenshot(title="specwatch --demo, then P  (dark, 120x36)")
    # the profile file's temporary folder is not the reader's: name the usual one
    out.write_text(svg.replace(snapshots, "specwatch-snapshots"), encoding="utf-8")
    return out


def to_png(svg: Path) -> Path | None:
    """Convert with rsvg-convert (spaces preserved, which rsvg otherwise collapses)."""
    exe = shutil.which("rsvg-convert")
    if exe is None:
        return None
    text = svg.read_text(encoding="utf-8").replace(
        "<svg class", '<svg xml:space="preserve" class', 1
    )
    png = svg.with_suffix(".png")
    subprocess.run([exe, "-o", str(png)], input=text.encode(), check=True)
    return png


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--out", type=Path, default=ROOT / "screenshots")
    p.add_argument("--seconds", type=int, default=330, help="simulated seconds of history")
    p.add_argument(
        "--no-bench",
        action="store_true",
        help="leave out the benchmark (its streams follow real scheduling, so a few of its"
        " numbers can differ by a unit between runs; without it the pictures are identical)",
    )
    p.add_argument(
        "--story-seconds",
        type=int,
        default=120,
        help="simulated seconds of the drift scenario (the drift comes 50 s after loading)",
    )
    p.add_argument("--profile-only", action="store_true", help="draw only specwatch-profile")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    profile = asyncio.run(profile_shot(args.out / "specwatch-profile.svg"))
    print(profile.relative_to(ROOT), "+ png" if to_png(profile) else "(SVG only)")
    if args.profile_only:
        return 0
    bench_at = -1 if args.no_bench else 230
    model = asyncio.run(record(args.seconds, restart_at=150, bench_at=bench_at))
    shots = [(theme, (120, 36), f"specwatch-{theme}") for theme in BUILTIN_ORDER]
    shots.append(("dark", (80, 24), "specwatch-80x24"))
    shots.append(("dark", (160, 48), "specwatch-160x48"))
    jobs = [(model, theme, size, name, "--demo") for theme, size, name in shots]
    # The story (the README's first picture): the drift scenario after the drift.
    story = asyncio.run(record(args.story_seconds, restart_at=-1, bench_at=-1, story=True))
    jobs.append((story, "dark", (120, 36), "specwatch-story", "--demo --demo-scenario drift"))
    for m, theme, size, name, title in jobs:
        svg = asyncio.run(shoot(m, theme, size, args.out / f"{name}.svg", title))
        png = to_png(svg)
        print(
            svg.relative_to(ROOT) if svg.is_relative_to(ROOT) else svg,
            "+ png" if png else "(no rsvg-convert: SVG only)",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
