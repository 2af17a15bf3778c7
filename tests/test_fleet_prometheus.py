"""The fleet source against a real Prometheus scraping simulated servers at 1 s.

Three nodes: two simulated vLLM servers and one SGLang server, each with a hand-written
dcgm-exporter (:class:`tests.prometheus_fixture.FakeDcgm`; the simulated exporter replaces it
later). Figures read through Prometheus are compared with the simulator's ground truth over the
window Prometheus actually used: the span between the first and last sample inside the
``rate()`` range, mapped to the simulator's own scrape times.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from specwatch.core.server import Dialect
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.dcgm.parse import NOT_EXPORTED
from specwatch.sources.prometheus.api import PrometheusClient, prometheus_endpoint
from specwatch.sources.prometheus.fleet import PrometheusSource
from tests.prometheus_fixture import (
    PROMETHEUS,
    SKIP_REASON,
    FakeDcgm,
    PrometheusProcess,
    ScrapeTarget,
    running_prometheus,
)

# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON),
    pytest.mark.xdist_group("fleet-prometheus"),
]

REL = 0.005
STEP_TOL_S = 0.2e-3
WINDOW_S = 6.0
DCGM_VALUES = {
    "DCGM_FI_DEV_SM_CLOCK": 1755.0,
    "DCGM_FI_DEV_MAX_SM_CLOCK": 1980.0,
    "DCGM_FI_DEV_GPU_TEMP": 61.0,
    "DCGM_FI_DEV_MEMORY_TEMP": 9223372036854775794.0,  # DCGM blank: not supported
    "DCGM_FI_DEV_POWER_USAGE": 512.5,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 123_456_789.0,
    "DCGM_FI_DEV_POWER_VIOLATION": 2500.0,
    "DCGM_FI_DEV_FB_USED": 70_000.0,
    "DCGM_FI_DEV_FB_FREE": 11_000.0,
}


@dataclass
class Node:
    name: str
    world: SimWorld
    server: SimServer
    target: ScrapeTarget
    dcgm: FakeDcgm


@dataclass
class Fleet:
    prom: PrometheusProcess
    nodes: list[Node]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    nodes: list[Node] = []
    targets: list[ScrapeTarget] = []
    try:
        for i, dialect in enumerate(("vllm", "vllm", "sglang"), start=1):
            name = f"node{i}"
            world = SimWorld(preset(dialect, background_concurrency=4, seed=i, gpu_count=2))
            server = SimServer(world)
            port = int(server.start().rsplit(":", 1)[1])
            dcgm = FakeDcgm(name, values=dict(DCGM_VALUES))
            target = ScrapeTarget(dialect, port, name)
            nodes.append(Node(name, world, server, target, dcgm))
            targets += [target, ScrapeTarget("dcgm", dcgm.start(), name)]
        data = Path(tmp_path_factory.mktemp("prometheus"))
        with running_prometheus(targets, data) as prom:
            # enough samples for a full rate window on every server
            want = (
                f"count_over_time(vllm:num_requests_running[{WINDOW_S + 2:g}s]) >= {WINDOW_S + 2:g}"
            )
            prom.wait(lambda: prom.samples(want) == 2, "a full window of samples", 40)
            yield Fleet(prom, nodes)
    finally:
        for node in nodes:
            node.server.stop()
            node.dcgm.stop()


def _client(fleet: Fleet) -> PrometheusClient:
    return PrometheusClient(prometheus_endpoint(fleet.prom.url), deadline_s=10)


def _nearest(times: list[float], t: float) -> float:
    return min(times, key=lambda x: abs(x - t))


async def test_server_figures_match_ground_truth(fleet: Fleet) -> None:
    async with _client(fleet) as client:
        source = PrometheusSource(client, rate_window_s=WINDOW_S)
        at = time.time() - 0.5
        reading = await source.refresh(at)
        assert reading.errors == ()
        assert reading.window_s == WINDOW_S and source.scrape_interval_s == 1.0
        by_instance = {s.instance: s for s in reading.servers}
        assert set(by_instance) == {n.target.instance for n in fleet.nodes}
        for node in fleet.nodes:
            server = by_instance[node.target.instance]
            counter = (
                "vllm:generation_tokens_total"
                if server.dialect is Dialect.VLLM
                else "sglang:generation_tokens_total"
            )
            raw = await client.query_matrix(
                f'{counter}{{instance="{node.target.instance}"}}[{round(WINDOW_S * 1000)}ms]', at
            )
            assert raw and len(raw[0].points) >= WINDOW_S - 1
            ts_first, ts_last = raw[0].points[0][0], raw[0].points[-1][0]
            sim_scrapes = [node.world.unix_time(x) for x in node.world.truth.scrape_times]
            t0 = _nearest(sim_scrapes, ts_first) - node.world.unix_time(0.0)
            t1 = _nearest(sim_scrapes, ts_last) - node.world.unix_time(0.0)
            truth = node.world.truth.window(t0, t1)
            assert truth.tokens > 300, truth
            w = server.window
            assert w.dt == WINDOW_S
            assert w.gen_tok_s == pytest.approx(truth.tokens / (ts_last - ts_first), rel=REL)
            assert truth.accept_length is not None
            if server.dialect is Dialect.VLLM:
                assert server.model == node.world.config.model
                assert w.accept_length == pytest.approx(truth.accept_length, rel=REL)
                assert w.draft_acceptance_rate == pytest.approx(truth.acceptance_rate, rel=REL)
                assert truth.request_step_latency_s is not None
                assert w.step_latency_s == pytest.approx(
                    truth.request_step_latency_s, abs=STEP_TOL_S
                )
            else:
                # SGLang's accept-length counters move at request end: within 5% here
                assert w.accept_length == pytest.approx(truth.accept_length, rel=0.05)
            assert w.requests_running is not None and w.requests_running > 0
        totals = reading.totals
        assert totals.servers == 3
        assert totals.gen_tok_s == pytest.approx(
            sum(s.window.gen_tok_s or 0.0 for s in reading.servers)
        )
        assert totals.accept_length is not None


async def test_queries_per_refresh_do_not_grow_with_servers(fleet: Fleet) -> None:
    one = fleet.nodes[0].target.instance
    counts: dict[int, list[int]] = {}
    async with _client(fleet) as client:
        for match in (f'{{instance="{one}"}}', None):
            source = PrometheusSource(client, server_match=match)
            readings = [await source.refresh() for _ in range(3)]
            n = len(readings[-1].servers)
            counts[n] = [r.queries for r in readings]
    assert set(counts) == {1, 3}
    assert counts[1] == counts[3] == [4, 3, 3]  # targets once, then three queries


async def test_gpus_read_and_joined_by_host(fleet: Fleet) -> None:
    async with _client(fleet) as client:
        reading = await PrometheusSource(client).refresh()
        narrowed = await PrometheusSource(client, gpu_match='{Hostname="node2"}').refresh()
    assert len(reading.gpus) == 6
    gpu = next(g for g in reading.gpus if g.hostname == "node1" and g.static.index == 1)
    assert gpu.source == "prometheus" and gpu.static.uuid == "GPU-node1-0001"
    assert gpu.sample.sm_clock_mhz == 1756 and gpu.static.max_sm_clock_mhz == 1981
    assert gpu.sample.temp_c == 62 and gpu.sample.power_w == pytest.approx(513.5)
    assert gpu.sample.energy_j == pytest.approx(123_456.790)
    assert gpu.sample.power_violation_ns == 2501  # ns, as exported
    assert gpu.sample.mem_total_bytes == (70_001 + 11_001) * 1024 * 1024
    assert gpu.sample.hbm_temp_c is None and gpu.sample.missing["hbm_temp_c"].startswith("n/s")
    assert gpu.sample.clock_event_reasons is None
    # the exporter's own reason: the field to add to its counters CSV
    assert gpu.sample.missing["clock_event_reasons"] == (
        f"{NOT_EXPORTED} (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)"
    )
    joins = {j.server: j for j in reading.joins}
    for node in fleet.nodes:
        join = joins[node.target.instance]
        assert join.via == "host"
        assert sorted(join.gpus) == [
            f"{node.name}:{node.dcgm.port}/GPU-{node.name}-{i:04d}" for i in range(2)
        ]
    assert {g.hostname for g in narrowed.gpus} == {"node2"}


async def test_history_fills_graphs(fleet: Fleet) -> None:
    async with _client(fleet) as client:
        source = PrometheusSource(client)
        end = time.time()
        history = await source.history(end - 5.0, end, 1.0)
    assert history.queries == 2
    assert set(history.servers) == {n.target.instance for n in fleet.nodes}
    for points in history.servers.values():
        assert len(points) >= 4
        assert all(p.window.gen_tok_s is not None and p.window.gen_tok_s > 0 for p in points)
    assert len(history.gpus) == 6
    assert all(len(v) >= 4 for v in history.gpus.values())
