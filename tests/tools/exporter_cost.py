#!/usr/bin/env python3
"""What does ``specwatch exporter`` itself cost? Its CPU at the defaults, and its ``/metrics`` size.

    .venv/bin/python tests/tools/exporter_cost.py              # 30 s, 8 simulated GPUs
    .venv/bin/python tests/tools/exporter_cost.py --seconds 60 --scrape 15

The session runs as ``specwatch exporter --demo`` runs it: the seeded demo server (8 GPUs under
background traffic) on loopback, a GPU sampler on a fake NVML and a ``/metrics`` scrape of the
server every 1 s. The exposition is built every ``--scrape`` seconds (default 1: a fast
Prometheus; Prometheus' default is 15 s). Metered, as for ``record_cost.py``, is the
exporter's own code: the CPU time of the calling thread (``time.thread_time``) in its session
subscriber and in building each scrape's exposition text (what the HTTP handler runs; the
socket and HTTP parsing are not counted). The simulator, the sampler and the server scrapes
(what watching costs, in any front end) are not counted. Target: at most 0.5% of one core,
and a ``/metrics`` answer under 50 KB with 8 GPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.tools.record_cost import WARMUP_S, Meter  # noqa: E402

TARGET_SHARE = 0.005
"""At most 0.5% of one core."""
TARGET_BYTES = 50_000
"""``/metrics`` under 50 KB for 8 GPUs."""


async def measure(seconds: float, scrape_s: float) -> tuple[float, int, int, int]:
    """``(exporter CPU seconds, events taken, scrapes answered, largest /metrics bytes)``."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.process_collector import ProcessCollector

    from specwatch.exporter.families import SessionCollector
    from specwatch.exporter.readings import Readings
    from specwatch.session import LiveSession, NvmlGpuSource
    from specwatch.sim.demo import start_demo
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sources.http.endpoint import parse_endpoint

    demo = start_demo(gpus=8)
    gpus = NvmlGpuSource(1.0, nvml=FakeNvml(demo.world.gpus))
    session = LiveSession([parse_endpoint(demo.url)], gpus, metrics_interval_s=1.0, demo=demo)
    events, scrapes = Meter(), Meter()
    readings = Readings(session.endpoints)
    session.subscribe(events.wrap(readings))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(readings.view))
    ProcessCollector(registry=registry)
    render = scrapes.wrap(lambda: generate_latest(registry))
    largest = 0
    async with session:
        await asyncio.sleep(WARMUP_S)
        events.on = scrapes.on = True
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            # What prometheus_client's HTTP handler runs for a scrape, on a thread of its own.
            body = await asyncio.to_thread(render)
            largest = max(largest, len(body))
            await asyncio.sleep(scrape_s)
        events.on = scrapes.on = False
    return events.cpu_s + scrapes.cpu_s, events.calls, scrapes.calls, largest


def _cpu_seconds(url: str) -> float:
    for line in httpx.get(url, timeout=5).text.splitlines():
        if line.startswith("process_cpu_seconds_total "):
            return float(line.split()[1])
    raise SystemExit("exporter_cost: no process_cpu_seconds_total in the exporter's /metrics")


def whole_process(seconds: float) -> float:
    """CPU seconds of a whole ``specwatch exporter URL --no-gpu`` process over ``seconds``, its
    session included, against ``specwatch sim --background 2`` in another process (read from
    the exporter's own ``process_cpu_seconds_total``)."""
    import re
    import subprocess

    from tests.prometheus_fixture import free_port

    port = free_port()
    run = [sys.executable, "-m", "specwatch"]
    sim = subprocess.Popen([*run, "sim", "--port", str(port), "--background", "2"], cwd=ROOT)
    exporter = None
    try:
        time.sleep(WARMUP_S)
        exporter = subprocess.Popen(
            [*run, "exporter", f"127.0.0.1:{port}", "--no-gpu", "--listen", "127.0.0.1:0"],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert exporter.stderr is not None
        found = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", exporter.stderr.readline())
        if found is None:
            raise SystemExit("exporter_cost: the exporter did not start")
        time.sleep(2 * WARMUP_S)
        before = _cpu_seconds(found.group(1))
        time.sleep(seconds)
        return _cpu_seconds(found.group(1)) - before
    finally:
        for proc in (exporter, sim):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=20)


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit status 0 on PASS, 1 on MISS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds")
    parser.add_argument("--scrape", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument(
        "--process", action="store_true", help="also a whole exporter process against a sim"
    )
    args = parser.parse_args(argv)
    cpu, events, scrapes, size = asyncio.run(measure(args.seconds, args.scrape))
    share = cpu / args.seconds
    cpu_ok = "PASS" if share <= TARGET_SHARE else "MISS"
    size_ok = "PASS" if size < TARGET_BYTES else "MISS"
    print(
        f"taken          {events} session events, answered {scrapes} scrapes in {args.seconds:g} s"
    )
    print(
        f"exporter CPU   {cpu:.3f} s = {share * 100:.2f}% of one core"
        f"  (target <= {TARGET_SHARE * 100:.1f}%)  {cpu_ok}"
    )
    print(f"/metrics       {size} bytes with 8 GPUs (target < {TARGET_BYTES})  {size_ok}")
    if args.process:
        whole = whole_process(args.seconds)
        print(
            f"whole process  {whole:.3f} s = {whole / args.seconds * 100:.2f}% of one core"
            " (specwatch exporter URL --no-gpu, its session included; for information)"
        )
    return 0 if cpu_ok == size_ok == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
