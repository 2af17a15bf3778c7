"""The demo: a simulated server on cold GPUs that warm up under traffic, for ``--demo``; and the
story's two GPU states, cold or hot and power-capped, for ``specwatch bench --demo``.

A scenario replays the story fast (``--demo-scenario``): the GPUs are held cold until the live
verdict has a reference, then ``drift`` warms them (the boost clock falls about 8% with no
clock-event reason set, as in the story) and ``regression`` slows the verify step by 8% with
the clocks unchanged (a code regression); ``eager`` makes the verify step lose its CUDA graphs
(the seed's 29 ms against 12 ms: a code change, and ``P`` shows why); ``memcap`` runs a
memory-bound decode (80% of a step waits on HBM) and then lowers the memory clock 9% as a power
cap does, the SM clock steady.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specwatch.sim.dcgm_exporter import SimDcgmExporter
from specwatch.sim.gpus import SimGpus, SimGpuSpec, with_overrides
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import Clock, RealClock, SimWorld

DEMO_LOAD_TIME_S = 3.0
DEMO_BACKGROUND_USERS = 3
DEMO_TRUTH_STEPS = 300_000
"""About an hour of steps: a demo left open for days must not grow without bound."""

DEMO_GPU = SimGpuSpec(dynamic_power_w=520.0)
"""An H100 at its real 700 W limit that decodes at about 590 W at full boost: a decode step
does not press on the power limit, so the cold state has no clock-event reason set."""

SCENARIOS = ("drift", "regression", "eager", "memcap")
SCENARIO_CHANGE_S = 50.0
"""Seconds after the model loaded when a scenario's change happens (warmup, then the live
verdict's 30 s reference, fit before it)."""
COLD_C = 40.0
HOT_C = 73.0
"""Pinned temperatures: full boost, and about 8% below it (55 °C knee, 9 MHz per °C)."""
REGRESSION_FACTOR = 1.08
MEMCAP_SHARE = 0.8
"""Share of a ``memcap`` decode step that waits on HBM."""
MEMCAP_MHZ = 2383
"""The ``memcap`` memory clock: 9% below the demo board's 2619 MHz."""


@dataclass
class Scenario:
    """A script the world runs as its clock moves: cold GPUs, then one change."""

    name: str
    change_at: float
    """World time of the change."""
    changed: bool = field(default=False)

    def apply(self, world: SimWorld, t: float) -> None:
        """Hold the GPUs cold until ``change_at``, then make the change (once)."""
        if self.changed:
            return
        if t < self.change_at:
            world.gpus.set_temperature(COLD_C, pin=True)
            return
        self.changed = True
        if self.name == "drift":
            world.gpus.set_temperature(HOT_C, pin=True)
        elif self.name == "memcap":
            world.gpus.set_memory_clock(MEMCAP_MHZ)
        elif self.name == "eager":
            world.engine.config = replace(world.engine.config, verify_eager=True)
        else:
            cfg = world.engine.config
            world.engine.config = replace(
                cfg,
                base_step_ms=cfg.base_step_ms * REGRESSION_FACTOR,
                plain_step_ms=cfg.plain_step_ms * REGRESSION_FACTOR,
            )


@dataclass
class Demo:
    """A running demo server."""

    world: SimWorld
    server: SimServer
    url: str
    dcgm: SimDcgmExporter | None = None
    """The simulated dcgm-exporter for the demo's GPUs (``--demo-dcgm``)."""
    scenario: Scenario | None = None

    @property
    def dcgm_url(self) -> str | None:
        """The exporter's ``/metrics`` URL, when one runs."""
        return self.dcgm.url if self.dcgm is not None else None

    def stop(self) -> None:
        """Stop the server (and the exporter)."""
        if self.dcgm is not None:
            self.dcgm.stop()
        self.server.stop()


def demo_world(
    dialect: str = "sglang",
    seed: int = 0,
    gpus: int = 8,
    clock: Clock | None = None,
    scenario: str | None = None,
) -> tuple[SimWorld, Scenario | None]:
    """The demo's simulated world (and its scenario script, when one is chosen)."""
    if scenario is not None and scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
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
    if scenario is not None:
        # Users who never pause and ask for long answers: a steady load (few prefill stalls),
        # so the only change is the scenario's.
        config = replace(
            config,
            background_think_s=(0.0, 0.02),
            background_prompt_tokens=(64, 128),
            background_max_tokens=(900, 1000),
            # The slow first requests would each last seconds at these lengths, long enough to
            # look settled: the replay starts warm.
            warmup_requests=0,
        )
    clock = clock or RealClock()
    spec = DEMO_GPU
    if scenario == "memcap":
        spec = with_overrides(DEMO_GPU, memory_bound_share=MEMCAP_SHARE)
    boards = SimGpus(count=gpus, spec=spec, seed=seed, start_t=clock.now())
    world = SimWorld(config, clock=clock, gpus=boards)
    script = None
    if scenario is not None:
        script = Scenario(scenario, world.loaded_at + SCENARIO_CHANGE_S)
        s = script
        world.schedule.append(lambda t: s.apply(world, t))
    return world, script


def start_demo(
    dialect: str = "sglang",
    seed: int = 0,
    gpus: int = 8,
    clock: Clock | None = None,
    scenario: str | None = None,
    dcgm: bool = False,
) -> Demo:
    """Start a seeded demo server on loopback and return it.

    Eight cold GPUs (by default) warm up under background traffic, so the token rate drifts
    down over minutes as the boost clock falls; the model takes about three seconds to load
    and the first requests run slower (warmup). Speculation is on (EAGLE-3 style). With a
    ``scenario`` (:data:`SCENARIOS`) the GPUs stay cold until its change. With ``dcgm`` a
    simulated dcgm-exporter serves the GPUs too (1 s collections, on loopback).
    """
    world, script = demo_world(dialect, seed, gpus, clock, scenario)
    server = SimServer(world)
    url = server.start()
    if not dcgm:
        return Demo(world=world, server=server, url=url, scenario=script)
    exporter = SimDcgmExporter(world.gpus, world.clock.now, hostname="demo-node")
    try:
        exporter.start()
    except BaseException:
        server.stop()
        raise
    return Demo(world=world, server=server, url=url, dcgm=exporter, scenario=script)


# --- the story's two GPU states, for specwatch bench --demo -----------------------------------


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
