"""Step arithmetic of a stream: bursts of events grouped into steps, quantiles, estimates."""

from __future__ import annotations

import itertools
import math

from specwatch.core.server import ChunkArrival
from specwatch.sources.streams.accumulator import StreamAccumulator

GAP_FLOOR_S = 1e-6
"""Gaps below this (simultaneous events) count as this, so their logarithm is finite."""
BURST_MAX_S = 2e-3
"""A gap inside one verify step's burst of events is never longer than this."""
BURST_SEPARATION = 10.0
"""The burst gaps and the step gaps must differ by this factor (geometric means) to be split."""


def quantile(values: list[float], q: float) -> float | None:
    """Linear-interpolated quantile of ``values`` (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def group_bursts(
    times: list[float], threshold_s: float | None = None, steps: int | None = None
) -> list[int]:
    """Indexes of ``times`` where a new step starts; the events of one step's burst merge.

    Args:
        times: Arrival times of successive events.
        threshold_s: Gaps above this start a new step.
        steps: The number of steps after the first event when the server says so (llama.cpp
            ``predicted_n - 1 - draft_n_accepted``): the ``steps`` longest gaps start them.

    Without either, the gaps are split in two clusters on a log scale (burst gaps of a few
    microseconds, step gaps of milliseconds); when no such split exists (no speculation) every
    event is its own step.
    """
    if not times:
        return []
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if steps is not None and 0 < steps <= len(gaps):
        longest = sorted(range(len(gaps)), key=lambda i: gaps[i], reverse=True)[:steps]
        return [0, *sorted(i + 1 for i in longest)]
    if threshold_s is None:
        threshold_s = _burst_threshold(gaps)
    starts = [0]
    for i, gap in enumerate(gaps, start=1):
        if gap > threshold_s:
            starts.append(i)
    return starts


def _burst_threshold(gaps: list[float]) -> float:
    """The best two-cluster split of the log gaps (Otsu), or ``-1`` (no split) if unclear."""
    if len(gaps) < 2:
        return -1.0
    logs = sorted(math.log(max(g, GAP_FLOOR_S)) for g in gaps)
    n = len(logs)
    prefix = [0.0]
    prefix_sq = [0.0]
    for v in logs:
        prefix.append(prefix[-1] + v)
        prefix_sq.append(prefix_sq[-1] + v * v)
    best: tuple[float, int] | None = None
    for k in range(1, n):
        if logs[k] == logs[k - 1]:
            continue
        lo_sum, hi_sum = prefix[k], prefix[n] - prefix[k]
        cost = (prefix_sq[k] - lo_sum * lo_sum / k) + (
            prefix_sq[n] - prefix_sq[k] - hi_sum * hi_sum / (n - k)
        )
        if best is None or cost < best[0]:
            best = (cost, k)
    if best is None:
        return -1.0
    k = best[1]
    lo_mean = prefix[k] / k
    hi_mean = (prefix[n] - prefix[k]) / (n - k)
    if math.exp(logs[k - 1]) > BURST_MAX_S or hi_mean - lo_mean < math.log(BURST_SEPARATION):
        return -1.0
    return math.exp((logs[k - 1] + logs[k]) / 2)


def estimate_counts(acc: StreamAccumulator) -> list[ChunkArrival]:
    """Rescale placeholder per-chunk counts to the final usage, by text length."""
    total = acc.final_tokens
    if total is None:
        total = max(1, round(acc.text_chars / 4)) if acc.text_chars else 0
        acc.notes["completion_tokens"] = (
            "the server sent no usage: estimated from the text length (about 4 characters a token)"
        )
    chars_total = acc.chars[-1] if acc.chars and acc.chars[-1] > 0 else 0
    out: list[ChunkArrival] = []
    last = 0
    for i, chunk in enumerate(acc.arrivals):
        if chars_total:
            est = round(total * acc.chars[i] / chars_total)
        else:
            est = round(total * (i + 1) / len(acc.arrivals))
        est = max(est, last + 1 if last < total else last, 1)
        est = min(est, total) if total else est
        last = est
        out.append(ChunkArrival(t=chunk.t, tokens=est))
    acc.final_tokens = total
    return out


__all__ = ["BURST_MAX_S", "GAP_FLOOR_S", "estimate_counts", "group_bursts", "quantile"]
