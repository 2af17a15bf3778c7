"""What the app needs to know that does not come from a live source."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specwatch.core.goodput import DEFAULT_SLO, Slo

if TYPE_CHECKING:
    from specwatch.core.draft_sweep import Sweep

REDRAW_S = 2.0
"""The longest pause between redraws. Panes redraw every two sampling intervals, within
[:data:`MIN_REDRAW_S`, ``REDRAW_S``], and only the cells whose data changed; sampling itself runs
at the full rate, so history and benchmarks lose nothing. (nvitop also redraws every 2 s.)"""


@dataclass(slots=True)
class AppSettings:
    """Everything the app needs to know that does not come from a live source."""

    theme: str = "dark"
    window: str = "5m"
    interval_s: float = 1.0
    metrics_interval_s: float = 1.0
    baseline_ms: float | None = None
    baseline_source: str = ""
    redraw_s: float = REDRAW_S
    theme_dirs: list[Path] | None = None
    """``None``: the package, the repo and the user config directory."""
    snapshot_dir: Path = field(default_factory=lambda: Path("specwatch-snapshots"))
    screenshot_dir: Path | None = None
    """``None``: ``screenshots`` under the user's data directory (``$XDG_DATA_HOME/specwatch``)."""
    watch_terminal: bool = True
    """Exit on SIGHUP or when the terminal stops answering (off in tests)."""
    live_cpu: bool = True
    """Measure the monitor's own CPU use (off for deterministic screenshots)."""
    show_overhead: bool = True
    """Show the monitor's CPU and NVML cost in the status line (off for screenshots)."""
    bench_config: object | None = None
    """A ``specwatch.bench.runner.BenchConfig`` for the ``b`` key; ``None``: bench defaults."""
    sweep: Sweep | None = None
    """``--sweep``'s snapshots: the advisor view (``a``) shows them beside its prediction."""
    profile_steps: int = 20
    """Decode steps the ``P`` key asks the server's profiler for (``--profile-steps``)."""
    slo: Slo = DEFAULT_SLO
    """Goodput's objectives (``--slo-ttft`` / ``--slo-tpot``, or the config file)."""


def default_screenshot_dir() -> Path:
    """``$XDG_DATA_HOME/specwatch/screenshots`` (``~/.local/share/...`` by default)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "specwatch" / "screenshots"


__all__ = ["REDRAW_S", "AppSettings", "default_screenshot_dir"]
