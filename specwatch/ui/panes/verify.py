"""The verify-latency pane: does a verify step pay for itself?"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.core.spec_payoff import spec_payoff
from specwatch.core.window_mean import STEADY_S, Steady
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import TextPane
from specwatch.ui.panes.load import bucket_words

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v * 1000:.1f}"


Piece = tuple[str, str]
"""A run of text and its tone (a key of the styles map)."""


def _fitting(width: int, full: list[Piece], compact: list[Piece]) -> list[Piece]:
    """``full`` when it fits ``width`` cells, else the abbreviated ``compact``."""
    return full if sum(len(t) for t, _ in full) <= width else compact


def _held(figure: Steady, compact: bool) -> list[Piece]:
    if figure.age_s is None:
        return []
    return [(f" {figure.age_s:.0f}s" if compact else f" held {figure.age_s:.0f}s", "dim")]


def _step_line(w: MetricsWindow, step: Steady, compact: bool) -> list[Piece]:
    gap = " " if compact else "  "
    if step.value is None:
        parts: list[Piece] = [("step ", "label"), ("not reported", "dim")]
    else:
        unit = "ms" if compact else " ms"
        tone = "value" if step.age_s is None else "dim"
        parts = [("step ", "label"), (f"{_ms(step.value)}{unit}", tone), *_held(step, compact)]
    share = w.cuda_graph_share
    low = share is not None and share < 0.99
    if share is None or (compact and not low):
        return [*parts, *_percentiles(w, gap)]
    graphs: list[Piece] = [(f"{gap}graphs ", "label"), (f"{share:.0%}", "bad" if low else "value")]
    # passes outside a CUDA graph are slower: then the step time is not the usual one, which
    # matters more than the percentiles a narrow pane cuts off
    if low:
        return [*parts, *graphs, *_percentiles(w, gap)]
    return [*parts, *_percentiles(w, gap), *graphs]


def _percentiles(w: MetricsWindow, gap: str) -> list[Piece]:
    parts: list[Piece] = []
    buckets = w.latency_buckets.get("step")
    if buckets:
        # The bucket each percentile falls in, as the load pane shows them: a point
        # interpolated inside a bucket read "step 13.9ms p50≈17.6", below its own mean.
        for bucket in buckets:
            parts += [(f"{gap}p{bucket.q * 100:g} ", "label"), (bucket_words(bucket), "value")]
        return parts
    pcts = (
        ("p50", w.step_latency_p50_s),
        ("p90", w.step_latency_p90_s),
        ("p99", w.step_latency_p99_s),
    )
    # Without the buckets (a server that sends percentiles), the points as the server gives them.
    for name, value in pcts:
        if value is not None:
            parts += [(f"{gap}{name}≈", "label"), (_ms(value), "value")]
    return parts


def verify_text(
    model: MonitorModel, s: dict[str, Style], width: int = 10_000, height: int = 10_000
) -> Text:
    """The pane's lines (pure; ``s`` maps ``label``/``value``/``dim``/``good``/``bad``).

    Four lines: step latency, tokens per step, plain latency, verdict. Step latency and tokens
    per step are means over the last :data:`~specwatch.core.window_mean.STEADY_S` seconds of
    windows (a window in which no verify step finished keeps them; a longer gap holds them,
    dimmed, with their age), so they hold still while they are read. A line too wide for the
    pane is abbreviated so its values stay visible; with fewer than four rows the plain line
    gives way, so the verdict is never the line that is cut off. On a server that does not
    speculate the step shown is the plain step, and the plain line says so.
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
    step = model.steady["step_latency_s"].at(model.now)
    accept = model.steady["step_tokens"].at(model.now)
    info = model.server
    if info is not None and info.spec.enabled is False and step.value is not None:
        return _plain_server(out, s, width, height, w, step)
    for piece, key in _fitting(width, _step_line(w, step, False), _step_line(w, step, True)):
        out.append(piece, s[key])
    step_ms = None if step.value is None else step.value * 1000
    tps = accept.value
    judged = spec_payoff(step_ms, tps, model.baseline_ms)
    tok = "–" if tps is None else f"{tps:.2f}"
    eff = judged.effective_ms_per_token
    eff_text = "–" if eff is None else f"{eff:.1f} ms/tok"
    out.append("\n")
    tok_tone = "value" if accept.age_s is None else "dim"
    full: list[Piece] = [("tok/step ", "label"), (tok, tok_tone), ("  effective ", "label")]
    compact: list[Piece] = [("tok/step ", "label"), (tok, tok_tone), (" eff ", "label")]
    for piece, key in _fitting(
        width,
        [*full, (eff_text, "value"), *_held(accept, False)],
        [*compact, (eff_text, "value"), *_held(accept, True)],
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
    if step.value is None and judged.plain_ms_per_token is not None:
        text = "no verdict: the server reports no step latency"
    out.append(text, tone)
    if judged.plain_ms_per_token is not None and model.baseline_source:
        out.append(f"  (plain: {model.baseline_source})", s["dim"])
    return out


def _plain_server(
    out: Text, s: dict[str, Style], width: int, height: int, w: MetricsWindow, step: Steady
) -> Text:
    """A server that does not speculate: its step is the plain step, one token a request."""
    for piece, key in _fitting(width, _step_line(w, step, False), _step_line(w, step, True)):
        out.append(piece, s[key])
    ms = _ms(step.value)
    out.append("\ntok/step ", s["label"])
    out.append("1", s["value"])
    out.append(" (no drafts)", s["dim"])
    if height >= 4:
        out.append("\nplain ", s["label"])
        out.append(f"{ms} ms/tok", s["value"] if step.age_s is None else s["dim"])
        out.append("  the step above", s["dim"])
    out.append("\nspeculation off: ", s["dim"])
    out.append(f"--baseline-itl {ms} for a speculating run", s["dim"])
    return out


class VerifyPane(TextPane):
    """Verify latency: step latency, tokens per step (means over the last windows), effective
    and plain per-token latency."""

    VERSION = "spec_version"
    TITLE = f"Verify latency · {STEADY_S:.0f} s mean"

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
