"""A fixed fleet reading: three servers on two nodes and one without GPUs (no live sources)."""

from __future__ import annotations

from specwatch.core.fleet import (
    FleetGpu,
    FleetServer,
    ServerRates,
    fleet_totals,
    join_gpus,
)
from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.core.server import Dialect, MetricsWindow
from specwatch.sources.prometheus.fleet import FleetReading

SCENE_T = 1000.0


def _server(
    instance: str,
    dialect: Dialect,
    model: str,
    tok_s: float,
    steps: float,
    step_tokens: float,
    running: float,
    waiting: float,
    step_ms: float,
) -> FleetServer:
    window = MetricsWindow(
        t=SCENE_T,
        dt=8.0,
        gen_tok_s=tok_s,
        accept_length=step_tokens / steps,
        step_latency_s=step_ms / 1000.0,
        requests_running=running,
        requests_waiting=waiting,
    )
    rates = ServerRates(tok_s, step_tokens, steps, step_tokens - steps, 3.0 * steps)
    return FleetServer(instance, dialect.value, dialect, model, window, rates)


def _gpu(node: str, i: int, clock: int, temp: int) -> FleetGpu:
    static = GpuStatic(i, "NVIDIA H100 80GB HBM3", f"GPU-{node}-{i}", max_sm_clock_mhz=1980)
    sample = GpuSample(i, SCENE_T, sm_clock_mhz=clock, temp_c=temp)
    instance = f"{node}:9400"
    return FleetGpu(f"{instance}/GPU-{node}-{i}", instance, node, static, sample)


def scene_reading(t: float = SCENE_T) -> FleetReading:
    """The reading the fleet snapshot and the table tests draw."""
    servers = [
        _server(
            "node1:8000", Dialect.VLLM, "meta-llama/Llama-3.1-8B", 812.4, 300.0, 930.0, 6, 0, 21.3
        ),
        _server("node2:30000", Dialect.SGLANG, "Qwen/Qwen3-32B", 405.2, 120.0, 312.0, 4, 2, 35.8),
        _server("node3:8080", Dialect.LLAMACPP, "gpt-oss-20b", 96.0, 40.0, 88.0, 1, 0, 12.0),
    ]
    gpus = [
        _gpu("node1", 0, 1980, 61),
        _gpu("node1", 1, 1755, 66),
        _gpu("node2", 0, 1410, 87),
        _gpu("node2", 1, 1980, 70),
    ]
    return FleetReading(
        t=t,
        at=1_790_000_000.0,
        window_s=8.0,
        servers=tuple(servers),
        gpus=tuple(gpus),
        joins=tuple(join_gpus(servers, gpus)),
        totals=fleet_totals(servers),
        queries=3,
        cost_s=0.002,
    )


__all__ = ["SCENE_T", "scene_reading"]
