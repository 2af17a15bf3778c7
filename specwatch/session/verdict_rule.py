"""The seam between the live verdict and the shared verdict rule (``specwatch.core.judge``).

The live verdict measures :class:`WindowFigures` (one side of a comparison: a reference window
or the current one) and asks :func:`judge_windows` which :class:`~specwatch.core.outcomes.Outcome`
applies. That function hands the figures to ``specwatch.core.judge.judge`` — the rule
``compare`` uses — when that module is present; until then an interim rule with the same steps
answers (change beyond noise, clock share, accept length, load, unknown), so the live line and
``compare`` never use two different wordings.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass
from types import ModuleType

from specwatch.core.outcomes import Outcome
from specwatch.core.stats import mean, welch

MIN_CHANGE = 0.02
"""Smallest relative tok/s change that counts (``compare``'s threshold)."""
MIN_SHARE = 0.75
"""Share of the change (log terms) a cause must account for."""
LOAD_REL_CHANGE = 0.25
LOAD_MIN_RUNNING = 0.5
LOAD_MIN_PROMPT_TOK_S = 10.0
ACCEPT_MIN_CHANGE = 0.02


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """What one side of a live comparison measured; ``None`` where unknown.

    The fields are those of ``specwatch.core.judge.Figures``.
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


@dataclass(frozen=True, slots=True)
class LiveJudgement:
    """A verdict, the sentence behind it and the relative tok/s change."""

    outcome: Outcome
    reason: str
    change: float | None


def _core_judge() -> ModuleType | None:
    try:
        return importlib.import_module("specwatch.core.judge")
    except ImportError:
        return None


def judge_windows(reference: WindowFigures, current: WindowFigures) -> LiveJudgement:
    """The shared verdict for ``current`` against ``reference``."""
    core = _core_judge()
    if core is not None:
        j = core.judge(
            core.Figures(**asdict(reference)),
            core.Figures(**asdict(current)),
            reference_name="the reference",
            current_name="now",
        )
        return LiveJudgement(j.outcome, str(j.reason), j.change)
    return _interim_judge(reference, current)


def _outcome(name: str, fallback: Outcome) -> Outcome:
    member = Outcome.__members__.get(name)
    return member if member is not None else fallback


def _apart(a: float | None, b: float | None, rel: float, floor: float) -> bool:
    return a is not None and b is not None and abs(b - a) > max(floor, rel * max(abs(a), abs(b)))


def _share(ratio: float | None, observed: float) -> float | None:
    if ratio is None or ratio <= 0 or observed <= 0 or math.log(observed) == 0.0:
        return None
    return math.log(ratio) / math.log(observed)


def _interim_judge(reference: WindowFigures, current: WindowFigures) -> LiveJudgement:
    """``core.judge``'s rule, until that module is on this branch."""
    ma, mb = reference.mean_tok_s, current.mean_tok_s
    if not ma or mb is None:
        return LiveJudgement(Outcome.NO_CHANGE, "no tok/s figures to compare", None)
    observed = mb / ma
    change = observed - 1.0
    w = welch(list(reference.tok_s), list(current.tok_s))
    beyond = abs(change) >= MIN_CHANGE and (w is None or w.significant)
    head = f"tok/s {change * 100:+.1f}%"
    if not beyond:
        return LiveJudgement(Outcome.NO_CHANGE, f"{head}: within noise", change)
    ca, cb = reference.slowest_sm_clock_mhz, current.slowest_sm_clock_mhz
    expected = cb / ca if ca and cb is not None else None
    share = _share(expected, observed)
    if expected is not None and share is not None and share >= MIN_SHARE:
        why = f"{head}; slowest-GPU SM clock {ca:.0f} → {cb:.0f} MHz predicts"
        return LiveJudgement(Outcome.GPU, f"{why} {(expected - 1) * 100:+.1f}%", change)
    aa, ab = reference.accept_length, current.accept_length
    acc = ab / aa if aa and ab is not None else None
    acc_share = _share(acc, observed)
    if acc is not None and abs(acc - 1) >= ACCEPT_MIN_CHANGE and (acc_share or 0) >= MIN_SHARE:
        why = f"{head}; accept length {aa:.2f} → {ab:.2f} accounts for it"
        return LiveJudgement(_outcome("ACCEPTANCE", Outcome.CODE), why, change)
    ra, rb = reference.running_requests, current.running_requests
    pa, pb = reference.prompt_tok_s, current.prompt_tok_s
    loads = []
    if _apart(ra, rb, LOAD_REL_CHANGE, LOAD_MIN_RUNNING):
        loads.append(f"running requests {ra:.1f} → {rb:.1f}")
    if _apart(pa, pb, LOAD_REL_CHANGE, LOAD_MIN_PROMPT_TOK_S):
        loads.append(f"prompt tok/s {pa:.0f} → {pb:.0f}")
    if loads:
        why = f"{head}; load changed: {', '.join(loads)}"
        return LiveJudgement(_outcome("LOAD", Outcome.CODE), why, change)
    if expected is None:
        return LiveJudgement(Outcome.UNKNOWN, f"{head}; no SM clock readings", change)
    return LiveJudgement(
        Outcome.CODE, f"{head}; the slowest GPU's SM clock does not account for it", change
    )


__all__ = ["LiveJudgement", "WindowFigures", "judge_windows"]
