#!/usr/bin/env python3
"""What does ``specwatch record`` itself cost? The recorder's CPU at the command's defaults.

    .venv/bin/python tests/tools/record_cost.py              # 60 s, 8 simulated GPUs, 1 s rates
    .venv/bin/python tests/tools/record_cost.py --seconds 20

The session runs as ``specwatch record --demo`` runs it: the seeded demo server (8 GPUs under
background traffic) on loopback, a GPU sampler on a fake NVML and a ``/metrics`` scrape every
1 s, a :class:`~specwatch.record.Recorder` at its defaults (commit every
:data:`~specwatch.record.recorder.FLUSH_S`) subscribed to it. Only the recorder's own code is
metered: the CPU time of the calling thread (``time.thread_time``) around each call that
queues an event (on the session's threads) and each commit (on the writer thread). So the
simulator, the sampler and the scrapes, and whatever else the machine runs, are not counted;
the figure is the share of one core the recording adds to watching. Target: at most 0.5%.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TARGET_SHARE = 0.005
"""At most 0.5% of one core."""
WARMUP_S = 5.0
"""Seconds before measuring: the demo loads (3 s) and the first scrapes settle."""


class Meter:
    """CPU seconds spent inside metered calls, from any thread."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.calls = 0
        self._lock = threading.Lock()
        self.on = False

    def wrap(self, fn: Any) -> Any:
        """``fn`` with its thread CPU time added to this meter while :attr:`on`."""

        def metered(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.on:
                    spent = time.thread_time() - start
                    with self._lock:
                        self.cpu_s += spent
                        self.calls += 1

        return metered


async def measure(seconds: float, path: Path) -> tuple[float, int, int, int]:
    """``(recorder CPU seconds, queued events, commits, file bytes)`` over ``seconds``."""
    from specwatch.record.recorder import Recorder
    from specwatch.session import LiveSession, NvmlGpuSource
    from specwatch.sim.demo import start_demo
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sources.http.endpoint import parse_endpoint

    demo = start_demo(gpus=8)
    gpus = NvmlGpuSource(1.0, nvml=FakeNvml(demo.world.gpus))
    session = LiveSession([parse_endpoint(demo.url)], gpus, metrics_interval_s=1.0, demo=demo)
    recorder = Recorder(path, session.endpoints, clock=session.clock, interval_s=1.0)
    queue_meter, commit_meter = Meter(), Meter()
    # Instance attributes shadow the methods: the session calls the instance, the writer
    # thread calls self.flush.
    recorder.flush = commit_meter.wrap(recorder.flush)  # type: ignore[method-assign]
    queue = queue_meter.wrap(recorder.__call__)
    recorder.start()
    session.subscribe(queue)
    try:
        async with session:
            await asyncio.sleep(WARMUP_S)
            queue_meter.on = commit_meter.on = True
            await asyncio.sleep(seconds)
            queue_meter.on = commit_meter.on = False
    finally:
        recorder.stop()
    if recorder.error is not None:
        raise SystemExit(f"record_cost: {recorder.error}")
    cpu = queue_meter.cpu_s + commit_meter.cpu_s
    return cpu, queue_meter.calls, commit_meter.calls, path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit status 0 on PASS, 1 on MISS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cpu, events, commits, size = asyncio.run(measure(args.seconds, Path(tmp) / "cost.sqlite"))
    share = cpu / args.seconds
    verdict = "PASS" if share <= TARGET_SHARE else "MISS"
    print(f"recorded       {events} events in {commits} commits over {args.seconds:g} s")
    print(f"file           {size / 1024:.0f} KiB (whole recording, warm-up included)")
    print(
        f"recorder CPU   {cpu:.3f} s = {share * 100:.2f}% of one core"
        f"  (target <= {TARGET_SHARE * 100:.1f}%)  {verdict}"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
