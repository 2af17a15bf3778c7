"""A reading averaged over a span of metrics windows, held with its age when the span has none.

A per-window figure from a server's counters jumps with what finished in that window: SGLang's
spec counters move when a request ends, so a one-second window shows ``tok/step 2.55`` in one
frame and nothing in the next (34 switches in 140 s of the drift demo), and a step time that
moves 8% is lost in one that jumps 12.8 ↔ 14.6 ms. :class:`SteadyMean` answers with the mean
over the last :data:`STEADY_S` seconds of windows that had the reading, weighted by each
window's length; with none in that span, the last such mean, with its age, for up to
:data:`STEADY_HOLD_S`. :class:`HeldLatest` holds the newest value of each reading as long (the
monitor's token rate and acceptance, the load pane's percentile buckets).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

STEADY_S = 10.0
"""Seconds of windows averaged into one steady figure."""
STEADY_HOLD_S = 60.0
"""A steady figure with no newer reading is held, with its age, this long."""


@dataclass(frozen=True, slots=True)
class Steady:
    """A steady figure: ``value`` ``None`` when unknown; ``age_s`` set when it is held."""

    value: float | None
    age_s: float | None = None


class SteadyMean:
    """The dt-weighted mean of one reading over the last :data:`STEADY_S` seconds of windows."""

    def __init__(self, span_s: float = STEADY_S, hold_s: float = STEADY_HOLD_S) -> None:
        self.span_s = span_s
        self.hold_s = hold_s
        self._points: deque[tuple[float, float, float]] = deque()

    def add(self, t: float, dt: float, value: float | None) -> None:
        """One window ending at ``t``, ``dt`` seconds long, and its reading (``None``: none)."""
        if value is not None and dt > 0:
            self._points.append((t, dt, value))
        while self._points and self._points[0][0] <= self._points[-1][0] - self.span_s:
            self._points.popleft()

    def clear(self) -> None:
        """Forget every reading (the server restarted)."""
        self._points.clear()

    def at(self, now: float) -> Steady:
        """The steady figure at ``now``: the span's mean, else the last one held with its age."""
        if not self._points:
            return Steady(None)
        newest = self._points[-1][0]
        age = now - newest
        if age > self.hold_s:
            return Steady(None)
        weight = sum(dt for _, dt, _ in self._points)
        value = sum(dt * v for _, dt, v in self._points) / weight
        return Steady(value, None if age < self.span_s else age)


__all__ = ["STEADY_HOLD_S", "STEADY_S", "Steady", "SteadyMean"]


class HeldLatest(Generic[T]):
    """The newest value seen per key, shown for :data:`STEADY_HOLD_S` after it was seen.

    A histogram's percentile buckets (TTFT, TPOT, e2e) exist only in windows in which a request
    started or ended, and llama.cpp counts tokens only when a request ends: with long answers
    most one-second windows have none, and a row that appears and vanishes each second cannot be
    read. The last value holds, with its age.
    """

    def __init__(self, hold_s: float = STEADY_HOLD_S) -> None:
        self.hold_s = hold_s
        self._latest: dict[str, tuple[float, T]] = {}

    def add(self, t: float, values: Mapping[str, T]) -> None:
        """The values one window at ``t`` had (keys it lacks keep their older value)."""
        for key, value in values.items():
            self._latest[key] = (t, value)

    def clear(self) -> None:
        """Forget every value (the server restarted)."""
        self._latest.clear()

    def seen(self, now: float, key: str) -> tuple[float, T] | None:
        """``(when it was seen, value)`` of ``key``, or ``None`` when none is young enough."""
        found = self._latest.get(key)
        if found is None or now - found[0] > self.hold_s:
            return None
        return found

    def at(self, now: float, key: str) -> tuple[T, float] | None:
        """``(value, age in seconds)`` of ``key``, or ``None`` when none is young enough."""
        found = self.seen(now, key)
        return None if found is None else (found[1], max(0.0, now - found[0]))
