"""The speculation pane: windowed accept length and acceptance, with their lifetime values."""

from __future__ import annotations

import textwrap
from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import TextPane
from specwatch.ui.renderables import sparkline

TREND = 8
HEAD = 16
"""Cells of a reading's label and value (``accept len 2.29 ``)."""
SOURCES_HINT = "m: where each number comes from"


def _trend(values: list[float | None]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return " " * TREND
    lo, hi = min(vals), max(vals)
    pad = max((hi - lo) * 0.1, 1e-9)
    return sparkline(values, lo - pad, hi + pad).rjust(TREND)


def speculation_text(
    model: MonitorModel, s: dict[str, Style], width: int = 10_000, height: int = 10_000
) -> Text:
    """The pane's lines (pure; ``s`` maps ``label``/``value``/``dim``/``trend`` to styles)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    info = model.server
    w = model.window
    scrape = model.last_scrape
    if info is not None and info.spec.enabled is False:
        out.append("speculation off", s["value"])
        if info.spec.source:
            out.append(f" (per {info.spec.source})", s["dim"])
        return out
    if w is None and scrape is None:
        out.append("waiting for /metrics…", s["dim"])
        if info is not None and info.metrics_enabled is False and info.metrics_reason:
            out = Text(info.metrics_reason, s["dim"], no_wrap=True, overflow="ellipsis")
        return out
    al, al_age = model.reading("accept_length")
    ar, ar_age = model.reading("draft_acceptance_rate")
    latest = w or scrape
    life_al = latest.lifetime_accept_length if latest is not None else None
    life_ar = latest.lifetime_acceptance_rate if latest is not None else None

    def line(label: str, value: str, age: float | None, trend: str, life: str) -> None:
        held = "" if age is None else f"  held {age:.0f}s"
        life_text = f" life {life}"
        # The age of a held reading is cut last: the trend goes first, then the lifetime value.
        room = width - HEAD - len(held)
        show_life = len(life_text) <= room
        show_trend = show_life and TREND + len(life_text) <= room
        out.append(f"{label:<10}", s["label"])
        out.append(f"{value:>5} ", s["value"] if age is None else s["dim"])
        if show_trend:
            out.append(trend, s["trend"])
        if show_life:
            out.append(life_text, s["dim"])
        out.append(held, s["dim"])
        out.append("\n")

    line(
        "accept len",
        "–" if al is None else f"{al:.2f}",
        al_age,
        _trend(model.accept_length.values(TREND)),
        "–" if life_al is None else f"{life_al:.2f}",
    )
    line(
        "acceptance",
        "–" if ar is None else f"{ar * 100:.0f}%",
        ar_age,
        _trend(model.acceptance_rate.values(TREND)),
        "–" if life_ar is None else f"{life_ar * 100:.0f}%",
    )
    out.append(f"{'per pos':<10}", s["label"])
    pos, pos_age = model.per_position()
    if pos:
        out.append(
            " ".join(f"{p * 100:.0f}%" for p in pos), s["value" if pos_age is None else "dim"]
        )
        if pos_age is not None:
            out.append(f"  held {pos_age:.0f}s", s["dim"])
    else:
        why = (w.notes.get("per_position_acceptance") if w else None) or "not reported"
        out.append(why, s["dim"])
    if height > 3:
        # Always the fourth row, whatever the window carries, so rows never swap places; the
        # formulas behind each number are in the metric-sources view, not cut here.
        out.append("\n")
        src = w or scrape
        note = next(iter(src.notes.values()), None) if src is not None else None
        if not note:
            out.append(SOURCES_HINT, s["dim"])
            return out
        # A note too long for the pane goes on over the rows below rather than being cut.
        rows = textwrap.wrap(f"note: {note}", max(width, 1), break_long_words=False)
        shown = rows[: max(height - 3, 1)]
        if len(shown) < len(rows):
            shown[-1] = shown[-1][: max(width - 1, 0)] + "…"
        out.append("\n".join(shown), s["dim"])
    return out


class SpeculationPane(TextPane):
    """Speculation: accept length and acceptance rate, windowed and lifetime.

    A reading missing from the newest window is held, dimmed, with its age; the formulas
    behind each number are in the metric-sources view (``m``).
    """

    VERSION = "spec_version"
    TITLE = "Speculation"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "spec--label",
        "spec--value",
        "spec--dim",
        "spec--trend",
    }

    DEFAULT_CSS = """
    SpeculationPane > .spec--label { color: $text-muted; }
    SpeculationPane > .spec--value { color: $text; text-style: bold; }
    SpeculationPane > .spec--dim { color: $text-muted; }
    SpeculationPane > .spec--trend { color: $secondary; }
    """

    def render_pane(self) -> RenderableType:
        """The pane's lines at its current size."""
        size = self.content_size
        return speculation_text(self.model, self.tone_styles(), size.width, size.height)
