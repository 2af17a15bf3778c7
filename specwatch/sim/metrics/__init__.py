"""What each simulated server counts and how its ``/metrics`` shows it (below the world).

``telemetry`` is the base; a server with ``/metrics`` keeps its counters and metric names in its
``*_metrics`` module; :func:`telemetry_class` says which one each dialect keeps (the world
counts with it, below the handlers).
"""

from __future__ import annotations

from specwatch.core.server import Dialect
from specwatch.sim.metrics.llamacpp_metrics import LlamaCppTelemetry
from specwatch.sim.metrics.sglang_metrics import SglangTelemetry
from specwatch.sim.metrics.telemetry import Telemetry
from specwatch.sim.metrics.trtllm_metrics import TrtllmTelemetry
from specwatch.sim.metrics.vllm_metrics import VllmTelemetry

TELEMETRY: dict[Dialect, type[Telemetry]] = {
    Dialect.SGLANG: SglangTelemetry,
    Dialect.VLLM: VllmTelemetry,
    Dialect.LLAMACPP: LlamaCppTelemetry,
    Dialect.TRTLLM: TrtllmTelemetry,
}
"""What each server counts and how ``/metrics`` shows it; others use the base (nothing)."""


def telemetry_class(dialect: Dialect) -> type[Telemetry]:
    """The telemetry a server speaking ``dialect`` keeps."""
    return TELEMETRY.get(dialect, Telemetry)
