"""The fleet session, the direct fleet and the fleet probe against simulated nodes.

Three nodes (vLLM, vLLM, SGLang), each with the simulated dcgm-exporter, behind a real
Prometheus; the direct fleet reads two of them without Prometheus.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from specwatch.core.fleet import FleetGpu, target_of
from specwatch.session.fleet import (
    FleetError,
    FleetEvent,
    FleetHistoryLoaded,
    FleetRefreshed,
    FleetSession,
)
from specwatch.session.fleet_probe import FleetOptions, build_fleet_source, fleet_probe
from specwatch.sources.prometheus.api import prometheus_endpoint
from specwatch.sources.prometheus.gpus import PrometheusGpuSampler, gpus_with_keys
from tests.fleet_world import SimFleet, sim_fleet, sim_nodes
from tests.prometheus_fixture import PROMETHEUS, SKIP_REASON

needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON)


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("fleet-session")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    if PROMETHEUS is None:
        pytest.skip(SKIP_REASON)
    with sim_fleet(("vllm", "vllm", "sglang"), Path(tmp_path_factory.mktemp("prom"))) as f:
        yield f


async def _events_until(session: FleetSession, refreshes: int) -> list[FleetEvent]:
    seen: list[FleetEvent] = []
    done = asyncio.Event()

    def on_event(event: FleetEvent) -> None:
        seen.append(event)
        if sum(isinstance(e, FleetRefreshed) for e in seen) >= refreshes:
            done.set()

    session.subscribe(on_event)
    async with session:
        await asyncio.wait_for(done.wait(), 30)
    return seen


@needs_prometheus
async def test_session_fills_history_then_refreshes(fleet: SimFleet) -> None:
    source, close = build_fleet_source(FleetOptions(prometheus=fleet.prom.url))
    session = FleetSession(source, interval_s=0.05, history_s=5.0, column_s=1.0, close=close)
    seen = await _events_until(session, 2)
    assert isinstance(seen[0], FleetHistoryLoaded)  # history first, before any refresh
    history = seen[0].history
    assert history.step_s == 1.0 and len(history.servers) == 3 and len(history.gpus) == 6
    refreshed = [e for e in seen if isinstance(e, FleetRefreshed)]
    assert len(refreshed) >= 2 and not [e for e in seen if isinstance(e, FleetError)]
    reading = refreshed[-1].reading
    assert {s.instance for s in reading.servers} == {n.target.instance for n in fleet.nodes}
    joins = {j.server: j for j in reading.joins}
    for node in fleet.nodes:
        join = joins[node.target.instance]
        assert join.via == "host" and len(join.gpus) == 2
        hot = [g for g in reading.gpus if g.key in join.gpus]
        assert {g.hostname for g in hot} == {node.name}
        assert all(g.sample.sm_clock_mhz and g.static.max_sm_clock_mhz for g in hot)
    assert reading.totals.servers == 3 and (reading.totals.gen_tok_s or 0) > 0
    assert session.refreshes >= 2 and session.latest is reading


async def test_session_reports_a_dead_prometheus() -> None:
    source, close = build_fleet_source(FleetOptions(prometheus="http://127.0.0.1:1", timeout_s=1.0))
    session = FleetSession(source, interval_s=0.05, history_s=5.0, close=close)
    seen = await _events_until(session, 1)
    errors = [e for e in seen if isinstance(e, FleetError)]
    assert [e.where for e in errors][:2] == ["history", "refresh"]
    refreshed = next(e for e in seen if isinstance(e, FleetRefreshed))
    assert refreshed.reading.servers == () and refreshed.reading.errors


@needs_prometheus
async def test_probe_document_from_prometheus(fleet: SimFleet) -> None:
    doc = await fleet_probe(FleetOptions(prometheus=fleet.prom.url))
    assert doc["ok"] and doc["fleet"] == fleet.prom.url
    assert len(doc["servers"]) == 3 and len(doc["gpus"]) == 6
    for s in doc["servers"]:
        assert {"instance", "dialect", "model", "gen_tok_s", "accept_length"} <= set(s)
        assert {"draft_acceptance_rate", "step_latency_s"} <= set(s)
        assert s["gen_tok_s"] > 0 and len(s["gpus"]) == 2 and "stream" not in s
    gpu = doc["gpus"][0]
    assert gpu["source"] == "prometheus" and gpu["node"] in {"node1", "node2", "node3"}
    assert gpu["sm_clock_mhz"] > 0 and gpu["uuid"]
    total = sum(s["gen_tok_s"] for s in doc["servers"])
    assert doc["totals"]["gen_tok_s"] == pytest.approx(total)
    # passive: no completion was sent to any server
    assert [n.world.submitted for n in fleet.nodes] == [0, 0, 0]


@needs_prometheus
async def test_gpu_sampler_reads_one_node(fleet: SimFleet) -> None:
    source, close = build_fleet_source(FleetOptions(prometheus=fleet.prom.url))
    reading = await source.refresh()
    await close()
    keys = next(j.gpus for j in reading.joins if j.server == fleet.nodes[1].target.instance)
    sampler = PrometheusGpuSampler(prometheus_endpoint(fleet.prom.url), gpus_with_keys(keys))
    inventory = await asyncio.to_thread(sampler.open)
    assert inventory.available and [g.index for g in inventory.gpus] == [0, 1]
    tick = await asyncio.to_thread(sampler.sample)
    assert tick.error is None and len(tick.samples) == 2
    assert sampler.ticks_since(tick.t) == [tick]
    await asyncio.to_thread(sampler.stop)


@needs_prometheus
async def test_gpu_sampler_thread_survives_its_callback_and_keeps_one_client(
    fleet: SimFleet,
) -> None:
    keys = [g.key for g in (await _first_gpus(fleet))]
    sampler = PrometheusGpuSampler(
        prometheus_endpoint(fleet.prom.url), gpus_with_keys(keys), interval_s=0.05
    )
    ticks: list[object] = []
    enough = threading.Event()

    def on_tick(tick: object) -> None:
        ticks.append(tick)
        if len(ticks) >= 3:
            enough.set()
        raise RuntimeError("a broken subscriber")

    sampler.on_tick = on_tick
    sampler.start()
    try:
        assert await asyncio.to_thread(enough.wait, 30.0)
        assert sampler.running and sampler.callback_error == "RuntimeError: a broken subscriber"
        client = sampler._client
        assert client is not None and client.requests >= 3
    finally:
        await asyncio.to_thread(sampler.stop)
    assert not sampler.running and sampler._client is None


@needs_prometheus
async def test_gpu_sampler_stopped_on_a_running_loop_closes_its_connection(
    fleet: SimFleet,
) -> None:
    keys = [g.key for g in (await _first_gpus(fleet))]
    sampler = PrometheusGpuSampler(prometheus_endpoint(fleet.prom.url), gpus_with_keys(keys))
    tick = await asyncio.to_thread(sampler.sample)
    assert tick.error is None
    client = sampler._client
    assert client is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sampler.stop()  # on this test's running loop, as the TUI stops its session
        gc.collect()
    assert sampler._client is None and client._server.http.is_closed
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


async def _first_gpus(fleet: SimFleet) -> list[FleetGpu]:
    source, close = build_fleet_source(FleetOptions(prometheus=fleet.prom.url))
    reading = await source.refresh()
    await close()
    return list(reading.gpus)


async def test_direct_fleet_with_dcgm_and_node_pairs() -> None:
    with sim_nodes(("vllm", "sglang")) as nodes:
        options = FleetOptions(
            urls=tuple(n.server_url for n in nodes),
            dcgm=(nodes[0].exporter.url,),
            nodes=(f"{nodes[1].server_url}={nodes[0].exporter.url}",),
        )
        doc = await fleet_probe(options, settle_s=1.2)
    assert doc["fleet"] == "direct" and not doc["errors"]
    by_instance = {s["instance"]: s for s in doc["servers"]}
    assert set(by_instance) == {target_of(n.server_url) for n in nodes}
    for s in by_instance.values():
        assert s["gen_tok_s"] is not None and s["gen_tok_s"] > 0
    # the exporter says Hostname="node1", but it serves on 127.0.0.1, the first server's host:
    # that one joins by host; the second is paired with it explicitly
    paired = by_instance[target_of(nodes[1].server_url)]
    assert len(paired["gpus"]) == 2 and paired["joined_by"] == "pair"
    same_host = by_instance[target_of(nodes[0].server_url)]
    assert len(same_host["gpus"]) == 2 and same_host["joined_by"] == "host"
    assert {g["source"] for g in doc["gpus"]} == {"dcgm"} and len(doc["gpus"]) == 2
    totals = doc["totals"]
    assert totals["servers"] == 2
    assert totals["gen_tok_s"] == pytest.approx(sum(s["gen_tok_s"] for s in by_instance.values()))
    assert totals["accept_length"] is not None and totals["accept_length"] > 1.0


@needs_prometheus
def test_cli_probe_prometheus_json_is_passive(
    fleet: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    from specwatch.commands.main import main

    before = [n.world.submitted for n in fleet.nodes]
    assert main(["probe", "--prometheus", fleet.prom.url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["servers"]) == 3 and len(doc["gpus"]) == 6
    assert {g["source"] for g in doc["gpus"]} == {"prometheus"}
    assert [n.world.submitted for n in fleet.nodes] == before  # no completion sent


@needs_prometheus
def test_cli_bench_prometheus_records_node_gpus(fleet: SimFleet, tmp_path: Path) -> None:
    from specwatch.bench.snapshot import read_snapshot
    from specwatch.commands.main import main

    node = fleet.nodes[0]
    exporter = f"{node.name}:{node.exporter.url.rsplit(':', 1)[1].split('/')[0]}"
    argv = ["bench", "--url", node.server_url, "--prometheus", fleet.prom.url]
    argv += ["--node", f"{node.server_url}={exporter}", "-n", "1", "--warmup", "0"]
    argv += ["--max-tokens", "64", "--gpu-interval", "0.2", "--out", str(tmp_path)]
    assert main(argv) == 0
    (path,) = tmp_path.glob("*.json")
    snap = read_snapshot(path)
    measured = [r for r in snap["runs"] if not r.get("warmup")]
    assert len(measured) == 1
    gpus = measured[0]["gpus"]
    # the node's two GPUs, read from Prometheus, summarised like NVML's
    assert [g["index"] for g in gpus] == [0, 1]
    assert all(g["sm_clock_mean_mhz"] and g["board_max_sm_clock_mhz"] for g in gpus)
