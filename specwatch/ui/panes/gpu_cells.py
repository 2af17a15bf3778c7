"""GPU-table cells that judge a reading: the clock deficit and the PCIe link."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specwatch.core import gpu_rules
from specwatch.ui.renderables.gpu_table import Cell

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuSample, GpuStatic


def deficit_cell(s: GpuSample, st: GpuStatic | None) -> Cell:
    """The SM clock against the board's maximum (``−7%``, or ``max``).

    Flagged when the clock is at least :data:`~specwatch.core.judge.MIN_CHANGE` below its
    maximum on a busy GPU with no clock-event reason set: nothing the driver admits to explains
    it (the story's case).
    """
    deficit = gpu_rules.clock_deficit(s.sm_clock_mhz, st.max_sm_clock_mhz if st else None)
    if deficit is None:
        return Cell("–", "dim")
    if deficit < 0.005:
        return Cell("max", "dim")
    return Cell(f"−{deficit * 100:.0f}%", "flag" if unexplained_deficit(s, deficit) else "")


def unexplained_deficit(s: GpuSample, deficit: float | None) -> bool:
    """Whether a busy GPU runs below its maximum clock with no clock-event reason set."""
    from specwatch.core.judge import MIN_CHANGE  # with the first GPU sample, not the first frame

    return (
        deficit is not None
        and deficit >= MIN_CHANGE
        and s.clock_event_reasons == 0
        and gpu_rules.sample_busy(s)
    )


def pcie_cell(s: GpuSample, st: GpuStatic | None) -> Cell:
    """PCIe ``gen x width``; a link below its maximum under load is flagged with ``!``.

    An idle GPU dropping to gen 1 saves power and is not flagged; a narrower link always is.
    """
    if s.pcie_gen is None or s.pcie_width is None:
        return Cell("–", "dim")
    text = f"{s.pcie_gen}x{s.pcie_width}"
    if st is None:
        return Cell(text + " ")
    busy = gpu_rules.sample_busy(s)
    if gpu_rules.link_degraded(s.pcie_gen, s.pcie_width, st.max_pcie_gen, st.max_pcie_width, busy):
        return Cell(text + "!", "bad")
    return Cell(text + " ")  # the flag's cell kept blank, so the links line up
