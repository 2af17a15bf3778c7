"""Measure the fleet's cost as it grows, two ways.

``--servers`` (the default: 10, 100, 1,000 and 10,000): ``specwatch probe --prometheus URL``
end to end, in a child process, against a Prometheus-like answer served over loopback HTTP for
N vLLM servers with 8 GPUs each (two gauges and three counter rates a server, the SM clock of
each GPU: 10,000 servers is then 80,000 GPU series, inside one answer's limits). Prints the
child's CPU seconds and peak RSS per size and their growth per tenfold.

    PYTHONPATH=. python tests/tools/fleet_scale.py
    PYTHONPATH=. python tests/tools/fleet_scale.py --servers 10 100 1000 10000

``--nodes``: N simulated nodes (a vLLM server plus a hand-written dcgm-exporter with 8 GPUs
each) behind a fresh real Prometheus scraping at 1 s; refreshes the fleet a few times and prints
specwatch's CPU per refresh and queries per refresh.

    PYTHONPATH=. python tests/tools/fleet_scale.py --nodes 1 4 8 --refreshes 10
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs

# Runs as a script from a checkout: the repository root holds ``tests``.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.prometheus.api import PrometheusClient, prometheus_endpoint
from specwatch.sources.prometheus.fleet import PrometheusSource
from tests.loopback_http import QuietHandler, serving
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


def _vector(series: list[tuple[dict[str, str], float]]) -> bytes:
    result = [{"metric": m, "value": [1700000000.0, repr(v)]} for m, v in series]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


def fleet_answers(n: int) -> dict[str, bytes]:
    """The three answers of one fleet refresh for ``n`` servers (8 GPUs each), by query kind."""
    gauges: list[tuple[dict[str, str], float]] = []
    rates: list[tuple[dict[str, str], float]] = []
    gpus: list[tuple[dict[str, str], float]] = []
    for i in range(n):
        server = {"instance": f"node-{i}:8000", "job": "vllm"}
        gauges.append(({"__name__": "vllm:num_requests_running", **server, "model_name": "m"}, 4))
        gauges.append(({"__name__": "vllm:num_requests_waiting", **server, "model_name": "m"}, 0))
        for field, value in (("vllm:gen", 900.0), ("vllm:itl_sum", 0.9), ("vllm:itl_count", 90.0)):
            rates.append(({**server, "specwatch_field": field}, value))
        for g in range(GPUS_PER_NODE):
            labels = {
                "__name__": "DCGM_FI_DEV_SM_CLOCK",
                "instance": f"node-{i}:9400",
                "job": "dcgm",
                "gpu": str(g),
                "UUID": f"GPU-{i}-{g}",
                "Hostname": f"node-{i}",
                "modelName": "NVIDIA H100",
            }
            gpus.append((labels, 1755.0))
    return {"gauges": _vector(gauges), "rates": _vector(rates), "gpus": _vector(gpus)}


@contextmanager
def answering(answers: dict[str, bytes]) -> Iterator[str]:
    """A Prometheus-like HTTP API on loopback answering with ``answers``; yields its URL."""
    targets = json.dumps({"status": "success", "data": {"activeTargets": []}}).encode()

    class Handler(QuietHandler):
        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(targets)

        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode())
            query = form.get("query", [""])[0]
            kind = "gpus" if "DCGM" in query else "rates" if "label_replace" in query else "gauges"
            self._send(answers[kind])

    with serving(Handler) as url:
        yield url


def probe_sizes(sizes: list[int]) -> list[tuple[int, float, float, float]]:
    """``(servers, CPU s, peak MiB, wall s)`` of ``probe --prometheus`` per fleet size."""
    from tests.child_peak import run_specwatch

    out = []
    for n in sizes:
        answers = fleet_answers(n)
        with answering(answers) as url:
            run = run_specwatch("probe", "--prometheus", url, timeout_s=300)
        shown = run.text.count(":8000 ")
        if run.rc != 0 or shown != n:
            print(f"N={n}: probe gave rc {run.rc}, {shown} servers\n{run.text[-1500:]}")
        out.append((n, run.cpu_s, run.peak_mib, run.wall_s))
        mb = sum(map(len, answers.values())) / 1e6
        print(
            f"servers={n:<6} gpus={n * GPUS_PER_NODE:<6} answers={mb:6.1f} MB  "
            f"cpu={run.cpu_s:6.2f} s  peak={run.peak_mib:6.0f} MiB  wall={run.wall_s:6.1f} s",
            flush=True,
        )
    for (n0, c0, m0, _), (n1, c1, m1, _) in itertools.pairwise(out):
        print(f"x{n1 / n0:g} servers ({n0} -> {n1}): cpu x{c1 / c0:.2f}, peak RSS x{m1 / m0:.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--nodes", type=int, nargs="+", default=None)
    parser.add_argument("--refreshes", type=int, default=10)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between refreshes")
    args = parser.parse_args(argv)
    if args.nodes is None:
        probe_sizes(args.servers)
        return 0
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
