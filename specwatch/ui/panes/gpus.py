"""The GPU pane: one row per GPU, the straggler marked; remote GPUs under their node's name.

On a short terminal the rows collapse to a summary (slowest, hottest, and the range of each
reading).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from rich.segment import Segment

from specwatch.core import gpu as rules
from specwatch.core.clocks import policy_of
from specwatch.core.gpu import harmful, short_names
from specwatch.ui.model import WINDOWS, MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.renderables import (
    SPAN,
    Cell,
    GpuSummary,
    GpuTable,
    TableStyles,
    bucket_sorted,
    fit,
    sparkline,
)

if TYPE_CHECKING:
    from specwatch.core.energy import Energy
    from specwatch.core.gpu import GpuSample, GpuStatic

GIB = 1024**3
TREND_CELLS = 8
STRAGGLER = "◂"
MIN_GRAPH_ROWS = 3
"""Fewer tok/s rows than this for the graph and the GPU rows collapse to a summary."""
SUMMARY_ROWS = 2


def _static(model: MonitorModel) -> dict[int, GpuStatic]:
    inv = model.inventory
    return {g.index: g for g in inv.gpus} if inv is not None else {}


# --- the cells that judge a reading: the clock deficit and the PCIe link -----------------------


def deficit_cell(s: GpuSample, st: GpuStatic | None) -> Cell:
    """The SM clock against the board's maximum (``−7%``, or ``max``).

    Flagged when the clock is at least :data:`~specwatch.core.judge.MIN_CHANGE` below its
    maximum on a busy GPU with no clock-event reason set: nothing the driver admits to explains
    it (the story's case).
    """
    deficit = rules.clock_deficit(s.sm_clock_mhz, st.max_sm_clock_mhz if st else None)
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
        and rules.sample_busy(s)
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
    busy = rules.sample_busy(s)
    if rules.link_degraded(s.pcie_gen, s.pcie_width, st.max_pcie_gen, st.max_pcie_width, busy):
        return Cell(text + "!", "bad")
    return Cell(text + " ")  # the flag's cell kept blank, so the links line up


# --- the rows ------------------------------------------------------------------------------


def gpu_row(
    s: GpuSample,
    st: GpuStatic | None,
    trend: list[float | None],
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
    row["sm"] = Cell("–", "dim") if s.sm_clock_mhz is None else Cell(str(s.sm_clock_mhz), "clock")
    row["deficit"] = deficit_cell(s, st)
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
        row["temp"] = Cell(str(s.temp_c), tone or "temp")
    row["hbm"] = Cell("–", "dim") if s.hbm_temp_c is None else Cell(str(s.hbm_temp_c))
    limit = st.power_limit_w if st else None
    if s.power_w is None:
        row["power"] = Cell("–", "dim")
    else:
        text = f"{s.power_w:.0f}/{limit:.0f}" if limit else f"{s.power_w:.0f}"
        row["power"] = Cell(text, "warn" if rules.near_power_limit(s.power_w, limit) else "")
    flag = policy_of(st).flag if st else ""  # lock / app / cap: clocks not free to boost
    row["pstate"] = Cell("–", "dim") if s.pstate is None else Cell(f"P{s.pstate} {flag}".strip())
    row["pcie"] = pcie_cell(s, st)
    row["util"] = Cell("–", "dim") if s.util_gpu_pct is None else Cell(f"{s.util_gpu_pct}%")
    row["prof"] = prof_cell(s)
    if s.mem_used_bytes is None:
        row["mem"] = Cell("–", "dim")
    elif s.mem_total_bytes:
        row["mem"] = Cell(f"{s.mem_used_bytes / GIB:.0f}/{s.mem_total_bytes / GIB:.0f}")
    else:
        row["mem"] = Cell(f"{s.mem_used_bytes / GIB:.0f}")
    row["trend"] = Cell(sparkline(trend[-TREND_CELLS:], lo, hi), "clock")
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
    lag = rules.sample_straggler(tick.samples)
    trends = sm_trends(model)
    values = [v for t in trends.values() for v in t if v is not None]
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


def sm_trends(model: MonitorModel) -> dict[int, list[float | None]]:
    """Each GPU's SM clock over the graph's window, as :data:`TREND_CELLS` column means."""
    span = WINDOWS[model.graph_window]
    end = model.now
    hold = 3.0 * model.interval_s
    return {
        i: bucket_sorted(series.after(end - span), end, span, TREND_CELLS, hold)
        for i, series in model.sm_clock.items()
    }


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


def node_heading_count(model: MonitorModel) -> int:
    """How many heading rows :func:`with_node_headings` adds (without building any row)."""
    tick, inv = model.tick, model.inventory
    origin = inv.origin if inv is not None else None
    if tick is None or origin is None or not node_groups(model):
        return 0
    count = 0
    node: str | None = None
    for sample in tick.samples:
        here = origin.nodes[sample.index] if sample.index < len(origin.nodes) else None
        if here != node or not count:
            node = here
            count += 1
    return count


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


# --- the summary: slowest, hottest, and the range of each reading ----------------------------


def prof_cell(s: GpuSample) -> Cell:
    """DRAM and tensor activity (``81/15%``; ``–`` for one the source does not read)."""
    dram, tensor = s.dram_active, s.tensor_active
    if dram is None and tensor is None:
        return Cell("–", "dim")
    shown = ["–" if v is None else f"{v * 100:.0f}" for v in (dram, tensor)]
    return Cell("/".join(shown) + "%")


def _pct(v: float | None) -> float | None:
    return None if v is None else v * 100


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
    pace = rules.slowest(rules.pace_of_samples(live))
    lag = rules.sample_straggler(live)
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
    energy = model.energy  # on the first line: the second is cut first on a narrow screen
    if energy is not None and energy.tokens_per_joule is not None:
        first.append(Cell(f"  {energy.tokens_per_joule:.3g} tok/J"))
    lost = [s.index for s in tick.samples if s.lost]
    if lost:
        first.append(Cell("  lost: GPU " + ", ".join(map(str, lost)), "bad"))
    second: list[Cell] = [Cell(f"{len(tick.samples)} GPUs", "dim")]
    for label, text, tone in (
        ("SM", _span((s.sm_clock_mhz for s in live), " MHz"), "clock"),
        ("temp", _span((s.temp_c for s in live), "°C"), "temp"),
        ("power", _span((s.power_w for s in live), " W"), ""),
        ("util", _span((s.util_gpu_pct for s in live), "%"), ""),
        ("DRAM", _span((_pct(s.dram_active) for s in live), "%"), ""),
        ("tensor", _span((_pct(s.tensor_active) for s in live), "%"), ""),
    ):
        if text is not None:
            second += [Cell(f"  {label} ", "dim"), Cell(text, tone)]
    slow_links = [s.index for s in live if _link_degraded(s, statics.get(s.index))]
    if slow_links:
        second.append(Cell("  PCIe below max: GPU " + ", ".join(map(str, slow_links)), "bad"))
    return [first, second]


def energy_segments(energy: Energy, width: int, st: TableStyles) -> list[Segment]:
    """``energy 2.91 tok/J · 0.344 J/tok · 812 W over GPUs 0–7 (all read) · …``, or why not."""
    known = energy.tokens_per_joule is not None
    return [
        Segment("energy ", st.dim),
        Segment(fit(energy.words(), max(0, width - 7)), st.normal if known else st.dim),
    ]


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
    busy = rules.sample_busy(s)
    return rules.link_degraded(s.pcie_gen, s.pcie_width, st.max_pcie_gen, st.max_pcie_width, busy)


class GpusPane(ModelPane):
    """GPUs: SM clock against max, temperatures, power, P-state, clock events, PCIe, memory."""

    VERSION = "gpu_version"
    LINE_API = True

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpus--header",
        "gpus--dim",
        "gpus--warn",
        "gpus--bad",
        "gpus--clock",
        "gpus--temp",
        "gpus--flag",
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
    GpusPane > .gpus--clock { color: $success; }
    GpusPane > .gpus--temp { color: $accent; }
    GpusPane > .gpus--flag { color: $warning; text-style: bold reverse; }
    GpusPane > .gpus--mark { color: $warning; text-style: bold; }
    """

    _drawn_shape: tuple[object, ...] = ()
    _rows_key: tuple[object, ...] = ()
    _rows_value: list[dict[str, Cell]] = []  # noqa: RUF012 (replaced, never mutated)

    def on_mount(self) -> None:
        """Title the pane."""
        self.set_title("GPUs")

    def _table_styles(self) -> TableStyles:
        return TableStyles(normal=self.component_styles()["normal"], **self.tone_styles())

    def table_rows(self) -> list[dict[str, Cell]]:
        """The table's rows (node headings included), built once per change of the model.

        The height check, the layout and the draw all ask for them within one redraw; the SM
        trends behind them scan every GPU's history.
        """
        m = self.model
        key = (m.gpu_version, id(m.tick), id(m.inventory), m.graph_window, m.interval_s, m.now)
        if key != self._rows_key:
            self._rows_value = with_node_headings(m, gpu_rows(m))
            self._rows_key = key
        return self._rows_value

    def _full_height(self) -> int:
        # Counted, not built: with many GPUs the rows are only built when they are shown.
        m = self.model
        rows = (len(m.tick.samples) if m.tick is not None else 0) + node_heading_count(m)
        return rows + 1 + (1 if origin_note(m) else 0) + (1 if m.energy is not None else 0)

    def summarised(self) -> bool:
        """Whether the rows collapse to a summary: the graph would get too few tok/s rows.

        The rest of the screen (status, verdict, lower panes, footer) keeps its height; what is
        left is shared by this pane and the graph, whose strips and mark row take three rows.
        """
        tick = self.model.tick
        if not self.is_mounted or tick is None or len(tick.samples) <= SUMMARY_ROWS + 1:
            return False
        fixed = 0
        graph_extra = 1
        for w in self.screen.children:
            if w is self or not w.display:
                continue
            besides = w.rows_besides_chart() if isinstance(w, ModelPane) else None
            if besides is not None:
                graph_extra = besides
                continue
            h = w.styles.height
            fixed += int(h.value) if h is not None and h.is_cells else w.outer_size.height
        left = self.app.size.height - fixed - 1 - self._full_height() - graph_extra
        return left < MIN_GRAPH_ROWS

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        """One header row plus one per GPU (or one line of explanation), or the summary."""
        tick = self.model.tick
        if tick is not None and tick.samples:
            return SUMMARY_ROWS if self.summarised() else self._full_height()
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
            self.summarised(),
            None if inv is None else (inv.available, len(inv.gpus), inv.origin),
        )
        if shape != self._drawn_shape:
            self._drawn_shape = shape
            self.set_title(self._title())
            self.force_sync()
            self.refresh(layout=True)
            return True
        changed = super().sync()
        if changed:
            self.set_title(self._title())
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
            return [[Segment(model.gpu_opening, st.dim)]]
        if not inv.available:
            reason = inv.reason or "NVML unavailable"
            return [
                [Segment(f"no GPU readings: {reason}", st.warn)],
                [Segment("the server panes below still work", st.dim)],
            ]
        if model.tick is None or not model.tick.samples:
            return [[Segment("waiting for the first GPU sample…", st.dim)]]
        if self.summarised():
            return GpuSummary(summary_lines(model), st).lines(width)
        rows = self.table_rows()
        headers = {"trend": f"SM {model.graph_window}"}
        lines = GpuTable(rows, st, headers=headers).lines(width)
        note = origin_note(model)
        if note:
            lines.append([Segment(fit(note, width), st.dim)])
        if model.energy is not None:
            lines.append(energy_segments(model.energy, width, st))
        return lines
