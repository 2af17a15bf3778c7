"""Modal screens fitted to their content: the help, a text modal (results, comparisons) and a
yes-or-no question."""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.console import RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widgets import Static

from specwatch.ui.help_text import SECTIONS, Rows, help_renderable

HELP_WIDTH = 100
"""The widest the help is drawn."""

TABLE_GAP = "   "
"""A run of spaces inside a line that marks it as a table row (aligned columns)."""
MARGIN = 1
"""Columns and rows left free around a modal, so the live view still shows at its edges."""
CHROME = 5
"""Columns a modal adds around its body: the border, the padding and room for a scrollbar (a
stable gutter would reserve a row for the horizontal one as well)."""


def is_table_row(line: str) -> bool:
    """A line with aligned columns (three spaces inside it): it scrolls sideways, never wraps."""
    return TABLE_GAP in line.strip()


def fitted_width(body: str, available: int) -> int:
    """The body's width in a modal with ``available`` columns for it.

    Table rows keep their full width (the modal scrolls sideways beyond the screen); other lines
    wrap at the screen's width, and need no more than their longest line.
    """
    lines = body.splitlines() or [""]
    table = max((cell_len(x) for x in lines if is_table_row(x)), default=0)
    prose = max((cell_len(x) for x in lines if not is_table_row(x)), default=0)
    return max(table, min(prose, available), 1)


def text_body(body: str) -> Table:
    """``body`` as one row per line: table rows unwrapped, other lines wrapped."""
    grid = Table.grid()
    grid.add_column()
    for line in body.splitlines() or [""]:
        grid.add_row(Text(line, no_wrap=is_table_row(line)))
    return grid


class ScrollModal(ModalScreen[None]):
    """A titled box fitted to its content in the middle of the screen; it scrolls both ways
    when the content is larger than the screen. A key from ``BINDINGS`` closes it."""

    DEFAULT_CSS = """
    ScrollModal { align: center middle; }
    ScrollModal > ScrollableContainer {
        width: auto;
        height: auto;
        background: $surface;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    ScrollModal > ScrollableContainer > Static { width: auto; height: auto; }
    """

    def __init__(self, title: str, content: RenderableType) -> None:
        super().__init__()
        self.title_text = title
        self._content = content
        self.box = ScrollableContainer()
        self.box.border_title = f"{title} (esc closes)"

    def compose(self) -> ComposeResult:
        """The body in a scroll view, titled with how to close it."""
        with self.box:
            yield Static(self._content)

    def body_width(self, available: int) -> int:
        """How wide the body is drawn when ``available`` columns are free for it."""
        measured = Measurement.get(self.app.console, self.app.console.options, self._content)
        return max(measured.minimum, min(measured.maximum, available))

    def on_mount(self) -> None:
        """Fit the box to the screen it opened on."""
        self.fit(self.app.size.width, self.app.size.height)

    def on_resize(self, event: Resize) -> None:
        """Fit the box again when the terminal changes size."""
        self.fit(event.size.width, event.size.height)

    def fit(self, width: int, height: int) -> None:
        """Size the box to its content, within the screen less a margin on each side."""
        room = max(1, width - 2 * MARGIN - CHROME)
        body = self.body_width(room)
        self.box.query_one(Static).styles.width = body
        self.box.styles.width = min(body, room) + CHROME
        self.box.styles.max_height = max(3, height - 2 * MARGIN)

    def action_close(self) -> None:
        """Close the modal."""
        self.dismiss(None)


class HelpScreen(ScrollModal):
    """Keys, the clock-event reason legend and the graph marks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "close", "Close"),
    ]

    DEFAULT_CSS = """
    HelpScreen > ScrollableContainer { border: round $primary; }
    """

    def __init__(self, sections: tuple[tuple[str, str, Rows], ...] = SECTIONS) -> None:
        super().__init__("specwatch help", help_renderable(sections))

    def body_width(self, available: int) -> int:
        """Up to 100 columns: a wider help table only makes its sentences long."""
        return super().body_width(min(available, HELP_WIDTH))


class TextModal(ScrollModal):
    """A titled block of text (benchmark results, comparisons, metric sources)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "close", "Close")]

    DEFAULT_CSS = """
    TextModal > ScrollableContainer { border: round $accent; }
    """

    def __init__(self, title: str, body: str) -> None:
        super().__init__(title, text_body(body))
        self.body = body

    def body_width(self, available: int) -> int:
        """Table rows at full width; the other lines up to ``available``."""
        return fitted_width(self.body, available)


class ConfirmModal(ModalScreen[bool]):
    """A question answered with y (yes) or n / esc (no)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]

    DEFAULT_CSS = """
    ConfirmModal { align: center middle; }
    ConfirmModal > Static {
        width: auto;
        max-width: 90%;
        height: auto;
        background: $surface;
        border: round $warning;
        padding: 0 1;
    }
    """

    def __init__(self, title: str, question: str) -> None:
        super().__init__()
        self.question = question
        self.title_text = title

    def compose(self) -> ComposeResult:
        """The question, and the keys that answer it."""
        body = Static(Text(f"{self.question}\n\ny: yes   n / esc: no"))
        body.border_title = self.title_text
        yield body

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)


__all__ = [
    "ConfirmModal",
    "HelpScreen",
    "ScrollModal",
    "TextModal",
    "fitted_width",
    "is_table_row",
]
