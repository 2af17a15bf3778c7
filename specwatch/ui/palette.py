"""Textual's own palette commands, less those specwatch replaces: each command listed once."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import SystemCommand

TEXTUAL_COMMANDS_LEFT_OUT = (
    "Screenshot",
    "Theme",
    "Change theme",
    "Keys",
    "Quit",
    "Maximize",
    "Minimize",
)
"""Textual's screenshot (specwatch's says where it goes), its theme picker (twenty built-in
themes mixed with specwatch's; the t key and "Next theme" cycle specwatch's), its key panel
(specwatch's Help explains every key and word), its Quit beside specwatch's, and maximising
the focused widget (no pane takes focus)."""


def textual_commands(commands: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
    """Textual's own palette commands less those specwatch replaces."""
    return (c for c in commands if c.title not in TEXTUAL_COMMANDS_LEFT_OUT)


__all__ = ["TEXTUAL_COMMANDS_LEFT_OUT", "textual_commands"]
