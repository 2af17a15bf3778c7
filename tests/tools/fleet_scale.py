"""Measure the fleet source's cost against a real Prometheus as the fleet grows.

For each N, starts N simulated nodes (a vLLM server plus a hand-written dcgm-exporter with 8
GPUs each) behind a fresh Prometheus scraping at 1 s, then refreshes the fleet a few times and
prints specwatch's CPU per refresh and queries per refresh.

    PYTHONPATH=. python tests/tools/fleet_scale.py --nodes 1 4 8 --refreshes 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.prometheus.api import PrometheusClient, prometheus_endpoint
from specwatch.sources.prometheus.fleet import PrometheusSource
from tests.prometheus_fixture import (
    PROMETHEUS,
    SKIP_REASON,
    FakeDcgm,
    ScrapeTarget,
    running_prometheus,
)

GPUS_PER_NODE = 8
DCGM_VALUES = {
    "DCGM_FI_DEV_SM_CLOCK": 1755.0,
    "DCGM_FI_DEV_MAX_SM_CLOCK": 1980.0,
    "DCGM_FI_DEV_GPU_TEMP": 61.0,
    "DCGM_FI_DEV_POWER_USAGE": 512.5,
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0.0,
    "DCGM_FI_DEV_PCIE_LINK_GEN": 5.0,
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": 16.0,
}


async def _measure(url: str, refreshes: int, interval_s: float) -> tuple[float, int, int, int]:
    async with PrometheusClient(prometheus_endpoint(url)) as client:
        source = PrometheusSource(client)
        await source.refresh()  # reads the targets once
        costs: list[float] = []
        queries: list[int] = []
        reading = None
        for _ in range(refreshes):
            reading = await source.refresh()
            costs.append(reading.cost_s)
            queries.append(reading.queries)
            await asyncio.sleep(interval_s)
        assert reading is not None
        return statistics.median(costs), max(queries), len(reading.servers), len(reading.gpus)


def run(n: int, refreshes: int, interval_s: float) -> str:
    """One fleet size: start, measure, stop; one line of results."""
    servers: list[SimServer] = []
    exporters: list[FakeDcgm] = []
    targets: list[ScrapeTarget] = []
    try:
        for i in range(1, n + 1):
            world = SimWorld(preset("vllm", background_concurrency=2, seed=i, gpu_count=1))
            server = SimServer(world)
            port = int(server.start().rsplit(":", 1)[1])
            servers.append(server)
            dcgm = FakeDcgm(f"node{i}", gpus=GPUS_PER_NODE, values=dict(DCGM_VALUES))
            exporters.append(dcgm)
            targets += [
                ScrapeTarget("vllm", port, f"node{i}"),
                ScrapeTarget("dcgm", dcgm.start(), f"node{i}"),
            ]
        with tempfile.TemporaryDirectory() as tmp, running_prometheus(targets, Path(tmp)) as prom:
            # a full rate window (4 scrape intervals) before measuring
            prom.wait(
                lambda: prom.samples("count_over_time(vllm:num_requests_running[5s]) >= 5") == n,
                "a full rate window",
                60,
            )
            cpu, queries, got_servers, got_gpus = asyncio.run(
                _measure(prom.url, refreshes, interval_s)
            )
        return (
            f"N={n:<3} servers={got_servers:<3} gpus={got_gpus:<4} "
            f"cpu/refresh={cpu * 1000:7.1f} ms  queries/refresh={queries}"
        )
    finally:
        for server in servers:
            server.stop()
        for dcgm in exporters:
            dcgm.stop()


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--refreshes", type=int, default=10)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between refreshes")
    args = parser.parse_args(argv)
    if PROMETHEUS is None:
        print(SKIP_REASON, file=sys.stderr)
        return 2
    started = time.monotonic()
    for n in args.nodes:
        print(run(n, args.refreshes, args.interval), flush=True)
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
