"""The simulated servers by the dialect they speak, and each one's typical deployment."""

from __future__ import annotations

from dataclasses import fields, replace

from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.servers.base import SimDialect
from specwatch.sim.servers.llamacpp import LlamaCppDialect
from specwatch.sim.servers.openai import OpenAiDialect
from specwatch.sim.servers.sglang import SglangDialect
from specwatch.sim.servers.trtllm import TrtllmDialect
from specwatch.sim.servers.vllm import VllmDialect

SIM_DIALECTS: dict[Dialect, type[SimDialect]] = {
    cls.dialect: cls
    for cls in (SglangDialect, VllmDialect, LlamaCppDialect, TrtllmDialect, OpenAiDialect)
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


def preset(dialect: str | Dialect, version: str | None = None, **overrides: object) -> SimConfig:
    """A ready configuration for ``dialect`` (newest researched version unless given).

    Args:
        dialect: ``"sglang"``, ``"vllm"``, ``"llamacpp"`` or ``"openai"``.
        version: the server version to imitate.
        **overrides: any ``SimConfig`` field.

    Raises:
        ValueError: an unknown dialect or field.
    """
    d = Dialect(dialect)
    known = {f.name for f in fields(SimConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown SimConfig fields: {', '.join(unknown)}")
    server = sim_dialect(d)
    base = SimConfig(dialect=d, version=version or server.default_version)
    base = replace(base, **server.preset)
    return replace(base, **overrides)  # type: ignore[arg-type]


__all__ = ["DEFAULT_VERSIONS", "SIM_DIALECTS", "SimDialect", "preset", "sim_dialect"]
