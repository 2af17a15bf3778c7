"""A one-line progress bar, shown while a benchmark started with ``b`` (or a profile asked for
with ``P``) runs."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.panes.status import fit_parts
from specwatch.ui.renderables import hbar


def bench_text(model: MonitorModel, width: int, s: dict[str, Style]) -> Text:
    """The progress line (pure; ``s`` maps ``text``/``bar``/``dim``)."""
    b = model.bench
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    p = model.profile
    if p is not None and (p.active or b is None or not b.active):
        out.append("profile ", s["text"])
        out.append(p.words, s["text"] if p.active else s["dim"])
        if p.active:
            out.append("  (P: stop)", s["dim"])
        return out
    if b is None:
        return out
    out.append("benchmark ", s["text"])
    done = len(b.last_tok_s)
    total = max(b.total, 1)
    bar_w = max(6, min(20, width // 5))
    frac = done / total if b.phase != "warmup" else 0.0
    out.append(hbar(frac, bar_w), s["bar"])
    if b.phase == "warmup":
        out.append(f" warmup {b.index}/{b.total}", s["text"])
    elif b.phase == "running":
        out.append(f" run {min(done + 1, b.total)}/{b.total}", s["text"])
    else:
        out.append(f" {b.phase}", s["text"])
    tail: list[tuple[int, str, str]] = []
    if b.last_tok_s:
        tail.append((2, "  last " + " ".join(f"{v:.1f}" for v in b.last_tok_s[-5:]) + " tok/s", ""))
    # "Run N/M started" repeats the count; a final event's message is its phase again.
    if b.message and not b.message.endswith(" started") and b.message != b.phase:
        tail.append((3, f"  {b.message}", ""))
    if b.active:
        tail.append((1, "  (b: stop)", ""))
    # Whole parts are dropped, the message first, so that no figure is cut inside.
    tail.insert(0, (0, "", ""))  # the head, already drawn: it stays
    for _, text, _ in fit_parts(tail, width - len(out))[1:]:
        out.append(text, s["dim"])
    return out


class BenchBar(ModelPane):
    """Benchmark progress; hidden until the first benchmark."""

    VERSION = "status_version"

    COMPONENT_CLASSES: ClassVar[set[str]] = {"bench--bar", "bench--dim"}

    DEFAULT_CSS = """
    BenchBar {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 1;
        display: none;
        background: $panel;
        padding: 0 1;
    }
    BenchBar.-active { display: block; }
    BenchBar > .bench--bar { color: $accent; }
    BenchBar > .bench--dim { color: $text-muted; }
    """

    def render_pane(self) -> RenderableType:
        """The progress line."""
        c = self.component_styles(*self.COMPONENT_CLASSES)
        styles = {"text": c["normal"], "bar": c["bench--bar"], "dim": c["bench--dim"]}
        return bench_text(self.model, self.content_size.width, styles)
