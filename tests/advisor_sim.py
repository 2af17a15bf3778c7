"""The simulator as the draft advisor's oracle: windows from a held batch, and the true figures.

The engine runs headless on a manual clock; each window is derived from two ``/metrics``
bodies by the real dialect code, exactly as the live watch derives it, but without HTTP.
GPUs are held at full clock (temperature pinned, no power cap), so a step costs what the
config says and the truth below is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from specwatch.core.server import MetricsWindow, ServerInfo, SpecConfig
from specwatch.sim.config import SimConfig
from specwatch.sim.presets import preset
from specwatch.sim.world import SimWorld
from specwatch.sources.dialects.base import WindowBuilder, dialect_for
from specwatch.sources.metrics.parse import parse_metrics
from specwatch.sources.metrics.prom import Scrape
from tests.sim_fixtures import ManualClock

STEADY: dict[str, Any] = {
    "warmup_requests": 0,
    "prefill_ms": 2.0,
    "gpu_count": 1,
    "eos_per_token": 0.0,
    "seed": 11,
}


def vllm_config(**overrides: Any) -> SimConfig:
    """A simulated vLLM with steady steps (no warm-up, short prefill)."""
    return preset("vllm", **{**STEADY, **overrides})


def info_of(config: SimConfig) -> ServerInfo:
    """What detection would say about a simulated server."""
    return ServerInfo(
        base_url="http://sim",
        dialect=config.dialect,
        spec=SpecConfig(
            enabled=config.spec_enabled,
            num_draft_tokens=config.drafts_per_step if config.spec_enabled else None,
            topk=1,
        ),
    )


def _scrape(world: SimWorld) -> Scrape:
    running, waiting = world.running_snapshot()
    body = world.telemetry.exposition(running, waiting, world.now(), 0.0, 0.0)
    return parse_metrics(body.decode())


def held_batch_windows(
    config: SimConfig,
    batches: Sequence[int],
    windows_per_batch: int = 8,
    window_s: float = 2.0,
    settle_s: float = 0.5,
) -> list[MetricsWindow]:
    """Windows of ``config``'s server holding each running batch in turn (ascending).

    The window in which the batch changes is dropped, as a sweep would.
    """
    clock = ManualClock(1000.0)
    world = SimWorld(config, clock=clock)
    world.gpus.set_temperature(world.gpus.spec.ambient_c, pin=True)
    world.gpus.set_power_limit(10_000.0)
    dialect = dialect_for(config.dialect)
    info = info_of(config)
    out: list[MetricsWindow] = []
    held = 0
    for batch in batches:
        assert batch >= held, "batches are held in ascending order"
        for _ in range(batch - held):
            world.submit(16, 10**9)
        held = batch
        t = clock.now() + settle_s
        clock.set(t)
        world.advance_to(t)
        prev, t_prev = _scrape(world), t
        for _ in range(windows_per_batch):
            t = clock.now() + window_s
            clock.set(t)
            world.advance_to(t)
            cur = _scrape(world)
            b = WindowBuilder()
            dialect.derive_window(b, cur, prev, t - t_prev, info)
            out.append(MetricsWindow(t=t, dt=t - t_prev, sources=b.sources, **b.values))
            prev, t_prev = cur, t
    return out


def plain_of(config: SimConfig) -> SimConfig:
    """The same server without speculation."""
    return replace(config, spec_algorithm=None)


def true_expected_len(config: SimConfig, k: int) -> float:
    """``1 + Σ_{i<=k} Π_{j<=i} acceptance_j``: the sim's conditional rates chained."""
    total, chain = 1.0, 1.0
    for p in config.acceptance[:k]:
        chain *= p
        total += chain
    return total


def true_step_s(config: SimConfig, batch: int, k: int) -> float:
    """The sim's own step time at ``batch`` had it run ``k`` drafts (0: plain)."""
    if k == 0:
        return plain_of(config).decode_step_ms(batch) / 1000.0
    return replace(config, num_steps=k, num_draft_tokens=k).decode_step_ms(batch) / 1000.0


def true_gain(config: SimConfig, batch: int, k: int) -> float:
    """The true system tok/s at ``k`` over plain decoding, minus one."""
    return (
        true_expected_len(config, k) * true_step_s(config, batch, 0) / true_step_s(config, batch, k)
        - 1.0
    )


def true_best_k(config: SimConfig, batch: int) -> int:
    """The draft length (0: off) with the highest true throughput at ``batch``."""
    k_max = config.max_accepted
    return max(range(k_max + 1), key=lambda k: true_gain(config, batch, k))


def true_loses_from(config: SimConfig, batches: Sequence[int]) -> int | None:
    """The first of ``batches`` from which speculation truly loses at every one above."""
    start: int | None = None
    for b in batches:
        loses = true_best_k(config, b) == 0
        start = (b if start is None else start) if loses else None
    return start
