"""A GPU's clock policy: whether its clocks follow boost (and so temperature) or are pinned.

Two benchmarks are only comparable when their GPUs ran under the same policy: a locked clock,
application clocks below the default or a power limit below the default all change what the
board can do, and an unlocked board's boost clock follows its temperature. The policy is read
from :class:`~specwatch.core.gpu.GpuStatic`; a reading the driver did not give counts as
unknown, never as "default".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuStatic

POWER_CAP_MARGIN = 0.02
"""An enforced power limit this far (relative) below the default counts as a cap."""

UNLOCKED_LINE = "boost follows temperature: runs on other days may differ"


@dataclass(frozen=True, slots=True)
class ClockPolicy:
    """What one GPU's clocks were allowed to do."""

    locked_sm_mhz: int | None = None
    locked_mem_mhz: int | None = None
    app_sm_mhz: int | None = None
    """Application SM clock, only when it differs from the default."""
    app_mem_mhz: int | None = None
    """Application memory clock, only when it differs from the default."""
    power_cap_w: float | None = None
    """Enforced power limit, only when below the default."""
    power_default_w: float | None = None
    persistence: bool | None = None

    @property
    def unlocked(self) -> bool:
        """Neither locked nor pinned by application clocks: boost follows temperature."""
        return self.locked_sm_mhz is None and self.app_sm_mhz is None

    @property
    def flag(self) -> str:
        """A short flag for a table cell: ``lock``, ``app``, ``cap`` or ``""`` (boost)."""
        if self.locked_sm_mhz is not None or self.locked_mem_mhz is not None:
            return "lock"
        if self.app_sm_mhz is not None or self.app_mem_mhz is not None:
            return "app"
        if self.power_cap_w is not None:
            return "cap"
        return ""

    def text(self) -> str:
        """One phrase: ``locked SM 1500 MHz, power cap 500/700 W``."""
        parts: list[str] = []
        if self.locked_sm_mhz is not None:
            parts.append(f"locked SM {self.locked_sm_mhz} MHz")
        if self.locked_mem_mhz is not None:
            parts.append(f"locked memory {self.locked_mem_mhz} MHz")
        if self.app_sm_mhz is not None:
            parts.append(f"application SM clock {self.app_sm_mhz} MHz")
        if self.app_mem_mhz is not None:
            parts.append(f"application memory clock {self.app_mem_mhz} MHz")
        if self.power_cap_w is not None:
            cap = f"power cap {self.power_cap_w:.0f}"
            parts.append(cap + (f"/{self.power_default_w:.0f} W" if self.power_default_w else " W"))
        if self.unlocked:
            parts.insert(0, "unlocked (boost)")
        if self.persistence is False:
            parts.append("persistence off")
        return ", ".join(parts)


def _differs(value: int | None, default: int | None) -> int | None:
    if value is None or default is None or value == default:
        return None
    return value


def policy_of(static: GpuStatic) -> ClockPolicy:
    """The clock policy of one GPU from its static facts."""
    limit, default = static.power_limit_w, static.power_default_limit_w
    capped = limit is not None and default and limit < default * (1 - POWER_CAP_MARGIN)
    return ClockPolicy(
        locked_sm_mhz=static.locked_sm_clock_mhz,
        locked_mem_mhz=static.locked_mem_clock_mhz,
        app_sm_mhz=_differs(static.app_sm_clock_mhz, static.default_app_sm_clock_mhz),
        app_mem_mhz=_differs(static.app_mem_clock_mhz, static.default_app_mem_clock_mhz),
        power_cap_w=limit if capped else None,
        power_default_w=default,
        persistence=static.persistence_mode,
    )


def policies_text(gpus: Iterable[GpuStatic]) -> str | None:
    """The policies of a set of GPUs in one phrase (``None`` without GPUs)."""
    texts: dict[str, list[int]] = {}
    for g in gpus:
        texts.setdefault(policy_of(g).text(), []).append(g.index)
    if not texts:
        return None
    if len(texts) == 1:
        return next(iter(texts))
    return "; ".join(f"GPU {','.join(map(str, idx))}: {t}" for t, idx in texts.items())


def any_unlocked(gpus: Iterable[GpuStatic]) -> bool:
    """Whether any GPU's boost clock follows its temperature."""
    return any(policy_of(g).unlocked for g in gpus)


def policy_difference(a: Iterable[GpuStatic], b: Iterable[GpuStatic]) -> tuple[str, str] | None:
    """(A's policy, B's policy) when two sets of GPUs ran under different clock policies."""
    ta, tb = policies_text(a), policies_text(b)
    if ta is None or tb is None or ta == tb:
        return None
    return ta, tb


__all__ = [
    "POWER_CAP_MARGIN",
    "UNLOCKED_LINE",
    "ClockPolicy",
    "any_unlocked",
    "policies_text",
    "policy_difference",
    "policy_of",
]
