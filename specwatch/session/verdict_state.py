"""What the live verdict says, and what it is judged against: plain records the session emits
(:class:`~specwatch.session.events.VerdictChanged`), the recorder stores and the screen shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specwatch.core import gpu as rules

if TYPE_CHECKING:
    from specwatch.core.judge import Figures, Judgement
    from specwatch.core.outcomes import Outcome
    from specwatch.core.snapshot_records import Snapshot

SNAPSHOT_REASON_SHARE = 0.1
"""A snapshot's reason counts as active when it was set this share of the time on a busy GPU."""


@dataclass(frozen=True, slots=True)
class Reference:
    """The window the current one is judged against."""

    kind: str
    """``"steady"``, ``"marked"`` or ``"snapshot"``."""
    label: str
    """How the verdict line names it (``"steady after warmup"``, ``"marked"``, a file name)."""
    figures: Figures
    t: float | None = None
    """When the reference window ended (``None`` for a snapshot)."""


@dataclass(frozen=True, slots=True)
class LiveVerdictState:
    """What the verdict line shows."""

    phase: str
    """``"waiting"`` (no server yet, or readings too sparse to judge), ``"warmup"``,
    ``"reference"`` (collecting one), ``"idle"`` (no traffic to judge), ``"benchmark"`` (the
    session's own benchmark is the load), ``"profiling"`` (the session asked the server's
    profiler for steps) or ``"judged"``."""
    detail: str = ""
    """Progress or why nothing is judged (``"reference 12/30 s"``)."""
    reference: Reference | None = None
    current: Figures | None = None
    judgement: Judgement | None = None
    since: float | None = None
    """When the current outcome was first given (for "for 40 s")."""

    @property
    def outcome(self) -> Outcome | None:
        """The verdict, ``None`` while none is given."""
        return self.judgement.outcome if self.judgement is not None else None


WAITING = LiveVerdictState("waiting", "waiting for the server")
"""The state before any reading."""


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def snapshot_reference(snap: Snapshot, name: str) -> Reference:
    """A benchmark snapshot as the reference (``--reference FILE``).

    Per-run tok/s, the slowest busy GPU's mean SM clock over all runs (``compare``'s rule), that
    board's maximum, the busy GPUs' lowest mean memory clock and their DRAM activity (and DRAM
    traffic per token), and the reasons active on a busy GPU at least a tenth of the time.
    """
    from specwatch.core.judge import Figures
    from specwatch.core.launch_config import server_launch_config
    from specwatch.core.snapshot_figures import dram_per_token_of, straggler_clock

    clock, _ = straggler_clock(snap)
    busy = rules.busy_summaries(snap.overall_gpus)
    slow = min(
        (g for g in busy if g.sm_clock_mean_mhz is not None),
        key=lambda g: g.sm_clock_mean_mhz or 0.0,
        default=None,
    )
    top = slow.board_max_sm_clock_mhz if slow is not None else None
    active = frozenset(
        r
        for g in busy
        for r, share in g.reason_fractions.items()
        if r not in rules.IDLE_REASONS and share >= SNAPSHOT_REASON_SHARE
    )
    figures = Figures(
        tok_s=tuple(snap.run_tok_s),
        slowest_sm_clock_mhz=clock,
        board_max_sm_clock_mhz=float(top) if top else None,
        clock_reasons=active,
        accept_length=snap.accept_length,
        slowest_mem_clock_mhz=min(
            (g.mem_clock_mean_mhz for g in busy if g.mem_clock_mean_mhz is not None), default=None
        ),
        dram_active=_mean([g.dram_active_mean for g in busy if g.dram_active_mean is not None]),
        dram_per_token=dram_per_token_of(list(busy), snap.run_tok_s),
        launch=server_launch_config(snap.server),
    )
    return Reference("snapshot", name, figures)


__all__ = [
    "SNAPSHOT_REASON_SHARE",
    "WAITING",
    "LiveVerdictState",
    "Reference",
    "snapshot_reference",
]
