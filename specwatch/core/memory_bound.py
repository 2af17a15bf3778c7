"""Decode is memory-bound: what GPU state predicts for tok/s when part of a step waits on HBM.

A decode step reads the weights and the KV cache once per step; the share of the step spent
on those reads follows the memory clock, the rest follows the SM clock. With the share ``m``
(the DRAM activity at the reference: achieved bandwidth against the board's peak, DCGM's
``DCGM_FI_PROF_DRAM_ACTIVE``), a step takes ``(1 − m) / r_sm + m / r_mem`` of its old time for
SM and memory clock ratios ``r_sm`` and ``r_mem``, so tok/s scales by the inverse. An 8% SM
clock drop on a decode 80% memory-bound predicts about −1.7%, not −8%.

Bytes per token: at a fixed bus width the bytes a GPU moves per second are proportional to its
DRAM activity times its memory clock, so ``Σ dram_active × memory clock / tok/s`` is
proportional to the bytes read per generated token. Its ratio between two windows says whether
each token needs more memory traffic (longer contexts read more KV cache: load), whatever the
bus width, which no source here reports with the activity.
"""

from __future__ import annotations

import math

DRAM_MIN = 0.02
"""DRAM activity below this is no reading of a memory-bound share (an idle or compute-bound
board): the SM clock alone predicts."""
BYTES_REL_CHANGE = 0.05
"""A relative change of bytes per token that counts as more (or less) work per token."""


def blended_ratio(
    sm_ratio: float, mem_ratio: float | None, share: float | None
) -> tuple[float, bool]:
    """The tok/s ratio GPU state predicts, and whether the memory share was used.

    ``share`` ``None`` or below :data:`DRAM_MIN`: the SM clock ratio alone (decode follows the
    SM clock). A missing memory clock ratio counts as unchanged.
    """
    if share is None or share < DRAM_MIN or sm_ratio <= 0:
        return sm_ratio, False
    m = min(1.0, share)
    mem = mem_ratio if mem_ratio is not None and mem_ratio > 0 else 1.0
    return 1.0 / ((1.0 - m) / sm_ratio + m / mem), True


def carried_by_memory(sm_ratio: float, mem_ratio: float | None, share: float) -> bool:
    """Whether the memory clock's term of :func:`blended_ratio` outweighs the SM clock's."""
    if mem_ratio is None or mem_ratio <= 0 or sm_ratio <= 0:
        return False
    m = min(1.0, share)
    return abs(m * math.log(mem_ratio)) > abs((1.0 - m) * math.log(sm_ratio))


def bytes_per_token_change(a: float | None, b: float | None) -> float | None:
    """``b / a − 1`` of two bytes-per-token figures when it is at least
    :data:`BYTES_REL_CHANGE` in size (``None`` otherwise or when either is unknown)."""
    if a is None or b is None or a <= 0:
        return None
    change = b / a - 1.0
    return change if abs(change) >= BYTES_REL_CHANGE else None


__all__ = [
    "BYTES_REL_CHANGE",
    "DRAM_MIN",
    "blended_ratio",
    "bytes_per_token_change",
    "carried_by_memory",
]
