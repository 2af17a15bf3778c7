"""The verdict line at the top: GPU state, load, or code? — the current window against a reference.

The session computes the verdict and its numbers (:mod:`specwatch.session.live_verdict`) and the
app keeps the latest in its model; this pane only words them, in ``compare``'s wording, dropping
the least important parts to fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.session.live_verdict import CURRENT_S
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.panes.status import SEP, fit_parts, parts_line

if TYPE_CHECKING:
    from specwatch.core.judge import Figures
    from specwatch.core.outcomes import Outcome
    from specwatch.session.verdict_state import LiveVerdictState

TONES: dict[str, str] = {
    "NO_CHANGE": "ok",
    "GPU": "gpu",
    "CODE": "bad",
    "UNKNOWN": "dim",
    "LOAD": "load",
    "ACCEPTANCE": "load",
    "HOST": "load",
    "CONFIG": "load",
}
"""The tone of each outcome, by member name (the names ``compare`` may add are included)."""


def _pair(a: float | None, b: float | None, fmt: str) -> str | None:
    if a is None and b is None:
        return None
    left = "–" if a is None else format(a, fmt)
    right = "–" if b is None else format(b, fmt)
    return f"{right} vs {left}"


def clock_words(f: Figures) -> str | None:
    """``"slowest GPU −7.7% of max over 30 s, no reason set"`` (``None`` without readings).

    The GPU rows show each GPU now; this is the window's mean, and says so.
    """
    deficit = f.clock_deficit
    if deficit is None:
        return None
    reasons = " ".join(sorted(f.clock_reasons)) or "no reason set"
    over = f"over {CURRENT_S:.0f} s"
    return f"slowest GPU {deficit * 100:+.1f}% of max {over}, {reasons}".replace("-", "−")


def outcome_words(outcome: Outcome, noise: float | None, term: str = "SM clock") -> str:
    """The verdict's words; "no significant change" carries the noise it was judged against, and
    GPU state carried by the memory clock names it (decode is memory-bound)."""
    if outcome.name == "NO_CHANGE" and noise is not None:
        return f"{outcome.wording} (±{noise * 100:.0f}%)"
    if outcome.name == "GPU" and term != "SM clock":
        return f"{outcome.wording} ({term})"
    return outcome.wording


def verdict_parts(state: LiveVerdictState, short: bool = False) -> list[tuple[int, str, str]]:
    """``(priority, text, tone)`` in display order; lower priority is kept longer. ``short``
    words the verdict by its head alone (``not explained by GPU state``), without the advice
    after the colon."""
    if state.judgement is None or state.current is None:
        text = f"verdict: {state.detail or state.phase}"
        parts = [(0, text, "dim")]
        if state.reference is not None and state.current is not None:
            parts.append((3, f"vs {state.reference.label}", "dim"))
        return parts
    j, cur = state.judgement, state.current
    assert state.reference is not None
    ref = state.reference.figures
    outcome: Outcome = j.outcome
    words = outcome_words(outcome, j.noise, j.term)
    if short:
        words = words.split(":", 1)[0]
    parts = [(0, f" {words} ", TONES.get(outcome.name, "text"))]
    if j.configuration:  # what changed says more than the figures it changed
        from specwatch.core.config_differences import differences_text

        parts.append((1, differences_text(j.configuration, limit=2), "text"))
    tok = _pair(ref.mean_tok_s, cur.mean_tok_s, ".0f")
    if tok is not None:
        change = f" ({j.change * 100:+.1f}%)".replace("-", "−") if j.change is not None else ""
        parts.append((1, f"tok/s {tok}{change}", "text"))
    sm = clock_words(cur)
    if sm is not None:
        unflagged = not cur.clock_reasons and (cur.clock_deficit or 0.0) < -0.02
        parts.append((1, sm, "gpu" if unflagged else "text"))
    mem = _pair(ref.slowest_mem_clock_mhz, cur.slowest_mem_clock_mhz, ".0f")
    if mem is not None and j.term == "memory clock":
        parts.append((1, f"memory clock {mem} MHz", "gpu"))
    running = _pair(ref.running_requests, cur.running_requests, ".1f")
    if running is not None:
        parts.append((2, f"running {running}", "text"))
    prompt = _pair(ref.prompt_tok_s, cur.prompt_tok_s, ".0f")
    if prompt is not None:
        parts.append((4, f"prompt tok/s {prompt}", "text"))
    accept = _pair(ref.accept_length, cur.accept_length, ".2f")
    if accept is not None:
        parts.append((3, f"accept {accept}", "text"))
    parts.append((2, f"vs {state.reference.label}", "dim"))
    return parts


def verdict_text(state: LiveVerdictState, s: dict[str, Style], width: int = 10_000) -> Text:
    """The line, dropping the least important parts until it fits ``width`` (pure).

    Where the whole wording leaves no room for the tok/s figures behind it, the verdict is
    worded by its head alone: the figures say more than the advice after the colon.
    """
    parts = verdict_parts(state)
    kept = fit_parts(parts, width, len(SEP))
    if any(p[0] == 1 for p in parts) and not any(p[0] == 1 for p in kept):
        parts = verdict_parts(state, short=True)
    return parts_line(parts, s, width)


class VerdictLine(ModelPane):
    """One line: the live verdict against the reference, with the numbers behind it."""

    VERSION = "verdict_version"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "verdict--dim",
        "verdict--ok",
        "verdict--bad",
        "verdict--gpu",
        "verdict--load",
    }

    DEFAULT_CSS = """
    VerdictLine {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 1;
        background: $surface;
        color: $text;
        padding: 0 1;
    }
    VerdictLine > .verdict--dim { color: $text-muted; }
    VerdictLine > .verdict--ok { color: $background; background: $success; text-style: bold; }
    VerdictLine > .verdict--bad { color: $background; background: $error; text-style: bold; }
    VerdictLine > .verdict--gpu { color: $warning; text-style: bold; }
    VerdictLine > .verdict--load { color: $background; background: $accent; text-style: bold; }
    """

    def render_pane(self) -> RenderableType:
        """The line."""
        styles = {"text": self.component_styles()["normal"], **self.tone_styles()}
        return verdict_text(self.model.verdict, styles, self.content_size.width)
