"""``/metrics`` texts of the simulator for each dialect and imitated version, and of its
dcgm-exporter twin, without HTTP.

Used by the filtered-parse and dcgm reader tests and by ``tests/tools/cost_report.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

EXPOSITION_CASES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("sglang", "0.4.9", {}),
    ("sglang", "0.4.10", {}),
    ("sglang", "0.5.4", {}),
    ("sglang", "0.5.10", {}),
    ("sglang", "0.5.16", {}),
    ("sglang", "0.5.23", {}),
    ("sglang", "0.5.23", {"spec_algorithm": None}),
    ("sglang", "0.5.23", {"tp_size": 2}),
    ("vllm", "0.9.2", {}),
    ("vllm", "0.11.0", {}),
    ("vllm", "0.20.0", {}),
    ("vllm", "0.33.0", {}),
    ("vllm", "0.33.0", {"dp_engines": 2}),
    ("vllm", "0.33.0", {"spec_algorithm": None}),
    ("llamacpp", "b6000-0000000", {}),
    ("llamacpp", "b6500-0c1e570", {}),
    ("openai", "1.0.0", {}),
)
"""``(dialect, version, SimConfig overrides)`` for every exposition shape the simulator has."""


def sim_exposition(dialect: str, version: str | None, seconds: float, **overrides: Any) -> str:
    """The ``/metrics`` text of a simulated server after ``seconds`` of background traffic."""
    from specwatch.sim.presets import preset
    from specwatch.sim.server import SimServer
    from specwatch.sim.world import SimWorld
    from tests.sim_fixtures import ManualClock

    settings: dict[str, Any] = {"background_concurrency": 6, "seed": 3, **overrides}
    clock = ManualClock(1000.0)
    world = SimWorld(preset(dialect, version, **settings), clock=clock)
    clock.set(1000.0 + seconds)
    world.advance_to(1000.0 + seconds)
    body = asyncio.run(SimServer(world).metrics_body())
    return body.decode()


def big_vllm_exposition(engines: int = 48, seconds: float = 20.0) -> str:
    """A vLLM exposition with many data-parallel engines (every histogram once per engine)."""
    return sim_exposition("vllm", "0.33.0", seconds, dp_engines=engines)


def sim_dcgm_answers(gpus: int) -> tuple[str, str]:
    """Two consecutive answers of the simulator's dcgm-exporter for ``gpus`` boards under load."""
    from specwatch.sim.dcgm_exporter import render_dcgm
    from specwatch.sim.gpus import SimGpus

    box = SimGpus(gpus, seed=1)
    box.advance_to(20.0, 0.8)
    before = render_dcgm(box, 20.0)
    box.advance_to(21.0, 0.3)
    return before, render_dcgm(box, 21.0)
