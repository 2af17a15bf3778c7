"""The token-rate graph: tok/s as a filled chart, clock and heat strips, a row of marks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

from specwatch.ui.renderables.marks import GraphMark, MarkStyles, mark_row
from specwatch.ui.renderables.text import area_rows, fit, fmt_num, nice_ceiling, sparkline

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
    :func:`~specwatch.ui.renderables.columns.bucket_sorted`); the chart is
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
