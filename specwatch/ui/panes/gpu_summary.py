"""The GPU pane collapsed to a summary: slowest, hottest, and the range of each reading."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from specwatch.core import gpu_rules
from specwatch.core.reasons import harmful, short_names
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpu_cells import deficit_cell
from specwatch.ui.renderables.gpu_table import Cell

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuSample, GpuStatic

SUMMARY_ROWS = 2


def _span(values: Iterable[float | None], unit: str) -> str | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    return f"{lo:.0f}{unit}" if lo == hi else f"{lo:.0f}–{hi:.0f}{unit}"


def summary_lines(model: MonitorModel) -> list[list[Cell]]:
    """Two lines for all GPUs: the slowest and the hottest, then min–max of each reading."""
    tick = model.tick
    if tick is None or not tick.samples:
        return []
    inv = model.inventory
    statics: dict[int, GpuStatic] = {g.index: g for g in inv.gpus} if inv is not None else {}
    live = [s for s in tick.samples if not s.lost]
    pace = gpu_rules.slowest(gpu_rules.pace_of_samples(live))
    lag = gpu_rules.sample_straggler(live)
    first: list[Cell] = []
    if pace is not None:
        s = next(x for x in live if x.index == pace.index)
        st = statics.get(s.index)
        mark = "◂" if lag == s.index else ""
        first += [Cell("slowest ", "dim"), Cell(f"GPU {s.index}{mark} ", "mark" if mark else "")]
        first.append(Cell(f"{s.sm_clock_mhz} MHz", "clock"))
        first.extend(_deficit(s, st))
        first.append(Cell(f" {_events(s)}  ", "warn" if _harmful(s) else "dim"))
    hot = max((s for s in live if s.temp_c is not None), key=lambda s: s.temp_c or 0, default=None)
    if hot is not None:
        first += [Cell("hottest ", "dim"), Cell(f"GPU {hot.index} ")]
        first.append(Cell(f"{hot.temp_c}°C", "temp"))
    lost = [s.index for s in tick.samples if s.lost]
    if lost:
        first.append(Cell("  lost: GPU " + ", ".join(map(str, lost)), "bad"))
    second: list[Cell] = [Cell(f"{len(tick.samples)} GPUs", "dim")]
    for label, text, tone in (
        ("SM", _span((s.sm_clock_mhz for s in live), " MHz"), "clock"),
        ("temp", _span((s.temp_c for s in live), "°C"), "temp"),
        ("power", _span((s.power_w for s in live), " W"), ""),
        ("util", _span((s.util_gpu_pct for s in live), "%"), ""),
    ):
        if text is not None:
            second += [Cell(f"  {label} ", "dim"), Cell(text, tone)]
    slow_links = [s.index for s in live if _link_degraded(s, statics.get(s.index))]
    if slow_links:
        second.append(Cell("  PCIe below max: GPU " + ", ".join(map(str, slow_links)), "bad"))
    return [first, second]


def _deficit(s: GpuSample, st: GpuStatic | None) -> list[Cell]:
    cell = deficit_cell(s, st)
    return [] if cell.text == "–" else [Cell(" "), cell]


def _events(s: GpuSample) -> str:
    if s.clock_event_reasons is None:
        return "clock events –"
    return short_names(s.clock_event_reasons) or "no clock event"


def _harmful(s: GpuSample) -> bool:
    return s.clock_event_reasons is not None and bool(harmful(s.clock_event_reasons))


def _link_degraded(s: GpuSample, st: GpuStatic | None) -> bool:
    if st is None:
        return False
    busy = gpu_rules.sample_busy(s)
    return gpu_rules.link_degraded(
        s.pcie_gen, s.pcie_width, st.max_pcie_gen, st.max_pcie_width, busy
    )
