"""An axis top that only grows within a session, so a graph never rescales while it is read."""

from __future__ import annotations

from dataclasses import dataclass

from specwatch.ui.renderables.text import nice_ceiling


@dataclass(slots=True)
class AxisHold:
    """The top of a graph's value axis, held between draws and across windows.

    A reading above the top raises it at once, to the next round figure (a bar above the axis
    would read as an error); a lower need never lowers it. An axis that shrank after a quiet
    spell made the same tok/s look different from one minute to the next (600 ↔ 800), and a
    new window span starting from its own data did the same on every ``w``.
    """

    top: float | None = None

    def update(self, needed: float, t: float) -> float:
        """The top to draw with at time ``t`` when the data asks for ``needed``."""
        if self.top is None or needed > self.top:
            self.top = nice_ceiling(needed)
        return self.top
