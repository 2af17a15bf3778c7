"""The seam between the live verdict and the shared verdict rule (:mod:`specwatch.core.judge`).

The live verdict measures :class:`WindowFigures` (one side of a comparison: a reference window
or the current one); :func:`judge_windows` converts both sides to
:class:`specwatch.core.judge.Figures` and asks :func:`specwatch.core.judge.judge` — the rule
``compare`` uses — so the live line and ``compare`` give the same outcomes ("load changed",
"acceptance changed" included) in the same words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from specwatch.core.judge import Figures, judge
from specwatch.core.outcomes import Outcome
from specwatch.core.stats import mean


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """What one side of a live comparison measured; ``None`` where unknown.

    The fields are those of :class:`specwatch.core.judge.Figures`, plus two derived figures the
    verdict line shows.
    """

    tok_s: tuple[float, ...]
    """tok/s, one value per metrics interval (or per benchmark run, for a snapshot)."""
    slowest_sm_clock_mhz: float | None = None
    board_max_sm_clock_mhz: float | None = None
    clock_reasons: frozenset[str] = frozenset()
    """Clock-event reasons active on a busy GPU in the window (idle excluded)."""
    running_requests: float | None = None
    prompt_tok_s: float | None = None
    accept_length: float | None = None

    @property
    def mean_tok_s(self) -> float | None:
        """Mean tok/s, ``None`` with no samples."""
        return mean(self.tok_s) if self.tok_s else None

    @property
    def clock_deficit(self) -> float | None:
        """``clock / max − 1`` of the slowest GPU (``−0.07`` for 7% below its maximum)."""
        clock, top = self.slowest_sm_clock_mhz, self.board_max_sm_clock_mhz
        if clock is None or not top:
            return None
        return clock / top - 1.0

    def to_figures(self) -> Figures:
        """The same figures as :func:`specwatch.core.judge.judge` takes them."""
        return Figures(**asdict(self))


@dataclass(frozen=True, slots=True)
class LiveJudgement:
    """A verdict, the sentence behind it and the relative tok/s change."""

    outcome: Outcome
    reason: str
    change: float | None
    noise: float | None = None
    """Half the width of the 95% interval of the relative change (``0.09`` for ±9%)."""


def judge_windows(reference: WindowFigures, current: WindowFigures) -> LiveJudgement:
    """The shared verdict for ``current`` against ``reference``."""
    j = judge(
        reference.to_figures(),
        current.to_figures(),
        reference_name="the reference",
        current_name="now",
    )
    noise = None
    if j.change_low is not None and j.change_high is not None:
        noise = (j.change_high - j.change_low) / 2.0
    return LiveJudgement(j.outcome, j.reason, j.change, noise)


__all__ = ["LiveJudgement", "WindowFigures", "judge_windows"]
