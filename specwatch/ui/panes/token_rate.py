"""The token-rate pane: tok/s over time, with GPU clock and heat on the same axis, and marks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive

from specwatch.ui.model import WINDOWS, MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.renderables import (
    area_rows,
    bucket_sorted,
    column_of,
    fit,
    fmt_num,
    nice_ceiling,
    sparkline,
)

NO_STYLE = Style()


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
    stale: Style = NO_STYLE


@dataclass(frozen=True, slots=True)
class Reading:
    """The newest reading of a series printed beside it, and how old it is when held."""

    value: float | None
    age_s: float | None = None
    """Seconds since it was measured when no newer window had one (drawn dimmed); else None."""


@dataclass(frozen=True, slots=True)
class GraphMark:
    """A mark placed on the graph's columns."""

    col0: int
    col1: int
    kind: str
    label: str


LABEL_ORDER = {
    "bench": 0,
    "profile": 0,
    "restart": 1,
    "lost": 1,
    "loading": 2,
    "down": 2,
    "warmup": 3,
}
"""Which labels claim room on the mark row first."""
MARK_GLYPH = {
    "loading": "╌",
    "down": "┄",
    "warmup": "·",
    "bench": "━",
    "profile": "┅",
    "restart": "│",
    "lost": "│",
}


@dataclass(frozen=True, slots=True)
class MarkStyles:
    """Rich styles for the mark row."""

    axis: Style = NO_STYLE
    mark: Style = NO_STYLE
    bench: Style = NO_STYLE
    alert: Style = NO_STYLE

    def of(self, kind: str | None) -> Style:
        """The style of a mark kind (``None``: an empty cell)."""
        if kind in ("bench", "profile"):
            return self.bench
        if kind in ("restart", "lost"):
            return self.alert
        return self.mark


def label_choices(m: GraphMark) -> tuple[str, ...]:
    """The labels a mark may show, longest first (the first that fits wins)."""
    if m.kind == "restart":
        return ("R",)
    if m.kind == "lost":
        return ("✕",)
    if m.kind == "loading":
        return (m.label, m.label.replace("loading ", "L"), "L")
    if m.kind == "down":
        return (m.label, m.label.replace("down ", "D"), "D")
    if m.kind == "warmup":
        return (m.label, "warmup", "W")
    return (m.label, m.label[:1])


def place_labels(marks: Sequence[GraphMark], width: int) -> list[tuple[int, str, str]]:
    """Where each label goes: ``(start column, text, kind)``; labels never touch each other.

    A label keeps one free cell on either side of every other label (so ``B1`` and ``warmup``
    never read as ``B1warmup``); a mark whose labels all collide gets none (its glyphs remain).
    """
    taken = [False] * width
    placed: list[tuple[int, str, str]] = []
    for m in sorted(marks, key=lambda m: (LABEL_ORDER.get(m.kind, 9), m.col0)):
        c0 = max(0, m.col0)
        if c0 >= width:
            continue
        done = False
        for label in label_choices(m):
            for start in range(c0, min(width, c0 + 3)):
                end = start + len(label)
                if end > width or any(taken[max(0, start - 1) : min(width, end + 1)]):
                    continue
                for j in range(start, end):
                    taken[j] = True
                placed.append((start, label, m.kind))
                done = True
                break
            if done:
                break
    return placed


def mark_row(
    marks: Sequence[GraphMark],
    window_label: str,
    chart_width: int,
    gutter: int,
    label_width: int,
    styles: MarkStyles,
) -> list[Segment]:
    """One line: the window's name in the gutter, the marks on the chart's columns, ``now``."""
    cw = chart_width
    cells = [" "] * cw
    kinds: list[str | None] = [None] * cw
    for m in sorted(marks, key=lambda m: (m.kind == "bench", m.col0)):
        glyph = MARK_GLYPH.get(m.kind, "·")
        for c in range(max(0, m.col0), min(cw - 1, m.col1) + 1):
            cells[c] = glyph
            kinds[c] = m.kind
    for start, label, kind in place_labels(marks, cw):
        for j, ch in enumerate(label):
            cells[start + j] = ch
            kinds[start + j] = kind
    segs = [Segment(fit(window_label, gutter), styles.axis)]
    run_kind: str | None = kinds[0] if kinds else None
    run: list[str] = []
    for ch, k in zip(cells, kinds, strict=True):
        if k != run_kind and run:
            segs.append(Segment("".join(run), styles.of(run_kind)))
            run = []
        run_kind = k
        run.append(ch)
    if run:
        segs.append(Segment("".join(run), styles.of(run_kind)))
    segs.append(Segment(" " + fit("now", label_width - 1), styles.axis))
    return segs


def strip_range(
    values: Sequence[float | None], step: float, top: float | None
) -> tuple[float, float]:
    """A strip's scale: from ``step`` below its lowest reading (rounded) to ``top`` (or the
    highest reading rounded up), so the range printed beside it is the one drawn."""
    vals = [v for v in values if v is not None]
    if not vals:
        return (0.0, top if top is not None else 1.0)
    lo = math.floor((min(vals) - 0.5) / step) * step
    hi = top if top is not None else math.ceil((max(vals) + 0.5) / step) * step
    return (lo, max(hi, lo + step))


CLOCK_RANGE = (0.0, 100.0)
"""The clk% strip's fixed scale: 92% is the same block in every window and every minute."""


@dataclass(frozen=True, slots=True)
class TokenRateGraph:
    """tok/s as a filled chart, with the mean SM clock % and the hottest temperature on the same
    time axis below it, and a row of marks (loading, warmup, restarts, benchmark runs).

    Values are already bucketed into columns (see
    :func:`~specwatch.ui.renderables.bucket_sorted`); the chart is
    ``width - GUTTER - LABEL`` columns wide. Each strip prints its newest reading and the range
    its blocks span (``91% 0–100``: the clock's is fixed, the heat's follows its readings).
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
    current: tuple[Reading, Reading, Reading] | None = None
    """The newest (tok/s, clock %, hottest °C) for the labels; else the last column's mean."""
    top: float | None = None
    """The tok/s axis top (held by the pane so it only grows); else from the data."""

    GUTTER = 6
    LABEL = 11

    @staticmethod
    def chart_width(width: int) -> int:
        """Columns available to the plotted data at a total ``width``."""
        return max(1, width - TokenRateGraph.GUTTER - TokenRateGraph.LABEL)

    def needed_top(self) -> float:
        """The axis top the data alone asks for (the newest reading included)."""
        now = self.current[0].value if self.current else None
        seen = [v for v in (*self.tok_s, now) if v is not None]
        return nice_ceiling(max(seen)) if seen else 1.0

    def lines(self, width: int) -> list[list[Segment]]:
        """The graph as lines of segments, exactly ``width`` cells wide and ``height`` tall."""
        st = self.styles
        cw = self.chart_width(width)
        g, lab = self.GUTTER, width - self.GUTTER - cw
        strips = 2 if self.strips and self.height >= 4 else 0
        chart_h = max(1, self.height - strips - 1)
        tok = _pad(self.tok_s, cw)
        now_tok, now_clk, now_temp = self.current or (
            Reading(_last(tok)),
            Reading(_last(_pad(self.clock_pct, cw))),
            Reading(_last(_pad(self.hottest_c, cw))),
        )
        # The axis also covers the newest raw reading printed beside it, which can exceed the
        # column means (a label above the axis top reads as an error).
        top = max(self.top or 0.0, self.needed_top())
        out: list[list[Segment]] = []
        for i, row in enumerate(area_rows(tok, chart_h, top)):
            left = f"{top:g}" if i == 0 else ("0" if i == chart_h - 1 else "")
            right: list[Segment] = [Segment(" " + fit("tok/s" if i == 0 else "", lab - 1), st.axis)]
            if i == 1 or chart_h == 1:
                right = _reading(now_tok, fmt_num(now_tok.value), lab, st.tokens, st.stale)
            out.append(
                [Segment(fit(left.rjust(g - 1) + " ", g), st.axis), Segment(row, st.tokens), *right]
            )
        if strips:
            clk = _pad(self.clock_pct, cw)
            clo, chi = CLOCK_RANGE
            out.append(
                [
                    Segment(fit("clk%", g), st.axis),
                    Segment(sparkline(clk, clo, chi), st.clock),
                    *_strip_label(now_clk, "%", clo, chi, lab, st.clock, st),
                ]
            )
            temp = _pad(self.hottest_c, cw)
            tlo, thi = strip_range(temp, 5.0, None)
            out.append(
                [
                    Segment(fit("hot°C", g), st.axis),
                    Segment(sparkline(temp, tlo, thi), st.temp),
                    *_strip_label(now_temp, "°", tlo, thi, lab, st.temp, st),
                ]
            )
        marks = MarkStyles(axis=st.axis, mark=st.mark, bench=st.bench, alert=st.alert)
        out.append(mark_row(self.marks, self.window_label, cw, g, lab, marks))
        return out[: self.height]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        new_line = Segment.line()
        for line in self.lines(width):
            yield from line
            yield new_line


def _reading(r: Reading, text: str, lab: int, live: Style, stale: Style) -> list[Segment]:
    """A reading in the label column; a held one dimmed, with its age."""
    if r.age_s is None or r.value is None:
        return [Segment(" " + fit(text, lab - 1), live)]
    return [Segment(" " + fit(f"{text} {r.age_s:.0f}s", lab - 1), stale)]


def _strip_label(
    r: Reading, unit: str, lo: float, hi: float, lab: int, live: Style, st: GraphStyles
) -> list[Segment]:
    """The strip's newest reading in its colour, then the range it spans, muted."""
    now = "–" if r.value is None else f"{r.value:.0f}{unit}"
    rng = f"{lo:.0f}–{hi:.0f}"
    head = " " + now
    if len(head) >= lab:
        return [Segment(fit(head, lab), live)]
    return [Segment(head, live), Segment(fit(" " + rng, lab - len(head)), st.axis)]


def _pad(values: Sequence[float | None], width: int) -> list[float | None]:
    vals = list(values[-width:])
    return [None] * (width - len(vals)) + vals


def _last(values: Sequence[float | None]) -> float | None:
    for v in reversed(values):
        if v is not None:
            return v
    return None


# --- the pane ------------------------------------------------------------------------------

GAP_SAMPLES = 3.0
"""A gap shorter than this many sampling intervals is drawn through (no comb at 1 minute)."""


@dataclass(slots=True)
class AxisHold:
    """The top of a graph's value axis, held between draws and across windows.

    A reading above the top raises it at once, to the next round figure (a bar above the axis
    would read as an error); a lower need never lowers it. An axis that shrank after a quiet
    spell made the same tok/s look different from one minute to the next (600 ↔ 800), and a
    new window span starting from its own data did the same on every ``w``.
    """

    top: float | None = None

    def update(self, needed: float, t: float) -> float:
        """The top to draw with at time ``t`` when the data asks for ``needed``."""
        if self.top is None or needed > self.top:
            self.top = nice_ceiling(needed)
        return self.top


def graph_for(
    model: MonitorModel,
    window: str,
    width: int,
    height: int,
    styles: GraphStyles | None = None,
    strips: bool = True,
    axis: AxisHold | None = None,
) -> TokenRateGraph:
    """Bucket the model's histories into a graph ``width`` x ``height`` (pure but for ``axis``,
    whose held top the graph uses and updates)."""
    span = WINDOWS[window]
    cw = TokenRateGraph.chart_width(width)
    # Columns sit on a fixed time grid, so between shifts only the newest column changes (and
    # only it is repainted).
    step = span / cw
    end = math.ceil(model.now / step) * step if model.now > 0 else model.now
    start = end - span
    marks: list[GraphMark] = []
    for m in model.marks_since(start):
        t1 = m.t1 if m.t1 is not None else end
        c0 = column_of(m.t0, end, span, cw)
        c1 = column_of(t1, end, span, cw)
        marks.append(GraphMark(max(c0, 0), min(c1, cw - 1), m.kind, m.label))
    w = model.window
    hold_rate = GAP_SAMPLES * max(w.dt if w is not None else 0.0, model.interval_s)
    hold_gpu = GAP_SAMPLES * model.interval_s
    tok, tok_age = model.reading("gen_tok_s")
    graph = TokenRateGraph(
        tok_s=bucket_sorted(model.tok_s.after(start), end, span, cw, hold_rate),
        clock_pct=bucket_sorted(model.clock_pct.after(start), end, span, cw, hold_gpu),
        hottest_c=bucket_sorted(model.hottest_c.after(start), end, span, cw, hold_gpu),
        marks=marks,
        height=height,
        window_label=window,
        styles=styles or GraphStyles(),
        strips=strips,
        current=(
            Reading(tok, tok_age),
            Reading(model.clock_pct.last()),
            Reading(model.hottest_c.last()),
        ),
    )
    if axis is None:
        return graph
    top = axis.update(graph.needed_top(), model.now)
    return TokenRateGraph(
        tok_s=graph.tok_s,
        clock_pct=graph.clock_pct,
        hottest_c=graph.hottest_c,
        marks=graph.marks,
        height=height,
        window_label=window,
        styles=graph.styles,
        strips=strips,
        current=graph.current,
        top=top,
    )


def history_span(model: MonitorModel) -> float | None:
    """Seconds of token-rate history held (``None``: none yet)."""
    first = model.tok_s.first
    return None if first is None else max(0.0, model.now - first[0])


def duration_words(seconds: float) -> str:
    """``45s``, ``3m``, ``1h05m``: whole units, so a title changes once a minute at most."""
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds < 10 else f"{seconds // 10 * 10:.0f}s"
    minutes = int(seconds // 60)
    return f"{minutes}m" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


class TokenRatePane(ModelPane):
    """Token rate: a streaming graph over a selectable window."""

    VERSION = "rate_version"
    LINE_API = True

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "rate--tokens",
        "rate--clock",
        "rate--temp",
        "rate--axis",
        "rate--mark",
        "rate--bench",
        "rate--alert",
        "rate--stale",
    }

    DEFAULT_CSS = """
    TokenRatePane {
        height: 1fr;
        min-height: 3;
        border-top: solid $primary;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
    }
    TokenRatePane > .rate--tokens { color: $primary; }
    TokenRatePane > .rate--clock { color: $success; }
    TokenRatePane > .rate--temp { color: $accent; }
    TokenRatePane > .rate--axis { color: $text-muted; }
    TokenRatePane > .rate--mark { color: $text-muted; }
    TokenRatePane > .rate--bench { color: $foreground; text-style: bold; }
    TokenRatePane > .rate--alert { color: $error; text-style: bold; }
    TokenRatePane > .rate--stale { color: $text-disabled; }
    """

    window: reactive[str] = reactive("5m")
    """The time span shown: one of ``1m``, ``5m``, ``15m``, ``1h``."""

    strips: reactive[bool] = reactive(True)
    """Whether the clock and temperature rows are drawn (off on short terminals)."""

    def __init__(self, model: MonitorModel, *, id: str | None = None) -> None:
        super().__init__(model, id=id)
        self.axis = AxisHold()
        """The tok/s axis top, held between draws and windows (it only grows)."""

    def on_mount(self) -> None:
        """Title the pane."""
        self._retitle()

    def watch_strips(self) -> None:
        """Dropping or restoring the strips redraws at once."""
        self.force_sync()

    def watch_window(self) -> None:
        """A new window redraws at once, on the same tok/s axis; the GPU trends follow it."""
        self.model.graph_window = self.window
        self.model.gpu_version += 1
        self._retitle()
        self.force_sync()

    def _retitle(self) -> None:
        title = f"Token rate · last {self.window}"
        held = history_span(self.model)
        if held is not None and held < WINDOWS[self.window] / 2:
            # Else a 1 h window over 3 minutes of readings is three columns and no word why.
            title += f" · {duration_words(held)} of history"
        info = self.model.server
        if info is not None and info.metrics_enabled is False:
            title += " · no /metrics: no token rate"  # else an empty graph looks like no traffic
        self.set_title(title)

    def sync(self) -> bool:
        """Redraw on change, and retitle (the server may have turned out to lack /metrics)."""
        if self.display and self.is_mounted:
            self._retitle()
        return super().sync()

    def rows_besides_chart(self) -> int:
        """Its border, the clock and heat strips (or none) and the mark row."""
        return 1 + (3 if self.strips else 1)

    def build_lines(self, width: int, height: int) -> list[list[Segment]]:
        """The graph at the pane's current size."""
        styles = GraphStyles(**self.tone_styles())
        graph = graph_for(
            self.model, self.window, width, max(1, height), styles, self.strips, self.axis
        )
        return graph.lines(width)
