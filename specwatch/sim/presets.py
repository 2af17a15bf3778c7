"""Ready simulator configurations: each simulated server's typical deployment."""

from __future__ import annotations

from dataclasses import fields, replace

from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.servers import sim_dialect


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
