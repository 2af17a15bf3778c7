"""Whether the GPUs reached a steady state: the gate between warmup and the measured runs.

A GPU that has just started working heats up, and its boost clock follows the temperature down
for a minute or more; runs measured in that time are faster than the same code measured an hour
later. The GPUs count as steady when, over the last :data:`WINDOW_S` seconds, the least-squares
slope of every GPU's SM clock, memory clock and temperature is under its threshold:

=================  ==========================  =================================
reading            threshold                   over the default 10 s window
=================  ==========================  =================================
SM clock           :data:`SM_SLOPE_MHZ_S`      20 MHz (about 1% of a boost clock)
memory clock       :data:`MEM_SLOPE_MHZ_S`     20 MHz
temperature        :data:`TEMP_SLOPE_C_S`      1 °C (6 °C per minute)
=================  ==========================  =================================

A window counts only when the readings cover at least :data:`MIN_COVER` of it with at least
:data:`MIN_POINTS` ticks; readings a board does not give are left out, never guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from specwatch.core.gpu import GpuTick

WINDOW_S = 10.0
SM_SLOPE_MHZ_S = 2.0
MEM_SLOPE_MHZ_S = 2.0
TEMP_SLOPE_C_S = 0.1
MIN_COVER = 0.8
MIN_POINTS = 3


@dataclass(frozen=True, slots=True)
class Slopes:
    """The steepest slope over the GPUs of each reading in one window (absolute values)."""

    sm_mhz_s: float | None
    mem_mhz_s: float | None
    temp_c_s: float | None
    covered_s: float = 0.0
    """Seconds of the window the readings cover."""

    @property
    def under(self) -> bool:
        """Every reading that was given is under its threshold."""
        return all(
            v is None or v <= limit
            for v, limit in (
                (self.sm_mhz_s, SM_SLOPE_MHZ_S),
                (self.mem_mhz_s, MEM_SLOPE_MHZ_S),
                (self.temp_c_s, TEMP_SLOPE_C_S),
            )
        )

    def text(self) -> str:
        """``SM -3.1 MHz/s, memory 0.0 MHz/s, temperature 0.40 °C/s``-style phrase."""

        def show(v: float | None, fmt: str) -> str:
            return "n/a" if v is None else format(v, fmt)

        return (
            f"SM {show(self.sm_mhz_s, '.1f')} MHz/s, memory {show(self.mem_mhz_s, '.1f')} MHz/s, "
            f"temperature {show(self.temp_c_s, '.2f')} °C/s"
        )


@dataclass(frozen=True, slots=True)
class Steadiness:
    """What a snapshot records about the GPUs' state before and during the measured runs."""

    reached: bool | None
    """Steady before the measured runs; ``None`` without GPU readings to tell."""
    waited: bool = False
    """``bench --steady`` waited for it."""
    window_s: float = WINDOW_S
    time_to_steady_s: float | None = None
    """Seconds from the benchmark's start to the first steady window."""
    slopes: Slopes | None = None
    """The window just before the measured runs."""
    during_runs: Slopes | None = None
    """The slopes over the measured runs (a drift there means they were not steady before)."""
    drift_sm_clock_mhz: float | None = None
    """Mean SM clock of the last measured run minus the first's (mean over GPUs)."""
    drift_temp_c: float | None = None
    """Highest temperature of the last measured run minus the first's (mean over GPUs)."""


def _slope(points: Sequence[tuple[float, float]]) -> float | None:
    n = len(points)
    if n < MIN_POINTS:
        return None
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den <= 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / den


def is_steady(slopes: Slopes | None, window_s: float = WINDOW_S) -> bool | None:
    """True: steady over a covered window; False: some slope over its threshold (however
    short the readings); ``None``: too few readings, or under the thresholds in less than the
    window."""
    if slopes is None:
        return None
    if not slopes.under:
        return False
    return True if slopes.covered_s >= MIN_COVER * window_s else None


def window_slopes(
    ticks: Sequence[GpuTick], end: float, window_s: float = WINDOW_S
) -> Slopes | None:
    """The slopes over ``[end - window_s, end]`` (``None`` under :data:`MIN_POINTS` ticks)."""
    inside = [k for k in ticks if end - window_s <= k.t <= end]
    if len(inside) < MIN_POINTS or inside[-1].t <= inside[0].t:
        return None
    series: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for k in inside:
        for s in k.samples:
            if s.lost:
                continue
            for name, value in (
                ("sm", s.sm_clock_mhz),
                ("mem", s.mem_clock_mhz),
                ("temp", s.temp_c),
            ):
                if value is not None:
                    series.setdefault((s.index, name), []).append((k.t, float(value)))
    steepest: dict[str, float] = {}
    for (_, name), points in series.items():
        slope = _slope(points)
        if slope is not None:
            steepest[name] = max(steepest.get(name, 0.0), abs(slope))
    if not steepest:
        return None
    covered = inside[-1].t - inside[0].t
    return Slopes(steepest.get("sm"), steepest.get("mem"), steepest.get("temp"), covered)


def first_steady(
    ticks: Sequence[GpuTick], start: float, window_s: float = WINDOW_S
) -> float | None:
    """The first tick time at which the window ending there is steady (``None``: never)."""
    for k in ticks:
        if k.t - start < MIN_COVER * window_s:
            continue
        if is_steady(window_slopes(ticks, k.t, window_s), window_s):
            return k.t
    return None


def judged_with_runs(s: Steadiness, during: Slopes | None) -> Steadiness:
    """``s`` with the runs' slopes; unknown before the runs becomes "not steady" when the GPUs
    drifted during them."""
    reached = s.reached
    if reached is None and during is not None and not during.under:
        reached = False
    return dataclasses.replace(s, reached=reached, during_runs=during)


def steady_line(s: Steadiness, limit_s: float) -> str:
    """The one line ``bench`` prints after warmup."""
    if s.reached is None:
        if s.slopes is None:
            return "GPU steady state: unknown (too few GPU readings during warmup)"
        return (
            f"GPU steady state: unknown (warmup covered {s.slopes.covered_s:.1f} s of the "
            f"{s.window_s:.0f} s window; --steady waits for it)"
        )
    shape = s.slopes.text() if s.slopes is not None else ""
    if s.reached:
        when = f" after {s.time_to_steady_s:.0f} s" if s.time_to_steady_s is not None else ""
        return f"GPU steady state: reached{when} ({shape})"
    if s.waited:
        return f"GPU steady state: NOT reached within {limit_s:.0f} s; measuring anyway ({shape})"
    return f"GPU steady state: NOT reached ({shape}); runs may drift, try --steady"


def steady_note(name: str, s: Steadiness | None) -> str | None:
    """A compare note when snapshot ``name`` was measured before its GPUs were steady."""
    if s is None or s.reached is not False:
        return None
    drift = ""
    if s.drift_sm_clock_mhz is not None:
        drift = f"; SM clock drifted {s.drift_sm_clock_mhz:+.0f} MHz over its runs"
    slopes = s.slopes if s.slopes is not None and not s.slopes.under else s.during_runs
    shape = f" ({slopes.text()})" if slopes is not None else ""
    return f"{name} was measured before the GPUs were steady{shape}{drift}"


__all__ = [
    "MEM_SLOPE_MHZ_S",
    "MIN_COVER",
    "MIN_POINTS",
    "SM_SLOPE_MHZ_S",
    "TEMP_SLOPE_C_S",
    "WINDOW_S",
    "Slopes",
    "Steadiness",
    "first_steady",
    "is_steady",
    "judged_with_runs",
    "steady_line",
    "steady_note",
    "window_slopes",
]
