"""The simulated servers, one module per imitated server, and their registry.

``sglang``, ``vllm``, ``llamacpp`` and ``openai`` each define a :class:`SimDialect` subclass
(routes and payloads per version); a server with ``/metrics`` keeps its counters and metric
names in its ``specwatch.sim.metrics`` module. :class:`~specwatch.sim.server.SimServer` and
:func:`specwatch.sim.presets.preset` find them here by :class:`Dialect`.
"""

from __future__ import annotations

from specwatch.core.server import Dialect
from specwatch.sim.servers.base import SimDialect
from specwatch.sim.servers.llamacpp import LlamaCppDialect
from specwatch.sim.servers.openai import OpenAiDialect
from specwatch.sim.servers.sglang import SglangDialect
from specwatch.sim.servers.vllm import VllmDialect

SIM_DIALECTS: dict[Dialect, type[SimDialect]] = {
    cls.dialect: cls for cls in (SglangDialect, VllmDialect, LlamaCppDialect, OpenAiDialect)
}
"""Every simulated server by the dialect it speaks."""

DEFAULT_VERSIONS: dict[Dialect, str] = {d: cls.default_version for d, cls in SIM_DIALECTS.items()}
"""The version each dialect imitates when none is given (the newest researched)."""


def sim_dialect(dialect: Dialect | str) -> type[SimDialect]:
    """The simulated server speaking ``dialect``.

    Raises:
        ValueError: an unknown dialect.
    """
    return SIM_DIALECTS[Dialect(dialect)]


__all__ = ["DEFAULT_VERSIONS", "SIM_DIALECTS", "SimDialect", "sim_dialect"]
