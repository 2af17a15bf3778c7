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


def judge_windows(reference: Figures, current: Figures) -> LiveJudgement:
    """The shared verdict for ``current`` against ``reference``."""
    j = judge(
        reference,
        current,
        reference_name="the reference",
        current_name="now",
    )
    return LiveJudgement(j.outcome, j.reason, j.change)


__all__ = ["LiveJudgement", "judge_windows"]
