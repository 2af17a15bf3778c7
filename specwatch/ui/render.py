"""Pure renderables and the text helpers behind them: sparklines, bars, the graph, the GPU table.

Nothing here knows about widgets or the app: a pane hands in data and Rich styles (taken from its
component classes, so only theme variables decide colours) and gets back something Rich can
print. Tests print these to a plain ``rich.console.Console``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

BLOCKS = " ▁▂▃▄▅▆▇█"
"""Eighth-height blocks: index 0 is empty, 8 is full."""
HBLOCKS = " ▏▎▍▌▋▊▉█"
"""Eighth-width blocks for horizontal bars."""
GAP = " "

NO_STYLE = Style()


def bucket(
    points: Iterable[tuple[float, float | None]], t_end: float, span_s: float, width: int
) -> list[float | None]:
    """Mean value per column over ``(t_end - span_s, t_end]``, oldest column first.

    Columns without a point (or with only ``None`` points) are ``None`` (drawn as a gap).
    """
    if width <= 0 or span_s <= 0:
        return []
    sums = [0.0] * width
    counts = [0] * width
    t0 = t_end - span_s
    scale = width / span_s
    for t, v in points:
        if v is None or t <= t0 or t > t_end:
            continue
        col = min(width - 1, int((t - t0) * scale))
        sums[col] += v
        counts[col] += 1
    return [sums[i] / counts[i] if counts[i] else None for i in range(width)]


def column_of(t: float, t_end: float, span_s: float, width: int) -> int:
    """The column a time falls in (may be < 0 or >= width when outside the window)."""
    return math.floor((t - (t_end - span_s)) * width / span_s)


def sparkline(values: Sequence[float | None], lo: float, hi: float) -> str:
    """One row of eighth blocks for ``values`` scaled between ``lo`` and ``hi``.

    ``None`` becomes a space; a value at or below ``lo`` still shows the lowest block so that a
    reading is distinguishable from a gap.
    """
    rng = hi - lo
    scale = 7.0 / rng if rng > 0 else 0.0
    out: list[str] = []
    for v in values:
        if v is None:
            out.append(GAP)
            continue
        if scale == 0.0:
            out.append(BLOCKS[8])
            continue
        level = 1 + round((v - lo) * scale)
        out.append(BLOCKS[1 if level < 1 else (8 if level > 8 else level)])
    return "".join(out)


def hbar(frac: float | None, width: int) -> str:
    """A horizontal bar ``width`` cells wide filled to ``frac`` (0..1), in eighths."""
    if width <= 0:
        return ""
    if frac is None:
        return " " * width
    eighths = round(max(0.0, min(1.0, frac)) * width * 8)
    full, part = divmod(eighths, 8)
    bar = "█" * full + (HBLOCKS[part] if part and full < width else "")
    return bar + " " * (width - len(bar))


def area_rows(values: Sequence[float | None], height: int, hi: float) -> list[str]:
    """A filled chart ``height`` rows tall, top row first, each value scaled to ``hi``."""
    if height <= 0:
        return []
    scale = height * 8 / hi if hi > 0 else 0.0
    top = height * 8
    columns: list[str] = []
    blank = " " * height
    for v in values:
        if v is None or scale == 0.0:
            columns.append(blank)
            continue
        level = round(v * scale)
        level = 0 if level < 0 else (top if level > top else level)
        full, part = divmod(level, 8)
        tip = BLOCKS[part] if part else ""
        columns.append(" " * (height - full - len(tip)) + tip + "█" * full)
    # Built column by column, transposed once (zip is C-fast).
    return ["".join(row) for row in zip(*columns, strict=True)] if columns else [""] * height


def nice_ceiling(x: float) -> float:
    """A round number at or above ``x`` for an axis top (1, 2, 2.5, 5 times a power of ten)."""
    if x <= 0:
        return 1.0
    exp = math.floor(math.log10(x))
    for m in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        top = m * 10.0**exp
        if top >= x * 0.999:
            return top
    return 10.0 ** (exp + 1)


def fmt_num(v: float | None, digits: int = 1, missing: str = "–") -> str:
    """A number with fixed decimals, or ``missing``."""
    if v is None:
        return missing
    return f"{v:.{digits}f}"


def fit(text: str, width: int) -> str:
    """Pad or cut ``text`` to exactly ``width`` cells (an ellipsis marks a cut)."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text + " " * (width - len(text))
    return text[: width - 1] + "…"


# --- the token-rate graph -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GraphStyles:
    """Rich styles for the token-rate graph (from the pane's component classes)."""

    tokens: Style = NO_STYLE
    clock: Style = NO_STYLE
    temp: Style = NO_STYLE
    axis: Style = NO_STYLE
    mark: Style = NO_STYLE
    bench: Style = NO_STYLE
    alert: Style = NO_STYLE


@dataclass(frozen=True, slots=True)
class GraphMark:
    """A mark placed on the graph's columns."""

    col0: int
    col1: int
    kind: str
    label: str


LABEL_ORDER = {"bench": 0, "restart": 1, "lost": 1, "loading": 2, "warmup": 3}
"""Which labels claim room on the mark row first."""
MARK_GLYPH = {"loading": "╌", "warmup": "·", "bench": "━", "restart": "│", "lost": "│"}


@dataclass(frozen=True, slots=True)
class TokenRateGraph:
    """tok/s as a filled chart, with the mean SM clock % and the hottest temperature on the same
    time axis below it, and a row of marks (loading, warmup, restarts, benchmark runs).

    Values are already bucketed into columns (see :func:`bucket`); ``chart_width`` of the
    renderable is ``width - GUTTER - LABEL``.
    """

    tok_s: Sequence[float | None]
    clock_pct: Sequence[float | None]
    hottest_c: Sequence[float | None]
    marks: Sequence[GraphMark]
    height: int
    window_label: str
    styles: GraphStyles = field(default_factory=GraphStyles)
    strips: bool = True
    """Draw the clock and temperature rows (dropped on short terminals)."""
    current: tuple[float | None, float | None, float | None] | None = None
    """The newest raw (tok/s, clock %, hottest °C) for the labels; else the last column's mean."""

    GUTTER = 6
    LABEL = 8

    @staticmethod
    def chart_width(width: int) -> int:
        """Columns available to the plotted data at a total ``width``."""
        return max(1, width - TokenRateGraph.GUTTER - TokenRateGraph.LABEL)

    def lines(self, width: int) -> list[list[Segment]]:
        """The graph as lines of segments, exactly ``width`` cells wide and ``height`` tall."""
        st = self.styles
        cw = self.chart_width(width)
        g, lab = self.GUTTER, width - self.GUTTER - cw
        strips = 2 if self.strips and self.height >= 4 else 0
        chart_h = max(1, self.height - strips - 1)
        tok = _pad(self.tok_s, cw)
        now_tok, now_clk, now_temp = self.current or (_last(tok), None, None)
        # The axis also covers the newest raw reading printed beside it, which can exceed the
        # column means (a label above the axis top reads as an error).
        seen = [v for v in (*tok, now_tok) if v is not None]
        top = nice_ceiling(max(seen)) if seen else 1.0
        out: list[list[Segment]] = []
        last_tok = now_tok
        for i, row in enumerate(area_rows(tok, chart_h, top)):
            left = f"{top:g}" if i == 0 else ("0" if i == chart_h - 1 else "")
            right = ""
            if i == 0:
                right = "tok/s"
            elif i == 1 or chart_h == 1:
                right = fmt_num(last_tok)
            out.append(
                [
                    Segment(fit(left.rjust(g - 1) + " ", g), st.axis),
                    Segment(row, st.tokens),
                    Segment(" " + fit(right, lab - 1), st.tokens if i == 1 else st.axis),
                ]
            )
        if strips:
            clk = _pad(self.clock_pct, cw)
            cvals = [v for v in clk if v is not None]
            clo = min(cvals) - 2.0 if cvals else 0.0
            last_clk = now_clk if self.current else _last(clk)
            out.append(
                [
                    Segment(fit("clk%", g), st.axis),
                    Segment(sparkline(clk, clo, 100.0), st.clock),
                    Segment(" " + fit(_pct(last_clk), lab - 1), st.clock),
                ]
            )
            temp = _pad(self.hottest_c, cw)
            tvals = [v for v in temp if v is not None]
            tlo = min(tvals) - 2.0 if tvals else 0.0
            thi = max(tvals) + 1.0 if tvals else 1.0
            last_t = now_temp if self.current else _last(temp)
            out.append(
                [
                    Segment(fit("hot°C", g), st.axis),
                    Segment(sparkline(temp, tlo, thi), st.temp),
                    Segment(" " + fit(_deg(last_t), lab - 1), st.temp),
                ]
            )
        out.append(self._mark_row(cw, g, lab))
        return out[: self.height]

    def _mark_row(self, cw: int, g: int, lab: int) -> list[Segment]:
        st = self.styles
        cells = [" "] * cw
        kinds: list[str | None] = [None] * cw
        ordered = sorted(self.marks, key=lambda m: (m.kind == "bench", m.col0))
        for m in ordered:
            c0, c1 = max(0, m.col0), min(cw - 1, m.col1)
            glyph = MARK_GLYPH.get(m.kind, "·")
            for c in range(c0, c1 + 1):
                cells[c] = glyph
                kinds[c] = m.kind
        # Labels go where they fit without covering another label; else a one-letter tag.
        taken = [False] * cw
        for m in sorted(self.marks, key=lambda m: (LABEL_ORDER.get(m.kind, 9), m.col0)):
            c0 = max(0, m.col0)
            if c0 >= cw:
                continue
            placed = False
            for label in _label_choices(m):
                for start in range(c0, min(cw, c0 + 3)):
                    end = start + len(label)
                    if end <= cw and not any(taken[start:end]):
                        for j, ch in enumerate(label):
                            cells[start + j] = ch
                            kinds[start + j] = m.kind
                            taken[start + j] = True
                        placed = True
                        break
                if placed:
                    break
        segs = [Segment(fit(self.window_label, g), st.axis)]
        run_kind: str | None = kinds[0] if kinds else None
        run: list[str] = []
        for ch, k in zip(cells, kinds, strict=True):
            if k != run_kind and run:
                segs.append(Segment("".join(run), self._mark_style(run_kind)))
                run = []
            run_kind = k
            run.append(ch)
        if run:
            segs.append(Segment("".join(run), self._mark_style(run_kind)))
        segs.append(Segment(" " + fit("now", lab - 1), st.axis))
        return segs

    def _mark_style(self, kind: str | None) -> Style:
        st = self.styles
        if kind == "bench":
            return st.bench
        if kind in ("restart", "lost"):
            return st.alert
        return st.mark

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        new_line = Segment.line()
        for line in self.lines(width):
            yield from line
            yield new_line


def _label_choices(m: GraphMark) -> tuple[str, ...]:
    if m.kind == "restart":
        return ("R",)
    if m.kind == "lost":
        return ("✕",)
    if m.kind == "loading":
        return (m.label, m.label.replace("loading ", "L"), "L")
    if m.kind == "warmup":
        return (m.label, "warmup", "W")
    return (m.label, m.label[:1])


def _pad(values: Sequence[float | None], width: int) -> list[float | None]:
    vals = list(values[-width:])
    return [None] * (width - len(vals)) + vals


def _last(values: Sequence[float | None]) -> float | None:
    for v in reversed(values):
        if v is not None:
            return v
    return None


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}%"


def _deg(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}°C"


# --- the GPU table -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    """One table cell: text and a tone (``""`` normal, ``"dim"``, ``"warn"``, ``"bad"``...)."""

    text: str
    tone: str = ""


@dataclass(frozen=True, slots=True)
class Column:
    """A GPU-table column: where it sits, how wide, and how soon it is dropped."""

    key: str
    header: str
    width: int
    priority: int
    """Lower is kept longer when the terminal is narrow."""
    align: str = "right"


GPU_COLUMNS: tuple[Column, ...] = (
    Column("gpu", "GPU", 3, 0, "left"),
    Column("bar", "SM clock", 8, 1, "left"),
    Column("sm", "MHz", 4, 0),
    Column("memclk", "memclk", 6, 8),
    Column("temp", "°C", 3, 0),
    Column("hbm", "HBM", 3, 6),
    Column("power", "power W", 7, 2),
    Column("pstate", "P", 3, 3),
    Column("pcie", "PCIe", 5, 4),
    Column("util", "util", 4, 2),
    Column("mem", "mem GiB", 7, 5),
    Column("trend", "SM trend", 8, 7, "left"),
    Column("reasons", "clock events", 10, 1, "left"),
)
"""Display order; ``reasons`` takes the width left over."""

SPAN = "span"
"""A row key whose cell fills the whole row after the GPU column (e.g. a lost GPU)."""


def choose_columns(width: int, columns: Sequence[Column] = GPU_COLUMNS) -> list[Column]:
    """The columns that fit in ``width`` cells (one space between them), in display order."""
    chosen: set[str] = set()
    used = -1
    for col in sorted(columns, key=lambda c: c.priority):
        need = col.width + 1
        if used + need <= width:
            chosen.add(col.key)
            used += need
    return [c for c in columns if c.key in chosen]


@dataclass(frozen=True, slots=True)
class TableStyles:
    """Rich styles for the GPU table, by tone."""

    header: Style = NO_STYLE
    normal: Style = NO_STYLE
    dim: Style = NO_STYLE
    warn: Style = NO_STYLE
    bad: Style = NO_STYLE
    bar: Style = NO_STYLE
    bar_empty: Style = NO_STYLE
    mark: Style = NO_STYLE

    def tone(self, tone: str) -> Style:
        """The style for a tone key."""
        return {
            "dim": self.dim,
            "warn": self.warn,
            "bad": self.bad,
            "bar": self.bar,
            "mark": self.mark,
        }.get(tone, self.normal)


@dataclass(frozen=True, slots=True)
class GpuTable:
    """Rows of GPU cells laid out in the columns that fit the width."""

    rows: Sequence[dict[str, Cell]]
    styles: TableStyles = field(default_factory=TableStyles)
    header: bool = True

    def lines(self, width: int) -> list[list[Segment]]:
        """The table as lines of segments, each exactly ``width`` cells wide."""
        cols = choose_columns(width)
        used = sum(c.width for c in cols) + len(cols) - 1
        extra = max(0, width - used)
        widths = {c.key: c.width + (extra if c.key == "reasons" else 0) for c in cols}
        st = self.styles
        out: list[list[Segment]] = []
        if self.header:
            text = " ".join(_align(c.header, widths[c.key], c.align) for c in cols)
            out.append([Segment(fit(text, width), st.header)])
        for row in self.rows:
            segs: list[Segment] = []
            span = row.get(SPAN)
            if span is not None:
                first = cols[0]
                gpu = row.get(first.key, Cell(""))
                segs.append(
                    Segment(_align(gpu.text, widths[first.key], first.align), st.tone(gpu.tone))
                )
                rest = width - widths[first.key] - 1
                segs.append(Segment(" " + fit(span.text, rest), st.tone(span.tone)))
                out.append(segs)
                continue
            for i, c in enumerate(cols):
                cell = row.get(c.key, Cell("", "dim"))
                if i:
                    segs.append(Segment(" ", st.normal))
                if c.key == "bar":
                    segs.extend(_bar_segments(cell.text, widths[c.key], st))
                else:
                    segs.append(
                        Segment(_align(cell.text, widths[c.key], c.align), st.tone(cell.tone))
                    )
            pad = width - sum(s.cell_length for s in segs)
            if pad > 0:
                segs.append(Segment(" " * pad, st.normal))
            out.append(segs)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        for line in self.lines(options.max_width):
            yield from line
            yield new_line


def _align(text: str, width: int, align: str) -> str:
    if len(text) > width:
        return text[: width - 1] + "…" if width > 1 else text[:width]
    return text.rjust(width) if align == "right" else text.ljust(width)


def _bar_segments(frac_text: str, width: int, st: TableStyles) -> list[Segment]:
    try:
        frac: float | None = float(frac_text)
    except ValueError:
        frac = None
    bar = hbar(frac, width)
    filled = bar.rstrip(" ")
    return [Segment(filled, st.bar), Segment("░" * (width - len(filled)), st.bar_empty)]
