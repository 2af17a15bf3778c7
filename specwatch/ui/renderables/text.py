"""Text helpers shared by the renderables: sparklines, bars, columns, axis tops, numbers.

Pure functions over plain values; nothing here knows about widgets, styles or the app.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"
"""Eighth-height blocks: index 0 is empty, 8 is full."""
HBLOCKS = " ▏▎▍▌▋▊▉█"
"""Eighth-width blocks for horizontal bars."""
GAP = " "


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
