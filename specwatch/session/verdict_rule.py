"""The seam between the live verdict and the shared verdict rule (:mod:`specwatch.core.judge`).

The live verdict measures :class:`specwatch.core.judge.Figures` for each side of a comparison (a
reference window or the current one); :func:`judge_windows` asks
:func:`specwatch.core.judge.judge` — the rule ``compare`` uses — so the live line and
``compare`` give the same outcomes ("load changed", "acceptance changed" included) in the same
words.
"""

from __future__ import annotations

from dataclasses import dataclass

from specwatch.core.judge import Figures, judge
from specwatch.core.outcomes import Outcome


@dataclass(frozen=True, slots=True)
class LiveJudgement:
    """A verdict, the sentence behind it and the relative tok/s change."""

    outcome: Outcome
    reason: str
    change: float | None
    noise: float | None = None
    """Half the width of the 95% interval of the relative change (``0.09`` for ±9%)."""
    term: str = "SM clock"
    """The clock whose change carried a GPU-state verdict (``"memory clock"`` when a
    memory-bound decode followed the memory clock with the SM clock steady)."""


def judge_windows(reference: Figures, current: Figures) -> LiveJudgement:
    """The shared verdict for ``current`` against ``reference``."""
    j = judge(
        reference,
        current,
        reference_name="the reference",
        current_name="now",
    )
    noise = None
    if j.change_low is not None and j.change_high is not None:
        noise = (j.change_high - j.change_low) / 2.0
    return LiveJudgement(j.outcome, j.reason, j.change, noise, j.term)


__all__ = ["LiveJudgement", "judge_windows"]
