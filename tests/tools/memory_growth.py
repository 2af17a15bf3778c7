#!/usr/bin/env python3
"""RSS growth of the GPU sampler over many GPU samples, on a manual clock (no waiting).

    .venv/bin/python tests/tools/memory_growth.py [--quick] [--objects]

Eight simulated GPUs (FakeNvml over SimGpus) sampled tick after tick with the clock moved one
second each time, for 10^6 GPU samples (125 000 ticks, about 35 simulated hours; ``--quick``:
one simulated hour, when the bounded history has just filled). RSS is read from
``/proc/self/statm`` after a warm-up and at the end. ``--objects`` keeps the history as Python
objects (the plain ``Ring`` of before) to show what packing saves. Target: growth < 5 MB.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TARGET_MB = 5.0
GPUS = 8
WARMUP_TICKS = 200


def rss_mb() -> float:
    """Resident set size now, MB (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def measure(samples: int = 10**6, objects: bool = False) -> dict[str, Any]:
    """Sample ``samples`` GPU readings; RSS before and after, and the seconds it took."""
    from specwatch.core.ring import Ring
    from specwatch.sim.clock import ManualClock
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sim.gpus import SimGpus
    from specwatch.sources.nvml.sampler import GpuSampler

    clock = ManualClock(1000.0)
    gpus = SimGpus(GPUS, seed=1, start_t=clock.now())
    states = gpus.states
    memo: dict[float | None, Any] = {}

    # FakeNvml asks the simulated boards for every board's state on each NVML call; the
    # boards only change when the clock moves, so one answer per tick stands in for the driver.
    def states_once(t: float | None = None) -> Any:
        if t not in memo:
            memo.clear()
            memo[t] = states(t)
        return memo[t]

    gpus.states = states_once  # type: ignore[method-assign]
    sampler = GpuSampler(nvml=FakeNvml(gpus, clock=clock.now), clock=clock.now)
    if objects:
        sampler._history = Ring(sampler.history.maxlen)  # type: ignore[assignment]
    ticks = max(WARMUP_TICKS + 1, samples // GPUS)
    t0 = time.perf_counter()
    for i in range(ticks):
        if i == WARMUP_TICKS:
            gc.collect()
            before = rss_mb()
        clock.advance(1.0)
        gpus.advance_to(clock.now(), load=0.5 + 0.5 * ((i // 300) % 2))
        sampler.sample()
    gc.collect()
    after = rss_mb()
    return {
        "gpu_samples": ticks * GPUS,
        "ticks": ticks,
        "history_ticks": len(sampler.history),
        "rss_before_mb": before,
        "rss_after_mb": after,
        "growth_mb": after - before,
        "seconds": time.perf_counter() - t0,
        "history": "Python objects (Ring)" if objects else "packed (GpuTickHistory)",
    }


def print_result(r: dict[str, Any]) -> None:
    """One line with the verdict."""
    ok = r["growth_mb"] < TARGET_MB
    print(
        f"RSS growth over {r['gpu_samples']:,} GPU samples ({r['ticks']:,} ticks of {GPUS} GPUs, "
        f"history {r['history']}, {r['history_ticks']} ticks kept): "
        f"{r['rss_before_mb']:.1f} -> {r['rss_after_mb']:.1f} MB, +{r['growth_mb']:.1f} MB "
        f"(target < {TARGET_MB:.0f} MB): {'PASS' if ok else 'MISS'}  [{r['seconds']:.0f} s]"
    )


def main() -> int:
    """Measure and print; exit 1 on a miss."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="one simulated hour (28 800 samples)")
    p.add_argument("--objects", action="store_true", help="keep ticks as Python objects")
    args = p.parse_args()
    r = measure(3600 * GPUS if args.quick else 10**6, objects=args.objects)
    print_result(r)
    return 0 if r["growth_mb"] < TARGET_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
