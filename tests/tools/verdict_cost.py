#!/usr/bin/env python3
"""CPU of the live verdict per second of readings, with the t critical values memoised and not.

    .venv/bin/python tests/tools/verdict_cost.py                 # 120 s and 700 s into a session
    .venv/bin/python tests/tools/verdict_cost.py --history 3600

A :class:`LiveVerdict` takes one 8-GPU tick (the fake NVML's) and one ``/metrics`` window per
second of seeded traffic until it judges, and then as many more while this process's CPU is
measured (best of five rounds). "recomputed" swaps ``stats.t_critical`` for the function it
memoises, as the code was before; both sets of figures come from one run, and the verdicts
must be the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SECONDS = 300
"""Seconds of readings measured per round."""


def _run(history: int, tick: Any) -> tuple[float, list[Any]]:
    from specwatch.core.server import MetricsWindow
    from specwatch.session.live_verdict import LiveVerdict

    rnd = random.Random(3)
    verdict = LiveVerdict(None)
    verdict.server_ready(0.0)
    states: list[Any] = []
    cpu = 0.0
    for second in range(1, history + SECONDS):
        t = float(second)
        window = MetricsWindow(
            t=t,
            dt=1.0,
            gen_tok_s=3000.0 + rnd.gauss(0.0, 40.0),
            requests_running=32.0,
            prompt_tok_s=400.0,
            accept_length=2.5,
        )
        c0 = time.process_time()
        verdict.add_tick(dataclasses.replace(tick, t=t))
        verdict.add_window(window)
        if second >= history:
            cpu += time.process_time() - c0
            states.append(verdict.state())
    return cpu / SECONDS * 1e3, states


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--history", type=int, nargs="+", default=[120, 700])
    args = p.parse_args()
    from specwatch.core import stats
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sim.gpus import SimGpus
    from specwatch.sources.nvml.sampler import GpuSampler

    gpus = SimGpus(count=8, start_t=time.monotonic())
    gpus.advance_to(time.monotonic(), load=0.9)
    sampler = GpuSampler(1.0, nvml=FakeNvml(gpus))
    sampler.open()
    tick = sampler.sample()
    memoised = stats.t_critical
    variants = {"recomputed": memoised.__wrapped__, "memoised": memoised}
    for history in args.history:
        best: dict[str, float] = {}
        seen: dict[str, list[Any]] = {}
        for _ in range(5):
            for name, fn in variants.items():
                stats.t_critical = fn  # type: ignore[assignment]
                memoised.cache_clear()
                ms, states = _run(history, tick)
                best[name] = min(best.get(name, ms), ms)
                seen[name] = states
        stats.t_critical = memoised
        assert seen["recomputed"] == seen["memoised"], "the verdicts differ"
        assert seen["memoised"][-1].phase == "judged", seen["memoised"][-1]
        before, after = best["recomputed"], best["memoised"]
        print(
            f"{history:5d} s in: recomputed {before:.3f} ms, memoised {after:.3f} ms per second "
            f"of readings ({after / before:.2f}x; {(before - after) / 10:.4f}% of a core saved)"
        )
    sampler.stop()


if __name__ == "__main__":
    main()
