"""The demo: a simulated server on cold GPUs that warm up under traffic, for ``--demo``."""

from __future__ import annotations

from dataclasses import dataclass

from specwatch.sim.clock import Clock
from specwatch.sim.config import preset
from specwatch.sim.dcgm_exporter import SimDcgmExporter
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld

DEMO_LOAD_TIME_S = 3.0
DEMO_BACKGROUND_USERS = 3
DEMO_TRUTH_STEPS = 300_000
"""About an hour of steps: a demo left open for days must not grow without bound."""


@dataclass
class Demo:
    """A running demo server."""

    world: SimWorld
    server: SimServer
    url: str
    dcgm: SimDcgmExporter | None = None
    """The simulated dcgm-exporter for the demo's GPUs (``--demo-dcgm``)."""

    @property
    def dcgm_url(self) -> str | None:
        """The exporter's ``/metrics`` URL, when one runs."""
        return self.dcgm.url if self.dcgm is not None else None

    def stop(self) -> None:
        """Stop the server (and the exporter)."""
        if self.dcgm is not None:
            self.dcgm.stop()
        self.server.stop()


def start_demo(
    dialect: str = "sglang",
    seed: int = 0,
    gpus: int = 8,
    clock: Clock | None = None,
    dcgm: bool = False,
) -> Demo:
    """Start a seeded demo server on loopback and return it.

    Eight cold GPUs (by default) warm up under background traffic, so the token rate drifts
    down over minutes as the boost clock falls; the model takes about three seconds to load
    and the first requests run slower (warmup). Speculation is on (EAGLE-3 style). With
    ``dcgm`` a simulated dcgm-exporter serves the GPUs too (1 s collections, on loopback).
    """
    config = preset(
        dialect,
        seed=seed,
        gpu_count=gpus,
        load_time_s=DEMO_LOAD_TIME_S,
        background_concurrency=DEMO_BACKGROUND_USERS,
        warmup_requests=2,
        metrics_enabled=True,
        spec_algorithm="EAGLE3",
        truth_max_steps=DEMO_TRUTH_STEPS,
    )
    world = SimWorld(config, clock=clock)
    server = SimServer(world)
    url = server.start()
    if not dcgm:
        return Demo(world=world, server=server, url=url)
    exporter = SimDcgmExporter(world.gpus, world.clock.now, hostname="demo-node")
    try:
        exporter.start()
    except BaseException:
        server.stop()
        raise
    return Demo(world=world, server=server, url=url, dcgm=exporter)
