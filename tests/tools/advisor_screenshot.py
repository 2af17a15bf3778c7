#!/usr/bin/env python3
"""Draw the draft advisor's view (``a``) for the README: ``screenshots/specwatch-advisor.svg``.

    .venv/bin/python tests/tools/advisor_screenshot.py

A simulated vLLM with 4 draft tokens whose acceptance collapses after position 2 (0.9, 0.85,
0.1, 0.1) holds a batch of 4 for 12 two-second windows, derived from its ``/metrics`` by the
real dialect code (``tests/advisor_sim.py``); the monitor's baseline is the sim's own plain step
at that batch. Deterministic (a manual clock, seed 11). A PNG is written beside it when
``rsvg-convert`` is installed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specwatch.ui.app import SpecwatchApp  # noqa: E402
from specwatch.ui.model import MonitorModel  # noqa: E402
from specwatch.ui.settings import AppSettings  # noqa: E402
from tests.advisor_sim import held_batch_windows, info_of, true_step_s, vllm_config  # noqa: E402

CONFIG = vllm_config(
    num_steps=4,
    num_draft_tokens=4,
    acceptance=(0.9, 0.85, 0.1, 0.1),
    base_step_ms=11.0,
    draft_ms_per_token=1.5,
    plain_step_ms=10.0,
    batch_step_ms=0.5,
    spec_batch_step_ms=0.5,
)
BATCH = 4


async def draw(path: Path) -> None:
    """Open the view on a model filled from the simulator and save the screen as SVG."""
    plain_ms = round(true_step_s(CONFIG, BATCH, 0) * 1000.0, 2)
    model = MonitorModel(plain_ms, f"--baseline-itl {plain_ms:g}")
    model.server = info_of(CONFIG)
    for w in held_batch_windows(CONFIG, [BATCH], windows_per_batch=12, window_s=2.0):
        model.add_window(w)
    settings = AppSettings(watch_terminal=False, live_cpu=False, show_overhead=False)
    app = SpecwatchApp(settings, model=model)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.press("a")
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.save_screenshot(filename=path.name, path=str(path.parent))


def main() -> None:
    """Write the SVG (and the PNG where ``rsvg-convert`` is installed)."""
    svg = ROOT / "screenshots" / "specwatch-advisor.svg"
    asyncio.run(draw(svg))
    print(svg)
    if shutil.which("rsvg-convert"):
        png = svg.with_suffix(".png")
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
        print(png)


if __name__ == "__main__":
    main()
