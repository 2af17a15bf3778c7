"""The verify-latency pane: does a verify step pay for itself?"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.core.spec_payoff import spec_payoff
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import TextPane

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v * 1000:.1f}"


Piece = tuple[str, str]
"""A run of text and its tone (a key of the styles map)."""


def _fitting(width: int, full: list[Piece], compact: list[Piece]) -> list[Piece]:
    """``full`` when it fits ``width`` cells, else the abbreviated ``compact``."""
    return full if sum(len(t) for t, _ in full) <= width else compact


def _step_line(w: MetricsWindow, compact: bool) -> list[Piece]:
    gap = " " if compact else "  "
    if w.step_latency_s is None:
        parts: list[Piece] = [("step ", "label"), ("not reported", "dim")]
    else:
        unit = "ms" if compact else " ms"
        parts = [("step ", "label"), (f"{_ms(w.step_latency_s)}{unit}", "value")]
    pcts = (
        ("p50", w.step_latency_p50_s),
        ("p90", w.step_latency_p90_s),
        ("p99", w.step_latency_p99_s),
    )
    # Percentiles come from histogram buckets (vLLM's start 10 ms, 25 ms, ...): interpolated
    # within a bucket, so they are approximate where the mean is exact.
    for name, value in pcts:
        if value is not None:
            parts += [(f"{gap}{name}≈", "label"), (_ms(value), "value")]
    return parts


def verify_text(
    model: MonitorModel, s: dict[str, Style], width: int = 10_000, height: int = 10_000
) -> Text:
    """The pane's lines (pure; ``s`` maps ``label``/``value``/``dim``/``good``/``bad``).

    Four lines: step latency, tokens per step, plain latency, verdict. A line too wide for the
    pane is abbreviated so its values stay visible; with fewer than four rows the plain line
    gives way, so the verdict is never the line that is cut off.
    """
    out = Text(no_wrap=True, overflow="ellipsis")
    w = model.window
    if w is None:
        info = model.server
        if info is not None and info.metrics_enabled is False:
            out.append(info.metrics_reason or "no /metrics: no step latency", s["dim"])
        else:
            out.append("waiting for a window of decode steps…", s["dim"])
        return out
    for piece, key in _fitting(width, _step_line(w, False), _step_line(w, True)):
        out.append(piece, s[key])
    step_ms = None if w.step_latency_s is None else w.step_latency_s * 1000
    tps = w.accept_length
    judged = spec_payoff(step_ms, tps, model.baseline_ms)
    tok = "–" if tps is None else f"{tps:.2f}"
    eff = judged.effective_ms_per_token
    eff_text = "–" if eff is None else f"{eff:.1f} ms/tok"
    out.append("\n")
    full: list[Piece] = [("tok/step ", "label"), (tok, "value"), ("  effective ", "label")]
    compact: list[Piece] = [("tok/step ", "label"), (tok, "value"), (" eff ", "label")]
    for piece, key in _fitting(
        width, [*full, (eff_text, "value")], [*compact, (eff_text, "value")]
    ):
        out.append(piece, s[key])
    if height >= 4:
        out.append("\nplain ", s["label"])
        if judged.plain_ms_per_token is None:
            out.append("unknown", s["dim"])
        else:
            out.append(f"{judged.plain_ms_per_token:.1f} ms/tok", s["value"])
            out.append("  break-even ", s["label"])
            be = judged.break_even_accept_length
            out.append("–" if be is None else f"{be:.2f}", s["value"])
    out.append("\n")
    tone = s["dim"]
    if judged.speed_ratio is not None:
        tone = s["good"] if judged.speed_ratio >= 1.0 else s["bad"]
    text = judged.text
    if w.step_latency_s is None and judged.plain_ms_per_token is not None:
        text = "no verdict: the server reports no step latency"
    out.append(text, tone)
    if judged.plain_ms_per_token is not None and model.baseline_source:
        out.append(f"  (plain: {model.baseline_source})", s["dim"])
    return out


class VerifyPane(TextPane):
    """Verify latency: step latency, tokens per step, effective and plain per-token latency."""

    VERSION = "spec_version"
    TITLE = "Verify latency"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "verify--label",
        "verify--value",
        "verify--dim",
        "verify--good",
        "verify--bad",
    }

    DEFAULT_CSS = """
    VerifyPane > .verify--label { color: $text-muted; }
    VerifyPane > .verify--value { color: $text; text-style: bold; }
    VerifyPane > .verify--dim { color: $text-muted; }
    VerifyPane > .verify--good { color: $success; text-style: bold; }
    VerifyPane > .verify--bad { color: $error; text-style: bold; }
    """

    def render_pane(self) -> RenderableType:
        """The pane's lines at its current size."""
        size = self.content_size
        return verify_text(self.model, self.tone_styles(), size.width, size.height)
