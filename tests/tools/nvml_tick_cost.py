#!/usr/bin/env python3
"""CPU per GPU-sampler tick over the fake NVML: the monitor's own work, the simulator's apart.

    .venv/bin/python tests/tools/nvml_tick_cost.py                 # 8 and 64 GPUs
    .venv/bin/python tests/tools/nvml_tick_cost.py --before /work/main --profile

Each line is ``GpuSampler.sample()`` over ``FakeNvml`` on the real monotonic clock (as the demo
and ``overhead.py`` run it), after a warm-up: CPU per tick (``time.process_time``), the part spent
in the simulated boards' physics (thread time around ``SimGpus.states``, which stands in for the
driver and is subtracted, as ``overhead.py`` does), the monitor's own remainder, and the NVML calls
per GPU per tick. ``--before ROOT`` first runs the same measurement on another checkout (e.g. the
main branch) in a child process, so both sets of figures come from one run on one machine.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def measure(gpus_count: int, ticks: int, profile: bool) -> str:
    """One line of figures for ``gpus_count`` simulated GPUs (and a profile when asked)."""
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sim.gpus import SimGpus
    from specwatch.sources.nvml.sampler import GpuSampler

    gpus = SimGpus(count=gpus_count, start_t=time.monotonic())
    gpus.advance_to(time.monotonic(), load=0.9)
    states = gpus.states
    sim = [0.0]

    def metered(t: float | None = None) -> Any:
        c0 = time.thread_time()
        try:
            return states(t)
        finally:
            sim[0] += time.thread_time() - c0

    gpus.states = metered  # type: ignore[method-assign]
    fake = FakeNvml(gpus)
    sampler = GpuSampler(1.0, nvml=fake)
    sampler.open()
    for _ in range(20):
        sampler.sample()
    calls0 = sum(fake.calls.values())
    sim[0] = 0.0
    c0 = time.process_time()
    for _ in range(ticks):
        sampler.sample()
    total = time.process_time() - c0
    calls = (sum(fake.calls.values()) - calls0) / ticks / gpus_count
    own = (total - sim[0]) / ticks * 1e3
    line = (
        f"{gpus_count:3d} GPUs: {total / ticks * 1e3:8.3f} ms/tick CPU, sim physics "
        f"{sim[0] / ticks * 1e3:8.3f} ms, monitor's own {own:6.3f} ms "
        f"({own / gpus_count * 1e3:5.1f} us/GPU, {own / 10:.3f}% of a core at 1 Hz), "
        f"{calls:4.1f} NVML calls/GPU/tick"
    )
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(ticks):
            sampler.sample()
        prof.disable()
        print(line, flush=True)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    sampler.stop()
    return line


def main(argv: list[str] | None = None) -> int:
    """Print the figures; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--ticks", type=int, help="ticks measured (default: 2400 / GPUs)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile per count")
    parser.add_argument("--before", type=Path, help="another checkout to measure first")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.before is not None:
        cmd = [sys.executable, __file__, "--root", str(args.before), "--gpus"]
        cmd += [str(n) for n in args.gpus]
        if args.ticks:
            cmd += ["--ticks", str(args.ticks)]
        if args.profile:
            cmd.append("--profile")
        print(f"before ({args.before}):", flush=True)
        subprocess.run(cmd, check=True)
        print(f"after ({args.root}):", flush=True)
    sys.path.insert(0, str(args.root))
    for count in args.gpus:
        ticks = args.ticks or max(20, 2400 // count)
        line = measure(count, ticks, args.profile)
        if not args.profile:
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
