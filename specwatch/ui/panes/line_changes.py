"""Which of a pane's lines differ between two versions (Textual repaints and writes each dirty
line, so only changed lines are marked)."""

from __future__ import annotations

from textual.strip import Strip

_BLANK = Strip([])


def changed_lines(old: list[Strip], new: list[Strip]) -> list[int]:
    """The indices of the lines whose segments differ, a line missing on one side included."""
    n_old, n_new = len(old), len(new)
    return [
        y
        for y in range(max(n_old, n_new))
        if (old[y] if y < n_old else _BLANK) != (new[y] if y < n_new else _BLANK)
    ]


__all__ = ["changed_lines"]
