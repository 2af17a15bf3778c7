"""How often a dcgm-exporter collects, inferred from its answers, and what happened in between.

The exporter does not publish its collection interval (30 s by default). A
:class:`CollectionTracker` watches when the values of one exporter change between polls: the
median gap between changes is its interval, and an interval coarser than the view is worth a
warning. The violation counters are cumulative, so the share of each gap a GPU spent under a
throttle is known even when the throttle came and went between two collections.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specwatch.sources.dcgm.fields import BY_NAME, VIOLATION_BITS
from specwatch.sources.dcgm.parse import DcgmGpu, signature

COARSE_FACTOR = 1.5
"""A collection interval this many view intervals or more is warned about."""
_GAPS_KEPT = 8


@dataclass
class CollectionTracker:
    """One exporter's value changes: its collection interval and violation shares per gap."""

    last_sig: int | None = None
    last_change_t: float | None = None
    changes_seen: int = 0
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=_GAPS_KEPT))
    counters: dict[str, dict[str, float]] = field(default_factory=dict)
    """The violation counters at the last change, by GPU key."""
    shares: dict[str, dict[str, float]] = field(default_factory=dict)
    """Share of the last gap under each violation (short name), by GPU key."""

    def observe(self, gpus: Sequence[DcgmGpu], t: float) -> None:
        """Take one answer's GPUs, read at ``t``; nothing happens when no value changed."""
        sig = signature(gpus)
        if sig == self.last_sig:
            return
        if self.last_change_t is not None:
            gap = t - self.last_change_t
            # The first change only ends a gap that began before the first poll.
            if self.changes_seen >= 1 and gap > 0:
                self.gaps.append(gap)
            self.changes_seen += 1
            if gap > 0:
                self.shares = {
                    g.key: violation_shares(self.counters.get(g.key, {}), g, gap) for g in gpus
                }
        self.last_sig = sig
        self.last_change_t = t
        self.counters = {
            g.key: {n: v for n, v in g.values.items() if n in VIOLATION_BITS} for g in gpus
        }

    def interval(self) -> float | None:
        """The inferred collection interval (``None`` until two gaps were seen)."""
        return statistics.median(self.gaps) if len(self.gaps) >= 2 else None

    def coarse_note(self, node: str, view_s: float, now: float) -> str | None:
        """Why ``node`` looks coarser than a ``view_s`` view, or ``None``."""
        interval = self.interval()
        if interval is not None and interval >= COARSE_FACTOR * view_s:
            return f"{node} updates about every {interval:.3g} s"
        if interval is None and self.last_change_t is not None:
            still = now - self.last_change_t
            if still >= max(2 * view_s, COARSE_FACTOR * view_s) and self.changes_seen < 3:
                return f"{node} unchanged for {still:.3g} s"
        return None


def coarse_warning(notes: Sequence[str], view_s: float) -> str | None:
    """The warning for the exporters in ``notes`` (``None`` when there are none)."""
    if not notes:
        return None
    return (
        f"dcgm-exporter: {'; '.join(notes)}, coarser than the {view_s:g} s view (throttles "
        "between collections show through the violation counters); run the exporter with "
        "-c 1000 (DCGM_EXPORTER_INTERVAL) for 1 s readings"
    )


def violation_shares(before: Mapping[str, float], gpu: DcgmGpu, gap_s: float) -> dict[str, float]:
    """Share of ``gap_s`` each violation counter of ``gpu`` grew by since ``before``."""
    out: dict[str, float] = {}
    for name in VIOLATION_BITS:
        now = gpu.values.get(name)
        was = before.get(name)
        if now is None or was is None:
            continue
        grown_s = max(0.0, now - was) * BY_NAME[name].scale * 1e-9
        short = name.removeprefix("DCGM_FI_DEV_").removesuffix("_VIOLATION").lower()
        out[short] = min(1.0, grown_s / gap_s)
    return out


__all__ = ["COARSE_FACTOR", "CollectionTracker", "coarse_warning", "violation_shares"]
