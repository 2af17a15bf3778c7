"""Modal screens: help (keys and the clock-event legend), and a text result modal."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specwatch.core.reasons import REASONS

KEYS: tuple[tuple[str, str], ...] = (
    ("p", "pause / resume drawing (sampling continues)"),
    ("t", "next theme"),
    ("i", "next sampling interval (GPU and /metrics)"),
    ("w", "next graph window: 1m, 5m, 15m, 1h"),
    ("b", "benchmark with the current settings (again: stop it)"),
    ("r", "mark the reference: the live verdict judges against the last 30 s from now on"),
    ("s", "save an SVG screenshot (~/.local/share/specwatch/screenshots, or --screenshot-dir)"),
    ("? / F1", "this help"),
    ("ctrl+p", "command palette (compare snapshots, themes…)"),
    ("q", "quit"),
)

MARKS: tuple[tuple[str, str], ...] = (
    ("╌ loading #N", "server not ready yet: attempt N, seconds waited (short: L#N, L)"),
    ("· warmup", "from ready until two windows agree within 15% (short: W)"),
    ("━ B1…", "benchmark runs started with b"),
    ("R / ✕", "server restarted (counters went back) / connection lost"),
    ("◂", "the straggler: lowest SM clock (then hottest) sets a TP step's pace"),
    ("5x16!", "PCIe link below its maximum under load"),
    ("memclk / HBM", "memory clock, MHz / HBM (memory) temperature, °C"),
    ("P", "performance state: P0 is full speed, P8 idle"),
    ("clk% / hot°C", "mean SM clock as % of max / hottest GPU, on the token-rate graph"),
    ("life", "since the server started (the other figures are the last window)"),
    ("effective", "verify-step latency / accept length: ms per generated token"),
    ("plain", "ms per token without speculation (--baseline or --baseline-itl)"),
    ("break-even", "accept length at which speculation starts to pay"),
    ("cpu", "in the status line: specwatch's own CPU use, not the server's"),
    ("verdict", "top line: now vs the reference, in compare's words (r marks a new reference)"),
)


def help_renderable() -> Table:
    """The help text as a Rich table: keys, reason words, graph marks."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column()
    grid.add_row(Text("Keys", style="bold underline"), "")
    for key, what in KEYS:
        grid.add_row(key, what)
    grid.add_row("", "")
    grid.add_row(Text("Clock events", style="bold underline"), "why the SM clock is below max")
    for r in REASONS:
        harmless = "" if r.harmful or "harmless" in r.meaning else " (harmless)"
        grid.add_row(r.short, r.meaning + harmless)
    grid.add_row("", "")
    grid.add_row(Text("Graph marks", style="bold underline"), "")
    for mark, what in MARKS:
        grid.add_row(mark, what)
    return grid


class ScrollModal(ModalScreen[None]):
    """A titled, scrollable box in the middle of the screen; a key from ``BINDINGS`` closes it."""

    DEFAULT_CSS = """
    ScrollModal { align: center middle; }
    ScrollModal > VerticalScroll {
        width: 90%;
        height: 90%;
        background: $surface;
        padding: 0 1;
    }
    """

    def __init__(self, title: str, content: RenderableType) -> None:
        super().__init__()
        self.title_text = title
        self._content = content

    def compose(self) -> ComposeResult:
        """The body in a scroll view, titled with how to close it."""
        with VerticalScroll() as scroll:
            scroll.border_title = f"{self.title_text} (esc closes)"
            yield Static(self._content)

    def action_close(self) -> None:
        """Close the modal."""
        self.dismiss(None)


class HelpScreen(ScrollModal):
    """Keys, the clock-event reason legend and the graph marks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "close", "Close"),
    ]

    DEFAULT_CSS = """
    HelpScreen > VerticalScroll {
        max-width: 92;
        border: round $primary;
    }
    """

    def __init__(self) -> None:
        super().__init__("specwatch help", help_renderable())


class TextModal(ScrollModal):
    """A titled, scrollable block of text (benchmark results, comparisons)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "close", "Close")]

    DEFAULT_CSS = """
    TextModal > VerticalScroll {
        max-width: 100;
        border: round $accent;
    }
    """

    def __init__(self, title: str, body: str) -> None:
        super().__init__(title, Text(body))
        self.body = body
