"""The headless live session: pollers, GPU source, benchmark job, baseline; typed events out.

Nothing here imports textual or rich. Front ends (the TUI, ``probe``, ``bench``, a recorder)
subscribe to a :class:`LiveSession` and turn its events into whatever they show.

The names below are loaded on first use (PEP 562): importing one module of the package
(``specwatch.session.events``, as the TUI's model does before its first frame) does not load
the session's pollers, the NVML binding or the benchmark job with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.session.baseline import Baseline, load_baseline
    from specwatch.session.gpu_source import (
        DcgmExporterGpuSource,
        GpuSource,
        NoGpus,
        NvmlGpuSource,
        ReaderGpuSource,
    )
    from specwatch.session.live import LiveSession

_HOMES = {
    "Baseline": "baseline",
    "load_baseline": "baseline",
    "DcgmExporterGpuSource": "gpu_source",
    "GpuSource": "gpu_source",
    "NoGpus": "gpu_source",
    "NvmlGpuSource": "gpu_source",
    "ReaderGpuSource": "gpu_source",
    "LiveSession": "live",
}

__all__ = [
    "Baseline",
    "DcgmExporterGpuSource",
    "GpuSource",
    "LiveSession",
    "NoGpus",
    "NvmlGpuSource",
    "ReaderGpuSource",
    "load_baseline",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
