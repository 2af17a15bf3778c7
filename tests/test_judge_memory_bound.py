"""Issue 26's stories (a) and (c) on the verdict rule, with the DRAM activity known: (a) an 8%
SM-clock drop on a memory-bound decode with the memory clock unchanged and tok/s −8% is not
explained by GPU state; (c) more DRAM bytes per token (longer contexts) with tok/s −8% is load."""

from __future__ import annotations

import pytest

from specwatch.core.judge import Figures, judge
from specwatch.core.memory_bound import blended_ratio
from specwatch.core.outcomes import Outcome

BEFORE = (89.1, 88.7, 89.4, 88.9, 89.2)
AFTER = tuple(round(v * 0.92, 2) for v in BEFORE)


def _f(
    tok_s: tuple[float, ...],
    sm: float = 1980.0,
    mem: float = 2619.0,
    dram: float | None = 0.8,
    per_token: float | None = None,
) -> Figures:
    return Figures(
        tok_s,
        slowest_sm_clock_mhz=sm,
        slowest_mem_clock_mhz=mem,
        dram_active=dram,
        dram_per_token=per_token,
    )


def test_the_blend_weighs_each_clock_by_the_memory_bound_share() -> None:
    assert blended_ratio(0.92, 1.0, 0.8)[0] == pytest.approx(1 / (0.2 / 0.92 + 0.8))
    assert blended_ratio(0.92, 1.0, None) == (0.92, False)
    assert blended_ratio(0.92, 1.0, 0.0) == (0.92, False)  # compute-bound: the SM clock alone


def test_story_a_sm_clock_drop_on_a_memory_bound_decode_is_not_gpu_state() -> None:
    j = judge(_f(BEFORE), _f(AFTER, sm=1980.0 * 0.92))
    assert j.outcome is Outcome.CODE, j.reasons
    assert j.expected_ratio == pytest.approx(0.983, abs=0.001)
    assert "at 80% DRAM activity (decode is memory-bound) predicts -1.7%" in j.reason
    # Without the DRAM reading the SM clock alone explains it, as before.
    without = judge(_f(BEFORE, dram=None), _f(AFTER, sm=1980.0 * 0.92, dram=None))
    assert without.outcome is Outcome.GPU


def test_story_b_with_the_dram_reading_names_the_memory_clock() -> None:
    j = judge(_f(BEFORE), _f(AFTER, mem=2383.0, dram=0.82))
    assert j.outcome is Outcome.GPU and j.term == "memory clock", j.reasons
    assert "memory clock 2619 → 2383 MHz at 80% DRAM activity" in j.reason


def test_story_c_more_bytes_per_token_is_load() -> None:
    j = judge(_f(BEFORE, per_token=40.0), _f(AFTER, per_token=40.0 / 0.92))
    assert j.outcome is Outcome.LOAD, j.reasons
    assert "DRAM bytes per token +8.7% (more work per token)" in j.reason
    same = judge(_f(BEFORE, per_token=40.0), _f(AFTER, per_token=40.5))
    assert same.outcome is Outcome.CODE
