"""The story's two GPU states on the simulator, for ``specwatch bench --demo``.

One user, speculation on, eight simulated GPUs held either cold (boost clocks) or hot and
power-capped, optionally with a slower verify step standing in for a code regression. Both
states run the same simulated server, so a comparison of their snapshots shows what the GPUs
alone do to tok/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from specwatch.sim.demo import DEMO_GPU
from specwatch.sim.gpus import SimGpus, with_overrides
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import RealClock, SimWorld

GPU_STATES = ("cold", "hot", "warming")

_COLD = (40.0, 700.0)
"""Pinned temperature (°C) and power limit (W): full boost at the H100's real limit; the demo's
boards decode below it, so no cap."""
_HOT = (72.0, 700.0)
"""Warm: the boost clock is lower with no clock-event reason set, as in the story (all GPUs
in P0, nothing flagged, yet 89 tok/s had become 82.7)."""
_WARMING = (35.0, 700.0)
"""Start temperature (not pinned) and power limit: idle boards that heat up under load."""
WARMING_TAU_S = 4.0
"""The warming boards' thermal time constant: seconds, not minutes, so a demo shows it."""


@dataclass
class StoryServer:
    """A running story server and the world behind it (its GPUs feed a fake NVML)."""

    world: SimWorld
    server: SimServer
    url: str

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


def start_story_server(
    gpu_state: str = "cold", step_factor: float = 1.0, dialect: str = "sglang", seed: int = 0
) -> StoryServer:
    """Start a simulated server whose GPUs are held in ``gpu_state``.

    Args:
        gpu_state: ``"cold"`` or ``"hot"``.
        step_factor: Multiplies the verify-step latency (``> 1`` imitates slower code).
        dialect: Which server to imitate.
        seed: Random seed of the simulation.
    """
    if gpu_state not in GPU_STATES:
        raise ValueError(f"GPU state must be one of {', '.join(GPU_STATES)}, got {gpu_state!r}")
    if not step_factor > 0:
        raise ValueError(f"step factor must be positive, got {step_factor}")
    base = preset(dialect)
    config = preset(
        dialect,
        seed=seed,
        background_concurrency=0,
        warmup_requests=2,
        base_step_ms=base.base_step_ms * step_factor,
        plain_step_ms=base.plain_step_ms * step_factor,
    )
    clock = RealClock()
    spec = DEMO_GPU
    if gpu_state == "warming":
        spec = with_overrides(DEMO_GPU, thermal_tau_s=WARMING_TAU_S)
    boards = SimGpus(count=config.gpu_count, spec=spec, seed=seed, start_t=clock.now())
    world = SimWorld(config, clock=clock, gpus=boards)
    temp_c, limit_w = {"cold": _COLD, "hot": _HOT, "warming": _WARMING}[gpu_state]
    world.gpus.set_temperature(temp_c, pin=gpu_state != "warming")
    world.gpus.set_power_limit(limit_w)
    server = SimServer(world)
    url = server.start()
    return StoryServer(world=world, server=server, url=url)
