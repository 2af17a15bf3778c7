#!/usr/bin/env python3
"""CPU per redraw of the TUI, measured in-process and deterministically (no simulator, no pty).

    PYTHONPATH=. .venv/bin/python tests/tools/ui_redraw_cost.py            # 160x48, 8 GPUs
    PYTHONPATH=. .venv/bin/python tests/tools/ui_redraw_cost.py --profile /tmp/ui.prof

The app runs headless on the seeded scene (``specwatch.ui.scene``) at the given size. Each step
adds one second of GPU ticks and ``/metrics`` windows to the model, as the live session does;
every second step the app redraws (the default rate: redraw every two sampling intervals) and
the screen's update is turned into the terminal's escape codes (the headless driver skips that,
the real one does not). The same steps run twice, once with the redraw off, and the difference
is the UI's own CPU: milliseconds per redraw and CPU-s per minute at one redraw every 2 s.
``overhead.py`` measures the whole app on a real terminal; this one is quiet enough to compare
two versions of the drawing code on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
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
    from specwatch.ui import scene

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


async def _measure(steps: int, size: tuple[int, int], gpus: int, draw: bool, prof: Any) -> float:
    """CPU seconds for ``steps`` steps, drawing every REDRAW_EVERY steps when ``draw``."""
    from textual._compositor import CompositorUpdate

    from specwatch.ui import scene
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.settings import AppSettings

    start = 300
    model = scene.build_scene(seconds=start, with_bench=False, gpus=gpus)
    app = SpecwatchApp(AppSettings(watch_terminal=False, redraw_s=3600.0), model=model)
    out = {"bytes": 0}
    original = app._display

    def display(screen: Any, renderable: Any) -> None:
        if isinstance(renderable, CompositorUpdate):  # what the real driver would write
            out["bytes"] += len(renderable.render_segments(app.console))
        original(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    step = _feeder(model, gpus, start)
    async with app.run_test(size=size) as pilot:
        for _ in range(20):  # warm up: first layouts and caches
            step()
            app.redraw()
            await pilot.pause()
        c0 = time.process_time()
        for i in range(steps):
            step()
            await pilot.pause()
            if i % REDRAW_EVERY:
                continue
            if prof is not None and draw:
                prof.enable()
            if draw:
                app.redraw()
            await pilot.pause()
            if prof is not None and draw:
                prof.disable()
        cpu = time.process_time() - c0
    if draw:
        print(f"terminal output: {out['bytes'] / max(1, steps // REDRAW_EVERY):.0f} B/redraw")
    return cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200, help="seconds of data fed")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=48)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--profile", help="write a cProfile of the drawing run here")
    args = p.parse_args()
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    size = (args.width, args.height)
    idle = asyncio.run(_measure(args.steps, size, args.gpus, False, None))
    drawn = asyncio.run(_measure(args.steps, size, args.gpus, True, prof))
    redraws = (args.steps + REDRAW_EVERY - 1) // REDRAW_EVERY
    per = (drawn - idle) / redraws
    shape = f"{args.width}x{args.height}, {args.gpus} GPUs"
    print(f"{shape}, {args.steps} s of data, {redraws} redraws")
    print(f"feeding only {idle:.3f} CPU-s, feeding and drawing {drawn:.3f} CPU-s")
    print(f"UI: {per * 1000:.2f} ms per redraw = {per * 30:.3f} CPU-s/min at one redraw per 2 s")
    if prof is not None:
        prof.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
