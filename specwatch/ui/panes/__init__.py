"""The panes of the main screen; each is a thin widget over a pure renderable."""

from __future__ import annotations

from specwatch.ui.panes.base import ModelPane
from specwatch.ui.panes.bench_bar import BenchBar
from specwatch.ui.panes.gpus import GpusPane
from specwatch.ui.panes.load import LoadPane
from specwatch.ui.panes.speculation import SpeculationPane
from specwatch.ui.panes.status import StatusLine
from specwatch.ui.panes.token_rate import TokenRatePane
from specwatch.ui.panes.verdict import VerdictLine
from specwatch.ui.panes.verify import VerifyPane

__all__ = [
    "BenchBar",
    "GpusPane",
    "LoadPane",
    "ModelPane",
    "SpeculationPane",
    "StatusLine",
    "TokenRatePane",
    "VerdictLine",
    "VerifyPane",
]
