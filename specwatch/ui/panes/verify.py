"""The verify-latency pane: does a verify step pay for itself?"""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.core.verdict import verdict
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import ModelPane


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v * 1000:.1f}"


def verify_text(model: MonitorModel, s: dict[str, Style]) -> Text:
    """The pane's lines (pure; ``s`` maps ``label``/``value``/``dim``/``good``/``bad``)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    w = model.window
    if w is None:
        out.append("waiting for a window of decode steps…", s["dim"])
        return out
    out.append("step ", s["label"])
    out.append(f"{_ms(w.step_latency_s)} ms", s["value"])
    pcts = (
        ("p50", w.step_latency_p50_s),
        ("p90", w.step_latency_p90_s),
        ("p99", w.step_latency_p99_s),
    )
    for name, value in pcts:
        if value is not None:
            out.append(f"  {name} ", s["label"])
            out.append(_ms(value), s["value"])
    step_ms = None if w.step_latency_s is None else w.step_latency_s * 1000
    tps = w.accept_length
    judged = verdict(step_ms, tps, model.baseline_ms)
    out.append("\ntok/step ", s["label"])
    out.append("–" if tps is None else f"{tps:.2f}", s["value"])
    out.append("  effective ", s["label"])
    eff = judged.effective_ms_per_token
    out.append("–" if eff is None else f"{eff:.1f} ms/tok", s["value"])
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
    out.append(judged.text, tone)
    if judged.plain_ms_per_token is not None and model.baseline_source:
        out.append(f"  (plain: {model.baseline_source})", s["dim"])
    return out


class VerifyPane(ModelPane):
    """Verify latency: step latency, tokens per step, effective and plain per-token latency."""

    VERSION = "spec_version"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "verify--label",
        "verify--value",
        "verify--dim",
        "verify--good",
        "verify--bad",
    }

    DEFAULT_CSS = """
    VerifyPane {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 100%;
        border-top: solid $primary;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
    }
    VerifyPane > .verify--label { color: $text-muted; }
    VerifyPane > .verify--value { color: $text; text-style: bold; }
    VerifyPane > .verify--dim { color: $text-muted; }
    VerifyPane > .verify--good { color: $success; text-style: bold; }
    VerifyPane > .verify--bad { color: $error; text-style: bold; }
    """

    def on_mount(self) -> None:
        """Title the pane."""
        self.border_title = "Verify latency"

    def render_pane(self) -> RenderableType:
        """The pane's lines."""
        c = self.component_styles(*self.COMPONENT_CLASSES)
        styles = {
            "label": c["verify--label"],
            "value": c["verify--value"],
            "dim": c["verify--dim"],
            "good": c["verify--good"],
            "bad": c["verify--bad"],
        }
        return verify_text(self.model, styles)
