"""An axis top that grows at once and shrinks slowly, so a graph holds still while it is read."""

from __future__ import annotations

from dataclasses import dataclass

from specwatch.ui.renderables.text import nice_ceiling

SHRINK_AFTER_S = 30.0
"""The data must have asked for a lower top for this long before the axis shrinks."""
SHRINK_STEP = 0.8
"""Each shrink lowers the top to at most this share of the current top (then rounds)."""


@dataclass(slots=True)
class AxisHold:
    """The top of a graph's value axis, held between draws.

    A reading above the top raises it at once (a bar above the axis would read as an error); a
    lower need lowers it one step at a time, :data:`SHRINK_AFTER_S` apart, so one quiet window
    does not rescale the whole graph (the llama.cpp demo jumped 800 → 600 → 1000 → 1500).
    """

    top: float | None = None
    since: float = 0.0
    """When the top last changed (or the need last reached it)."""

    def update(self, needed: float, t: float) -> float:
        """The top to draw with at time ``t`` when the data asks for ``needed``."""
        if self.top is None or needed >= self.top:
            if self.top is None or needed > self.top:
                self.top = nice_ceiling(needed)
            self.since = t
            return self.top
        if t - self.since >= SHRINK_AFTER_S:
            self.top = max(nice_ceiling(needed), nice_ceiling(self.top * SHRINK_STEP))
            self.since = t
        return self.top

    def reset(self) -> None:
        """Forget the top (a new window span starts from its own data)."""
        self.top = None
