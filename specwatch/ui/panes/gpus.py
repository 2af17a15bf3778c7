"""The GPU pane: one row per GPU, the straggler marked; remote GPUs under their node's name."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment

from specwatch.core import gpu_rules
from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.core.reasons import harmful, short_names
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.render import SPAN, Cell, GpuTable, TableStyles, fit, sparkline

GIB = 1024**3
TREND_CELLS = 8
STRAGGLER = "◂"


def _static(model: MonitorModel) -> dict[int, GpuStatic]:
    inv = model.inventory
    return {g.index: g for g in inv.gpus} if inv is not None else {}


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


def gpu_row(
    s: GpuSample,
    st: GpuStatic | None,
    trend: list[int | None],
    lo: float,
    hi: float,
    is_straggler: bool,
) -> dict[str, Cell]:
    """The cells of one GPU's row."""
    mark = STRAGGLER if is_straggler else ""
    gpu = Cell(f"{s.index}{mark}", "mark" if is_straggler else "")
    if s.lost:
        return {
            "gpu": Cell(f"{s.index}", "bad"),
            SPAN: Cell("lost: fell off the bus (NVML_ERROR_GPU_IS_LOST)", "bad"),
        }
    row: dict[str, Cell] = {"gpu": gpu}
    frac = gpu_rules.clock_fraction(s.sm_clock_mhz, st.max_sm_clock_mhz if st else None)
    row["bar"] = Cell("" if frac is None else f"{frac:.4f}")
    row["sm"] = Cell("–", "dim") if s.sm_clock_mhz is None else Cell(str(s.sm_clock_mhz))
    row["memclk"] = Cell("–", "dim") if s.mem_clock_mhz is None else Cell(str(s.mem_clock_mhz))
    slowdown = st.slowdown_temp_c if st else None
    if s.temp_c is None:
        row["temp"] = Cell("–", "dim")
    else:
        tone = ""
        if slowdown is not None and s.temp_c >= slowdown:
            tone = "bad"
        elif slowdown is not None and s.temp_c >= slowdown - 8:
            tone = "warn"
        row["temp"] = Cell(str(s.temp_c), tone)
    row["hbm"] = Cell("–", "dim") if s.hbm_temp_c is None else Cell(str(s.hbm_temp_c))
    limit = st.power_limit_w if st else None
    if s.power_w is None:
        row["power"] = Cell("–", "dim")
    else:
        text = f"{s.power_w:.0f}/{limit:.0f}" if limit else f"{s.power_w:.0f}"
        row["power"] = Cell(text, "warn" if gpu_rules.near_power_limit(s.power_w, limit) else "")
    row["pstate"] = Cell("–", "dim") if s.pstate is None else Cell(f"P{s.pstate}")
    row["pcie"] = pcie_cell(s, st)
    row["util"] = Cell("–", "dim") if s.util_gpu_pct is None else Cell(f"{s.util_gpu_pct}%")
    if s.mem_used_bytes is None:
        row["mem"] = Cell("–", "dim")
    elif s.mem_total_bytes:
        row["mem"] = Cell(f"{s.mem_used_bytes / GIB:.0f}/{s.mem_total_bytes / GIB:.0f}")
    else:
        row["mem"] = Cell(f"{s.mem_used_bytes / GIB:.0f}")
    row["trend"] = Cell(sparkline(trend[-TREND_CELLS:], lo, hi), "bar")
    if s.clock_event_reasons is None:
        why = s.missing.get("clock_event_reasons", "")
        row["reasons"] = Cell("n/s" if why.startswith("n/s") else "–", "dim")
    else:
        words = short_names(s.clock_event_reasons)
        if not words:
            row["reasons"] = Cell("none", "dim")
        else:
            tone = "warn" if harmful(s.clock_event_reasons) else "dim"
            row["reasons"] = Cell(words, tone)
    return row


def gpu_rows(model: MonitorModel) -> list[dict[str, Cell]]:
    """Rows for every GPU in the latest tick (pure; tested without an app)."""
    tick = model.tick
    if tick is None:
        return []
    statics = _static(model)
    lag = gpu_rules.sample_straggler(tick.samples)
    trends = {i: list(d) for i, d in model.sm_trend.items()}
    values = [v for t in trends.values() for v in t[-TREND_CELLS:] if v is not None]
    # One scale for every GPU's trend, so a board sagging below its neighbours shows; at least
    # a tenth of the max clock tall, so a few MHz of jitter do not look like a cliff.
    tops = [g.max_sm_clock_mhz for g in statics.values() if g.max_sm_clock_mhz]
    hi = float(max(values)) if values else 1.0
    span = 0.1 * max(tops) if tops else 1.0
    lo = min(float(min(values)) - 1.0, hi - span) if values else 0.0
    return [
        gpu_row(s, statics.get(s.index), trends.get(s.index, []), lo, hi, s.index == lag)
        for s in tick.samples
    ]


def node_groups(model: MonitorModel) -> bool:
    """Whether the GPUs span more than one node (each node then gets a heading row)."""
    origin = model.inventory.origin if model.inventory is not None else None
    return origin is not None and len(set(origin.nodes)) > 1


def with_node_headings(model: MonitorModel, rows: list[dict[str, Cell]]) -> list[dict[str, Cell]]:
    """``rows`` with a heading row before each node's GPUs, when there is more than one node."""
    tick, inv = model.tick, model.inventory
    origin = inv.origin if inv is not None else None
    if tick is None or origin is None or not node_groups(model):
        return rows
    out: list[dict[str, Cell]] = []
    node: str | None = None
    for sample, row in zip(tick.samples, rows, strict=True):
        here = origin.nodes[sample.index] if sample.index < len(origin.nodes) else None
        if here != node or not out:
            node = here
            out.append({"gpu": Cell(""), SPAN: Cell(f"node {here or '?'}")})
        out.append(row)
    return out


def origin_note(model: MonitorModel) -> str | None:
    """One line on a remote source: the fields its exporters do not send, a coarse collection."""
    origin = model.inventory.origin if model.inventory is not None else None
    if origin is None:
        return None
    parts: list[str] = []
    if origin.not_exported:
        parts.append("exporter does not send: " + ", ".join(origin.not_exported))
    if origin.collection_interval_s is not None:
        view = f" (view {origin.view_interval_s:g} s)" if origin.view_interval_s else ""
        parts.append(
            f"it collects every {origin.collection_interval_s:g} s{view}: run it with -c 1000"
        )
    return " · ".join(parts) if parts else None


class GpusPane(ModelPane):
    """GPUs: SM clock against max, temperatures, power, P-state, clock events, PCIe, memory."""

    VERSION = "gpu_version"
    LINE_API = True

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpus--header",
        "gpus--dim",
        "gpus--warn",
        "gpus--bad",
        "gpus--bar",
        "gpus--bar-empty",
        "gpus--mark",
    }

    DEFAULT_CSS = """
    GpusPane {
        height: auto;
        border-top: solid $primary;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
    }
    GpusPane > .gpus--header { color: $text-muted; text-style: bold; }
    GpusPane > .gpus--dim { color: $text-muted; }
    GpusPane > .gpus--warn { color: $warning; }
    GpusPane > .gpus--bad { color: $error; text-style: bold; }
    GpusPane > .gpus--bar { color: $primary; }
    GpusPane > .gpus--bar-empty { color: $text-disabled; }
    GpusPane > .gpus--mark { color: $accent; text-style: bold; }
    """

    _drawn_shape: tuple[object, ...] = ()

    def on_mount(self) -> None:
        """Title the pane."""
        self.border_title = "GPUs"

    def _table_styles(self) -> TableStyles:
        return TableStyles(normal=self.component_styles()["normal"], **self.tone_styles())

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """One header row plus one per GPU (or one line of explanation)."""
        tick = self.model.tick
        if tick is not None and tick.samples:
            return (
                len(with_node_headings(self.model, gpu_rows(self.model)))
                + 1
                + (1 if origin_note(self.model) else 0)
            )
        inv = self.model.inventory
        if inv is not None and inv.gpus:
            return len(inv.gpus) + 1
        return 2 if inv is not None and not inv.available else 1

    def sync(self) -> bool:
        """Refresh (re-measuring the height when the GPU count changed) and retitle."""
        if not self.display or not self.is_mounted:
            return False
        tick, inv = self.model.tick, self.model.inventory
        shape = (
            len(tick.samples) if tick is not None else -1,
            None if inv is None else (inv.available, len(inv.gpus), inv.origin),
        )
        if shape != self._drawn_shape:
            self._drawn_shape = shape
            self.border_title = self._title()
            self.force_sync()
            self.refresh(layout=True)
            return True
        changed = super().sync()
        if changed:
            self.border_title = self._title()
        return changed

    def _title(self) -> str:
        inv = self.model.inventory
        parts = ["GPUs"]
        if inv is not None and inv.gpus:
            names = {g.name for g in inv.gpus if g.name}
            if len(names) == 1:
                parts.append(f"{len(inv.gpus)}× {names.pop()}")
            if inv.system.driver_version:
                parts.append(f"driver {inv.system.driver_version}")
        origin = inv.origin if inv is not None else None
        if origin is not None:
            nodes = sorted({n for n in origin.nodes if n})
            where = f"node {nodes[0]}" if len(nodes) == 1 else f"{len(nodes)} nodes"
            parts.insert(1, f"{where} via {origin.source}")
        tick = self.model.tick
        if tick is not None and tick.error:
            parts.append(f"sampler: {tick.error}")
        return " · ".join(parts)

    def build_lines(self, width: int, height: int) -> list[list[Segment]]:
        """The table, or one line saying why there is none."""
        model = self.model
        inv = model.inventory
        st = self._table_styles()
        if inv is None:
            return [[Segment("opening NVML…", st.dim)]]
        if not inv.available:
            reason = inv.reason or "NVML unavailable"
            return [
                [Segment(f"no GPU readings: {reason}", st.warn)],
                [Segment("the server panes below still work", st.dim)],
            ]
        rows = gpu_rows(model)
        if not rows:
            return [[Segment("waiting for the first GPU sample…", st.dim)]]
        lines = GpuTable(with_node_headings(model, rows), st).lines(width)
        note = origin_note(model)
        if note:
            lines.append([Segment(fit(note, width), st.dim)])
        return lines
