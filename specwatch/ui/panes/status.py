"""The status line: which server, its speculative setup, the connection, and what we cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import ModelPane

if TYPE_CHECKING:
    from specwatch.core.server import SpecConfig


def spec_summary(spec: SpecConfig) -> str:
    """A short description of the speculative setup, e.g. ``"EAGLE3 steps 3 topk 1 draft 4"``."""
    if spec.enabled is False:
        return "no speculation"
    parts = [spec.algorithm or ("speculative" if spec.enabled else "spec unknown")]
    if spec.num_steps is not None:
        parts.append(f"steps {spec.num_steps}")
    if spec.topk is not None:
        # SGLang's speculative_eagle_topk: above 1 the drafts are a tree, not a chain
        parts.append(f"topk {spec.topk}" + (" (tree)" if spec.topk > 1 else ""))
    if spec.num_draft_tokens is not None:
        parts.append(f"draft {spec.num_draft_tokens}")
    return " ".join(parts)


def status_parts(model: MonitorModel) -> list[tuple[int, str, str]]:
    """``(priority, text, tone)`` for each part, in display order; lower priority is kept longer."""
    parts: list[tuple[int, str, str]] = []
    if model.replay_label:
        parts.append((0, f" {model.replay_label} ", "paused"))
    if model.paused:
        parts.append((0, " PAUSED ", "paused"))
    parts.append((0, model.connection, "ok" if model.connection_ok else "bad"))
    info = model.server
    if info is not None:
        server = f"{info.dialect.value} {info.version or ''}".strip()
        if model.commit:  # the code behind the version (a source checkout's pull shows here)
            server += f" @{model.commit}"
        parts.append((1, server, "text"))
        parts.append((2, spec_summary(info.spec), "text"))
        if info.model:
            name = info.model.rsplit("/", 1)[-1]
            parts.append((4, f"{name} (router)" if info.routed else name, "text"))
    if model.show_overhead:
        cpu = model.monitor_cpu_pct
        # The process's CPU includes a running benchmark's streams (its client, not the
        # monitor's cost): say so rather than let the monitor look ten times dearer.
        with_bench = " with bench" if model.bench is not None and model.bench.active else ""
        parts.append((2, "cpu " + ("–" if cpu is None else f"{cpu:.1f}%{with_bench}"), "dim"))
        inv = model.inventory
        if model.nvml_ms is not None and inv is not None and inv.available:
            # What a GPU reading costs, named after where it comes from.
            source = inv.origin.source if inv.origin is not None else "nvml"
            parts.append((3, f"{source} {model.nvml_ms:.1f}ms", "dim"))
    parts.append((5, f"every {model.interval_s:g}s", "dim"))
    late = late_read_s(model)
    if late is not None:
        # a replay plays the recording's own windows: the recorder read them late, not us
        said = "recorded scrapes" if model.replay_label else "scrapes"
        parts.append((1, f"{said} up to {late:.0f}s apart", "bad"))
    return parts


LATE_SPAN_S = 60.0
"""How long a late read stays said."""


def late_read_s(model: MonitorModel) -> float | None:
    """The longest ``/metrics`` window of the last :data:`LATE_SPAN_S` when one was a late
    read (:meth:`MonitorModel.late_read`); ``None`` otherwise.

    A monitor starved of CPU reads late and runs in bursts, so the window in hand at a redraw
    is often a short one and the long one before it has to be remembered. The graph then draws
    rates the monitor read late, not gaps the server had (docs/live.md).
    """
    newest = model.window
    if newest is None:
        return None
    worst = None
    for w in reversed(model.windows):
        if w.t < newest.t - LATE_SPAN_S:
            break
        if model.late_read(w) and (worst is None or w.dt > worst):
            worst = w.dt
    return worst


SEP = " · "


def status_text(model: MonitorModel, s: dict[str, Style], width: int = 10_000) -> Text:
    """The status line, dropping the least important parts until it fits ``width`` (pure).

    ``s`` maps ``text``/``dim``/``ok``/``bad``/``paused`` to styles.
    """
    return parts_line(status_parts(model), s, width)


def fit_parts(
    parts: list[tuple[int, str, str]], width: int, sep: int = 0
) -> list[tuple[int, str, str]]:
    """``(priority, text, tone)`` parts, the least important (highest priority number, then the
    last) dropped until their texts and a separator of ``sep`` between each fit ``width``;
    priority 0 stays."""
    parts = list(parts)
    while len(parts) > 1 and sum(len(p[1]) for p in parts) + sep * (len(parts) - 1) > width:
        worst = max(range(len(parts)), key=lambda i: (parts[i][0], i))
        if parts[worst][0] == 0:
            break
        parts.pop(worst)
    return parts


def parts_line(parts: list[tuple[int, str, str]], s: dict[str, Style], width: int) -> Text:
    """``(priority, text, tone)`` parts joined by :data:`SEP`, the least important (highest
    priority number, then the last) dropped until the line fits ``width``; priority 0 stays.
    A tone ``s`` lacks is drawn as ``text``."""
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    for i, (_, text, tone) in enumerate(fit_parts(parts, width, len(SEP))):
        if i:
            out.append(SEP, s["dim"])
        out.append(text, s.get(tone, s["text"]))
    return out


class StatusLine(ModelPane):
    """One line at the top: server, speculative config, connection state, monitor overhead."""

    VERSION = "status_version"
    _drawn_words = ""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "status--dim",
        "status--ok",
        "status--bad",
        "status--paused",
    }

    DEFAULT_CSS = """
    StatusLine {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 1;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    StatusLine > .status--dim { color: $text-muted; }
    StatusLine > .status--ok { color: $success; }
    StatusLine > .status--bad { color: $warning; text-style: bold; }
    StatusLine > .status--paused { color: $background; background: $warning; text-style: bold; }
    """

    def render_pane(self) -> RenderableType:
        """The line."""
        c = self.component_styles(*self.COMPONENT_CLASSES)
        styles = {
            "text": c["normal"],
            "dim": c["status--dim"],
            "ok": c["status--ok"],
            "bad": c["status--bad"],
            "paused": c["status--paused"],
        }
        return status_text(self.model, styles, self.content_size.width)

    def sync(self) -> bool:
        """Refresh only when the line's words change (most ticks leave them as they are)."""
        if not self.display or not self.is_mounted:
            return False
        version = self.model.status_version
        if version == self._drawn_version:
            return False
        self._drawn_version = version
        words = "|".join(p[1] for p in status_parts(self.model))
        if words == self._drawn_words:
            return False
        self._drawn_words = words
        self._strips = None
        self.refresh()
        return True

    def force_sync(self) -> None:
        """Redraw at the next opportunity."""
        self._drawn_words = ""
        super().force_sync()
