"""Simulated nodes (a server plus the simulated dcgm-exporter each) behind a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from specwatch.sim.dcgm_exporter import SimDcgmExporter
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from tests.prometheus_fixture import PrometheusProcess, ScrapeTarget, running_prometheus


@dataclass
class SimNode:
    """One node: its name, world, server and exporter, and the server's scrape target."""

    name: str
    world: SimWorld
    server: SimServer
    server_url: str
    exporter: SimDcgmExporter
    target: ScrapeTarget


@dataclass
class SimFleet:
    """The running Prometheus and its nodes."""

    prom: PrometheusProcess
    nodes: list[SimNode]


def _port(url: str) -> int:
    return int(url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[1])


@contextmanager
def sim_nodes(dialects: Sequence[str], gpus: int = 2) -> Iterator[list[SimNode]]:
    """Start one simulated node per dialect (``node1``...); stop them all at the end."""
    with ExitStack() as stack:
        nodes: list[SimNode] = []
        for i, dialect in enumerate(dialects, start=1):
            name = f"node{i}"
            world = SimWorld(preset(dialect, background_concurrency=4, seed=i, gpu_count=gpus))
            server = SimServer(world)
            url = server.start()
            stack.callback(server.stop)
            exporter = SimDcgmExporter(world.gpus, world.now, hostname=name)
            exporter.start()
            stack.callback(exporter.stop)
            target = ScrapeTarget(dialect, _port(url), name)
            nodes.append(SimNode(name, world, server, url, exporter, target))
        yield nodes


@contextmanager
def sim_fleet(dialects: Sequence[str], data_dir: Path, gpus: int = 2) -> Iterator[SimFleet]:
    """Nodes behind a Prometheus (1 s scrape); yields once a rate window has samples."""
    with sim_nodes(dialects, gpus) as nodes:
        targets: list[ScrapeTarget] = []
        for node in nodes:
            targets += [node.target, ScrapeTarget("dcgm", _port(node.exporter.url), node.name)]
        with running_prometheus(targets, data_dir) as prom:
            n = len(nodes)
            prom.wait(
                lambda: (
                    prom.samples(
                        'count_over_time({__name__=~"vllm:num_requests_running|'
                        'sglang:num_running_reqs"}[6s]) >= 5'
                    )
                    == n
                ),
                "a full rate window on every server",
                40,
            )
            yield SimFleet(prom, nodes)


__all__ = ["SimFleet", "SimNode", "sim_fleet", "sim_nodes"]
