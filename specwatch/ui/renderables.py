"""Pure renderables: each draws one thing from plain data and Rich styles.

Nothing here knows about widgets or the app: a pane hands in data and styles (taken from its
component classes, so only theme variables decide colours) and gets back lines of segments.
Tests print these to a plain ``rich.console.Console``. First a graph's series
(:class:`TimeSeries`) and its columns: the mean of the series' points in each
(:func:`bucket_sorted`); then the text helpers every pane shares
(sparklines, bars, axis tops, numbers), then the GPU table: rows of cells laid
out in the columns that fit the width, and its summary (a few lines in place of the table when
the terminal is short).
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

BLOCKS = " ▁▂▃▄▅▆▇█"
"""Eighth-height blocks: index 0 is empty, 8 is full."""
HBLOCKS = " ▏▎▍▌▋▊▉█"
"""Eighth-width blocks for horizontal bars."""
GAP = " "


def column_of(t: float, t_end: float, span_s: float, width: int) -> int:
    """The column a time falls in (may be < 0 or >= width when outside the window)."""
    return math.floor((t - (t_end - span_s)) * width / span_s)


Point = tuple[float, float | None]
"""A series' point: its time and its value (``None``: a gap)."""


def point_time(point: Point) -> float:
    """A point's time (the key both the series and its column means bisect by)."""
    return point[0]


class TimeSeries:
    """The newest ``maxlen`` points ``(t, value)`` of one reading; ``None`` marks a gap. Only
    the app's thread touches the model, so it needs no lock.

    Args:
        maxlen: How many points to keep.
    """

    def __init__(self, maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self._points: deque[Point] = deque(maxlen=maxlen)

    @property
    def maxlen(self) -> int:
        """The capacity."""
        return self._points.maxlen or 0

    def append(self, t: float, value: float | None) -> None:
        """Add a point at time ``t`` (times should not go backwards)."""
        self._points.append((t, value))

    def clear(self) -> None:
        """Drop every point."""
        self._points.clear()

    def __len__(self) -> int:
        return len(self._points)

    def points(self) -> list[Point]:
        """Every point, oldest first."""
        return list(self._points)

    def values(self, n: int | None = None) -> list[float | None]:
        """Every value (or the newest ``n``), oldest first (gaps as ``None``)."""
        if n is None:
            return [v for _, v in self._points]
        newest = [v for _, v in itertools.islice(reversed(self._points), max(n, 0))]
        newest.reverse()
        return newest

    def after(self, t0: float) -> list[Point]:
        """Points with ``t > t0``, oldest first: by bisection, since times never go backwards,
        and only they are copied (a graph asks for its window of an hour's series)."""
        points = self._points
        lo = bisect_right(points, t0, key=point_time)
        out = list(itertools.islice(reversed(points), len(points) - lo))
        out.reverse()
        return out

    @property
    def latest(self) -> Point | None:
        """The newest point, or ``None`` when empty."""
        return self._points[-1] if self._points else None

    @property
    def first(self) -> Point | None:
        """The oldest point, or ``None`` when empty."""
        return self._points[0] if self._points else None

    def last(self) -> float | None:
        """The newest value, or ``None`` (when empty, or when the newest point is a gap)."""
        return self._points[-1][1] if self._points else None


_value = itemgetter(1)

DENSE = 8
"""Below this many points per column, one pass over the points beats bisecting each edge."""


def bucket_sorted(
    points: Sequence[Point],
    t_end: float,
    span_s: float,
    width: int,
    hold_s: float = 0.0,
) -> list[float | None]:
    """Mean value per column over ``(t_end - span_s, t_end]`` of points whose times never
    decrease, oldest column first.

    A point falls in column ``int((t - t0) * width / span_s)`` (the last column takes the
    rest); that never decreases with time, so bisection finds the edges. Columns without a
    point (or with only ``None`` points) are ``None`` (drawn as a gap), unless the last point
    before them is at most ``hold_s`` older than the column's end: samples that arrive about
    once per column then draw a continuous line, not a comb (see :func:`fill_gaps`); a real
    outage, longer than ``hold_s``, still shows. Each column's values are added in order from
    zero; Python 3.12's ``sum`` compensates rounding, so there a mean of fractional values
    may differ from a plain loop's in the last bit (integer-valued points, such as clocks in
    MHz, are exact). With many points per column, a few Python steps per column and none per
    point.
    """
    if width <= 0 or span_s <= 0:
        return []
    t0 = t_end - span_s
    scale = width / span_s
    lo = bisect_right(points, t0, key=point_time)  # points[:lo] are at or before t0
    hi = bisect_right(points, t_end, lo=lo, key=point_time)  # points[hi:] are after t_end
    if (hi - lo) < width * DENSE:
        means, newest = _dense(points[lo:hi], t0, scale, width)
    else:
        means, newest = _sparse(points, lo, hi, t0, scale, width)
    if hold_s <= 0:
        return means
    ends = [t0 + (i + 1) / scale for i in range(width)]
    return fill_gaps(means, newest, ends, hold_s, _before(points, lo))


def _dense(
    points: Sequence[Point], t0: float, scale: float, width: int
) -> tuple[list[float | None], list[float | None]]:
    """Means and newest times per column for a few points per column (the graph): one pass,
    the points known to lie in the window."""
    sums = [0.0] * width
    counts = [0] * width
    newest: list[float | None] = [None] * width
    last = width - 1
    for t, v in points:
        if v is None:
            continue
        col = int((t - t0) * scale)
        if col > last:
            col = last
        sums[col] += v
        counts[col] += 1
        newest[col] = t
    return [s / n if n else None for s, n in zip(sums, counts, strict=True)], newest


def _sparse(
    points: Sequence[Point], lo: int, hi: int, t0: float, scale: float, width: int
) -> tuple[list[float | None], list[float | None]]:
    """Means and newest times per column for many points per column (the GPU trends)."""

    def column(p: Point) -> int:
        return int((p[0] - t0) * scale)  # the last column takes the rest

    edges = [lo, *(bisect_left(points, c, lo, hi, key=column) for c in range(1, width)), hi]
    means: list[float | None] = []
    newest: list[float | None] = []
    for c in range(width):
        a, b = edges[c], edges[c + 1]
        if a == b:
            means.append(None)
            newest.append(None)
            continue
        seg = points[a:b]
        try:
            total = sum(map(_value, seg))
        except TypeError:  # a gap (None) among them: only the known values count
            known = [p for p in seg if p[1] is not None]
            if not known:
                means.append(None)
                newest.append(None)
                continue
            seg = known
            total = sum(map(_value, seg))
        means.append(total / len(seg))
        newest.append(seg[-1][0])
    return means, newest


def _before(points: Sequence[Point], lo: int) -> tuple[float, float] | None:
    """The newest known point at or before the window's start (``points[:lo]``)."""
    for i in range(lo - 1, -1, -1):
        t, v = points[i]
        if v is not None:
            return (t, v)
    return None


def fill_gaps(
    means: Sequence[float | None],
    newest: Sequence[float | None],
    ends: Sequence[float],
    hold_s: float,
    before: tuple[float, float] | None = None,
) -> list[float | None]:
    """Carry each column's value into following empty columns that end within ``hold_s`` of
    its newest point (``before``: the last point left of the window, as ``(t, value)``)."""
    out: list[float | None] = []
    last = before
    for mean, t, end in zip(means, newest, ends, strict=True):
        if mean is not None and t is not None:
            last = (t, mean)
            out.append(mean)
        elif last is not None and end - last[0] <= hold_s:
            out.append(last[1])
        else:
            out.append(None)
    return out


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


# --- the GPU table ---------------------------------------------------------------------------

NO_STYLE = Style()


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
    Column("sm", "SM MHz", 6, 0),
    Column("deficit", "vs max", 6, 0),
    Column("memclk", "memclk", 6, 8),
    Column("temp", "°C", 3, 0),
    Column("hbm", "HBM", 3, 6),
    Column("power", "power W", 7, 2),
    Column("pstate", "P", 3, 3),
    Column("pcie", "PCIe", 5, 4),
    Column("util", "util", 4, 2),
    Column("prof", "DRAM/TC", 7, 9),
    Column("mem", "mem GiB", 7, 5),
    Column("trend", "SM trend", 8, 7, "left"),
    Column("reasons", "clock events", 10, 1, "left"),
)
"""Display order; ``reasons`` takes the width left over."""

MISSING = Cell("", "dim")
"""A cell the row does not have."""

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
    temp: Style = NO_STYLE
    """Temperature's own colour (one colour per quantity across panes)."""
    clock: Style = NO_STYLE
    """The SM clock's own colour (one colour per quantity across panes)."""
    flag: Style = NO_STYLE
    """A clock below its maximum with no clock-event reason: the case specwatch exists for."""
    mark: Style = NO_STYLE

    def tone(self, tone: str) -> Style:
        """The style for a tone key."""
        return self.tones().get(tone, self.normal)

    def tones(self) -> dict[str, Style]:
        """Every tone key's style (``normal`` for any other key)."""
        return {
            "dim": self.dim,
            "warn": self.warn,
            "bad": self.bad,
            "clock": self.clock,
            "temp": self.temp,
            "flag": self.flag,
            "mark": self.mark,
        }


@dataclass(frozen=True, slots=True)
class GpuTable:
    """Rows of GPU cells laid out in the columns that fit the width."""

    rows: Sequence[dict[str, Cell]]
    styles: TableStyles = field(default_factory=TableStyles)
    header: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    """Column headings that replace the defaults (``{"trend": "SM 5m"}``)."""

    def lines(self, width: int) -> list[list[Segment]]:
        """The table as lines of segments, each exactly ``width`` cells wide."""
        cols = choose_columns(width)
        used = sum(c.width for c in cols) + len(cols) - 1
        extra = max(0, width - used)
        widths = {c.key: c.width + (extra if c.key == "reasons" else 0) for c in cols}
        layout = [(c.key, widths[c.key], c.align) for c in cols]
        st = self.styles
        tones = st.tones()
        normal = st.normal
        out: list[list[Segment]] = []
        if self.header:
            text = " ".join(
                _align(self.headers.get(c.key, c.header), widths[c.key], c.align) for c in cols
            )
            out.append([Segment(fit(text, width), st.header)])
        for row in self.rows:
            segs: list[Segment] = []
            span = row.get(SPAN)
            if span is not None:
                first = cols[0]
                gpu = row.get(first.key, Cell(""))
                segs.append(
                    Segment(
                        _align(gpu.text, widths[first.key], first.align),
                        tones.get(gpu.tone, normal),
                    )
                )
                rest = width - widths[first.key] - 1
                segs.append(Segment(" " + fit(span.text, rest), tones.get(span.tone, normal)))
                out.append(segs)
                continue
            # Neighbouring pieces of one style (separators included) share a segment: a
            # segment costs an escape sequence and a reset each time its line is repainted.
            cells = 0
            texts: list[str] = []
            style = normal
            for i, (key, w, align) in enumerate(layout):
                cell = row.get(key, MISSING)
                text = _align(cell.text, w, align)
                cells += cell_len(text) + (1 if i else 0)
                for piece, piece_style in ((" ", normal), (text, tones.get(cell.tone, normal))):
                    if not i and piece == " ":
                        continue
                    if piece_style is not style and texts:
                        segs.append(Segment("".join(texts), style))
                        texts = []
                    style = piece_style
                    texts.append(piece)
            if cells < width:
                if style is not normal and texts:
                    segs.append(Segment("".join(texts), style))
                    texts = []
                style = normal
                texts.append(" " * (width - cells))
            if texts:
                segs.append(Segment("".join(texts), style))
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


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """Lines of toned cells, each line cut to the width (later cells go first)."""

    lines_of_cells: Sequence[Sequence[Cell]]
    styles: TableStyles = field(default_factory=TableStyles)

    def lines(self, width: int) -> list[list[Segment]]:
        """Each line exactly ``width`` cells wide; a cell that does not fit whole is dropped."""
        out: list[list[Segment]] = []
        for cells in self.lines_of_cells:
            segs: list[Segment] = []
            used = 0
            for cell in cells:
                if used + len(cell.text) > width:
                    break
                segs.append(Segment(cell.text, self.styles.tone(cell.tone)))
                used += len(cell.text)
            if used < width:
                segs.append(Segment(" " * (width - used), self.styles.normal))
            out.append(segs)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        for line in self.lines(options.max_width):
            yield from line
            yield new_line
