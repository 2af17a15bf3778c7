"""Clock-event (throttle) reason bits and their short names."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reason:
    """One clock-event reason bit."""

    bit: int
    name: str
    short: str
    meaning: str
    harmful: bool
    """Whether the reason lowers clocks under load (idle and display settings do not)."""


IDLE_BIT = 0x001
"""``GpuIdle``: the clocks are low because the GPU has no work."""

REASONS: tuple[Reason, ...] = (
    Reason(IDLE_BIT, "GpuIdle", "idle", "idle: harmless", False),
    Reason(0x002, "ApplicationsClocksSetting", "appclk", "capped by application clocks", True),
    Reason(0x004, "SwPowerCap", "pwrcap", "at the power limit: clocks reduced", True),
    Reason(0x008, "HwSlowdown", "hwslow", "hardware slowdown (power brake or thermal)", True),
    Reason(0x010, "SyncBoost", "sync", "held down to match its sync-boost group", True),
    Reason(0x020, "SwThermalSlowdown", "thermal", "driver thermal slowdown: too hot", True),
    Reason(0x040, "HwThermalSlowdown", "hwtherm", "hardware thermal slowdown: far too hot", True),
    Reason(0x080, "HwPowerBrakeSlowdown", "brake", "external power brake", True),
    Reason(0x100, "DisplayClockSetting", "display", "display clock setting", False),
    Reason(0x200, "BoardLimit", "board", "board limit", True),
    Reason(0x400, "Reliability", "reliab", "reliability limit", True),
)

BY_BIT: dict[int, Reason] = {r.bit: r for r in REASONS}


def decode(mask: int | None) -> tuple[Reason, ...]:
    """Return the reasons set in ``mask`` (unknown bits are returned as ``bit0x...``)."""
    if not mask:
        return ()
    out: list[Reason] = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            out.append(BY_BIT.get(bit) or Reason(bit, f"bit{bit:#x}", f"{bit:#x}", "unknown", True))
        bit <<= 1
    return tuple(out)


def short_names(mask: int | None) -> str:
    """Short words for the active reasons, e.g. ``"pwrcap thermal"``; ``""`` when none."""
    return " ".join(r.short for r in decode(mask))


def harmful(mask: int | None) -> bool:
    """Whether any reason that lowers clocks under load is set."""
    return any(r.harmful for r in decode(mask))
