"""The benchmark's progress, as the runner reports it to a command line or a TUI."""

from __future__ import annotations

from dataclasses import dataclass

from specwatch.core.snapshot_records import RunResult

EVENT_KINDS = (
    "warmup_done",
    "steady_wait",
    "steady",
    "run_start",
    "run_done",
    "finished",
    "interrupted",
    "error",
)


@dataclass(frozen=True, slots=True)
class BenchEvent:
    """Progress, for a command line or a TUI."""

    kind: str
    """One of ``EVENT_KINDS``."""
    index: int
    total: int
    t: float
    """Seconds since the benchmark started."""
    message: str
    run: RunResult | None = None


__all__ = ["EVENT_KINDS", "BenchEvent"]
