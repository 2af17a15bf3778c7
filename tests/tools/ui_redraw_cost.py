#!/usr/bin/env python3
"""CPU per redraw of the TUI, measured in-process and deterministically (no simulator, no pty).

    PYTHONPATH=. .venv/bin/python tests/tools/ui_redraw_cost.py            # 160x48, 8 GPUs
    PYTHONPATH=. .venv/bin/python tests/tools/ui_redraw_cost.py --profile /tmp/ui.prof
    PYTHONPATH=. .venv/bin/python tests/tools/ui_redraw_cost.py --history 3600   # an hour in

The app runs headless on the seeded scene (``tests/scene.py``) at the given size. Each step
adds one second of GPU ticks and ``/metrics`` windows to the model, as the live session does,
and lets the app settle; every second step the app then redraws (the default rate: redraw every
two sampling intervals) and settles again, and the screen's update is turned into the
terminal's escape codes (the headless driver skips that, the real one does not). The UI's cost
per redraw is the median CPU of a redraw-and-settle minus the median of a settle alone, which
keeps the figure steady on a busy machine. ``overhead.py`` measures the whole app on a real
terminal; this one compares two versions of the drawing code.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

REDRAW_EVERY = 2
"""Steps (seconds of data) per redraw, as the app's default redraw of 2 s at 1 s sampling."""


def _feeder(model: Any, gpus: int, start: int) -> Any:
    """A function that adds one more second of seeded scene data to ``model`` per call."""
    from specwatch.core.gpu import GpuTick
    from tests import scene

    rng = random.Random(1)
    base = scene.build_scene(seconds=start + 1, with_bench=False, gpus=gpus).window
    assert base is not None
    state = {"s": start}

    def step() -> None:
        state["s"] += 1
        t = float(state["s"])
        samples = tuple(scene._gpu_sample(i, t, 0.9, 0.92, rng) for i in range(gpus))
        model.add_tick(GpuTick(t=t, wall_time=1.7e9 + t, samples=samples, cost_ms=0.41))
        tok = 2200.0 + rng.uniform(-60, 60)
        model.add_window(dataclasses.replace(base, t=t, gen_tok_s=round(tok, 1), tokens=tok))

    return step


async def _measure(
    steps: int, size: tuple[int, int], gpus: int, prof: Any, history_s: int = 300
) -> tuple[list[float], list[float], float]:
    """Per-step CPU: ``(drawn, idle, bytes per redraw)``.

    Each step feeds one second of data and lets the app settle (``idle``); every
    REDRAW_EVERY steps the app then redraws and settles again (``drawn``, the same settling
    plus the redraw, the compositor and the escape codes).
    """
    from textual._compositor import CompositorUpdate

    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.settings import AppSettings
    from tests import scene

    start = history_s
    model = scene.build_scene(seconds=start, with_bench=False, gpus=gpus)
    settings = AppSettings(watch_terminal=False, redraw_s=3600.0, live_cpu=False)
    app = SpecwatchApp(settings, model=model)
    out = {"bytes": 0}
    original = app._display

    def display(screen: Any, renderable: Any) -> None:
        if isinstance(renderable, CompositorUpdate):  # what the real driver would write
            out["bytes"] += len(renderable.render_segments(app.console))
        original(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    step = _feeder(model, gpus, start)
    clock = time.thread_time
    drawn: list[float] = []
    idle: list[float] = []
    async with app.run_test(size=size) as pilot:
        for _ in range(20):  # warm up: first layouts and caches
            step()
            app.redraw()
            await pilot.pause()
        out["bytes"] = 0
        for i in range(steps):
            step()
            c0 = clock()
            await pilot.pause()
            idle.append(clock() - c0)
            if i % REDRAW_EVERY:
                continue
            if prof is not None:
                prof.enable()
            c0 = clock()
            app.redraw()
            await pilot.pause()
            drawn.append(clock() - c0)
            if prof is not None:
                prof.disable()
    return drawn, idle, out["bytes"] / max(1, len(drawn))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200, help="seconds of data fed")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=48)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--history", type=int, default=300, help="seconds of history before measuring")
    p.add_argument("--profile", help="write a cProfile of the redraws here")
    p.add_argument(
        "--caches", action="store_true", help="print how full Rich's and Textual's caches end"
    )
    args = p.parse_args()
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    size = (args.width, args.height)
    drawn, idle, out_bytes = asyncio.run(_measure(args.steps, size, args.gpus, prof, args.history))
    per = statistics.median(drawn) - statistics.median(idle)
    low = _quartile(drawn) - _quartile(idle)
    shape = f"{args.width}x{args.height}, {args.gpus} GPUs, {args.history} s of history"
    print(f"{shape}, {args.steps} s of data, {len(drawn)} redraws, {out_bytes:.0f} B written each")
    print(
        f"UI: {per * 1000:.2f} ms per redraw (median; lower quartile {low * 1000:.2f})"
        f" = {per * 30:.3f} CPU-s/min at one redraw per 2 s"
    )
    if args.caches:
        print(_cache_fill())
    if prof is not None:
        prof.dump_stats(args.profile)
    return 0


def _cache_fill() -> str:
    """Entries in the bounded caches a redraw fills: Rich's string widths and Textual's region
    geometry (each entry keeps its key alive: a graph row, a region)."""
    from rich.cells import cached_cell_len
    from textual.geometry import Region

    caches = {
        "rich cached_cell_len": cached_cell_len,
        "Region.intersection": Region.intersection,
        "Region.translate": Region.translate,
    }
    return ", ".join(
        f"{name} {f.cache_info().currsize}/{f.cache_info().maxsize}" for name, f in caches.items()
    )


def _quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4)[0]


if __name__ == "__main__":
    raise SystemExit(main())
