"""The token-rate pane: tok/s over time, with GPU clock and heat on the same axis, and marks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from textual.reactive import reactive

from specwatch.core.ring import bucket_sorted
from specwatch.ui.model import WINDOWS, MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.renderables.graph import GraphMark, GraphStyles, Reading, TokenRateGraph
from specwatch.ui.renderables.text import column_of, nice_ceiling

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
    first = next(iter(model.tok_s), None)
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
