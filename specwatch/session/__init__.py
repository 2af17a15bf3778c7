"""The headless live session: pollers, GPU source, benchmark job, baseline; typed events out.

Nothing here imports textual or rich. Front ends (the TUI, ``probe``, ``bench``, a recorder)
subscribe to a :class:`LiveSession` and turn its events into whatever they show.
"""

from __future__ import annotations

from specwatch.session.baseline import Baseline, load_baseline
from specwatch.session.dcgm_source import DcgmExporterGpuSource
from specwatch.session.gpu_source import GpuSource, NoGpus, NvmlGpuSource, ReaderGpuSource
from specwatch.session.live import LiveSession

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
