"""Verify-step cost against the running batch, its cliffs, and the model for other draft lengths.

Windows are binned by ``requests_running`` (the gauge at the window's end, rounded); a bin's
step time is its windows' seconds of decode over their steps (each window weighs as much as the
steps it saw; the plain mean of their step latencies where a window has no step count), with a
Student t interval over windows, withheld below ``MIN_WINDOWS``. A cliff is a bin whose step
time is ``CLIFF_FACTOR`` times what its two neighbours give at its batch (linear between them):
typically a batch shape that runs without a CUDA graph.

The cost at a draft length ``k'`` the server does not run is not observed. It is modelled from
the step at ``K``: with a measured split, ``T(B, k') = T(B, K) − (K − k')·draft cost per token``;
without one, the verify is assumed to cost a plain step whatever ``k`` and the rest of the step
to be drafting, linear in ``k``: ``T(B, k') = T_plain(B) + k'/K · (T(B, K) − T_plain(B))``,
with an interval that reaches ``T(B, K)``: where the overhead is a cost per step (a draft-model
call, its bookkeeping) rather than per draft token, a shorter draft saves little of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from specwatch.core.acceptance import Estimate, usable, windows_words
from specwatch.core.server import MetricsWindow
from specwatch.core.stats import mean, mean_ci, ratio_ci

MIN_WINDOWS = 3
"""Windows a batch bin needs before its step time is used."""
CLIFF_FACTOR = 1.5
"""A bin this many times above what its neighbours give at its batch is a cliff."""

MODEL_LINEAR = (
    "verify cost assumed flat in k (a plain step's), draft cost linear in k; the interval at "
    "k'<K reaches the step at K (all of the overhead per step)"
)
MODEL_SPLIT = "verify cost flat in k, draft cost {ms:.3g} ms per draft token (measured split)"


@dataclass(frozen=True, slots=True)
class StepBin:
    """Step time at one running batch size."""

    batch: int
    windows: tuple[MetricsWindow, ...]
    step_s: Estimate | None
    """Step latency (weighted by steps) with a t interval over windows; ``None`` below
    ``MIN_WINDOWS``."""
    cliff: float | None = None
    """Its step time over what its neighbours give at its batch, when that is a cliff."""
    reason: str | None = None
    """Why ``step_s`` is withheld."""


def batch_of(w: MetricsWindow) -> int | None:
    """The window's running batch (``None`` when unknown or idle)."""
    if w.requests_running is None:
        return None
    b = round(w.requests_running)
    return b if b >= 1 else None


def step_curve(
    windows: Iterable[MetricsWindow], min_windows: int = MIN_WINDOWS
) -> tuple[StepBin, ...]:
    """Bin ``windows`` by running batch, ascending, with step times and cliffs."""
    groups: dict[int, list[MetricsWindow]] = {}
    for w in windows:
        b = batch_of(w)
        if b is not None and usable(w) and w.step_latency_s is not None:
            groups.setdefault(b, []).append(w)
    bins: list[StepBin] = []
    for b in sorted(groups):
        ws = tuple(groups[b])
        if len(ws) < min_windows:
            why = f"{windows_words(len(ws))} at batch {b}, fewer than the {min_windows} needed"
            bins.append(StepBin(b, ws, None, reason=why))
            continue
        times = [w.step_latency_s or 0.0 for w in ws]
        steps = [w.decode_steps or 0.0 for w in ws]
        if all(n > 0 for n in steps):
            # Each window weighs as much as the steps it saw: a window that caught two steps
            # (a request ending) is not worth one that caught a hundred.
            m, ci = ratio_ci([t * n for t, n in zip(times, steps, strict=True)], steps)
        else:
            m, ci = mean(times), mean_ci(times)
        lo, hi = ci if ci else (m, m)
        bins.append(StepBin(b, ws, Estimate(m, max(0.0, lo), hi)))
    return _with_cliffs(bins)


def _with_cliffs(bins: list[StepBin]) -> tuple[StepBin, ...]:
    known = [b for b in bins if b.step_s is not None]
    cliffs: dict[int, float] = {}
    for left, mid, right in zip(known, known[1:], known[2:], strict=False):
        assert left.step_s and mid.step_s and right.step_s
        share = (mid.batch - left.batch) / (right.batch - left.batch)
        expected = left.step_s.value + share * (right.step_s.value - left.step_s.value)
        if expected > 0 and mid.step_s.value >= CLIFF_FACTOR * expected:
            cliffs[mid.batch] = mid.step_s.value / expected
    return tuple(StepBin(b.batch, b.windows, b.step_s, cliffs.get(b.batch), b.reason) for b in bins)


def interpolate(points: Mapping[int, float], batch: int) -> tuple[float, bool] | None:
    """The value at ``batch``: measured there, or linear between the two around it.

    Returns ``(value, interpolated)``; ``None`` outside the measured range.
    """
    if batch in points:
        return points[batch], False
    below = [b for b in points if b < batch]
    above = [b for b in points if b > batch]
    if not below or not above:
        return None
    lo, hi = max(below), min(above)
    share = (batch - lo) / (hi - lo)
    return points[lo] + share * (points[hi] - points[lo]), True


def plain_steps(windows: Iterable[MetricsWindow]) -> dict[int, float]:
    """Plain step time by batch from windows of the same server without speculation."""
    return {b.batch: b.step_s.value for b in step_curve(windows) if b.step_s is not None}


def model_step_s(
    observed_s: float, k: int, k_running: int, plain_s: float, draft_s: float | None
) -> float:
    """The step time at ``k`` drafts from the one observed at ``k_running`` (see the module)."""
    if k == k_running:
        return observed_s
    if k <= 0:
        return plain_s
    if draft_s is not None:
        return max(plain_s, observed_s - (k_running - k) * draft_s)
    per_draft = max(0.0, observed_s - plain_s) / k_running
    return plain_s + k * per_draft


def model_step_bounds(
    observed: Estimate, k: int, k_running: int, plain_s: float, draft_s: float | None
) -> Estimate:
    """The modelled step at ``k`` with its interval: the observed step's interval carried
    through :func:`model_step_s`, and, for ``0 < k < k_running`` without a measured split, up
    to the step at ``k_running``: a shorter draft never costs more a step, and on a real
    server most of the overhead can be per step rather than per draft token."""
    trio = (observed.value, observed.low, observed.high)
    steps = [model_step_s(t, k, k_running, plain_s, draft_s) for t in trio]
    high = max(steps)
    if draft_s is None and 0 < k < k_running:
        high = max(high, observed.high)
    return Estimate(steps[0], min(steps), high)


def model_text(draft_s: float | None) -> str:
    """The one-line name of the model in use."""
    return MODEL_LINEAR if draft_s is None else MODEL_SPLIT.format(ms=draft_s * 1000.0)


__all__ = [
    "CLIFF_FACTOR",
    "MIN_WINDOWS",
    "MODEL_LINEAR",
    "MODEL_SPLIT",
    "StepBin",
    "batch_of",
    "interpolate",
    "model_step_bounds",
    "model_step_s",
    "model_text",
    "plain_steps",
    "step_curve",
]
