"""The memory-clock term of the GPU-state verdict: story (b), a power cap that lowers the memory
clock 9% with tok/s -8% is explained by GPU state and the reason names the memory clock."""

from __future__ import annotations

from specwatch.core.judge import Figures, judge
from specwatch.core.outcomes import Outcome

BEFORE = (89.1, 88.7, 89.4, 88.9, 89.2)
AFTER = tuple(round(v * 0.92, 2) for v in BEFORE)


def _figures(tok_s: tuple[float, ...], mem: float | None, sm: float = 1980.0) -> Figures:
    return Figures(tok_s, slowest_sm_clock_mhz=sm, slowest_mem_clock_mhz=mem)


def test_story_b_memory_clock_cut_explains_the_drop() -> None:
    j = judge(_figures(BEFORE, 2619.0), _figures(AFTER, 2383.0))
    assert j.outcome is Outcome.GPU and j.term == "memory clock"
    assert j.reasons[0].startswith("memory clock 2619 → 2383 MHz (-9.0%) explains -8.0% tok/s")


def test_unchanged_clocks_leave_it_to_the_code() -> None:
    j = judge(_figures(BEFORE, 2619.0), _figures(AFTER, 2619.0))
    assert j.outcome is Outcome.CODE


def test_without_memory_clock_readings_the_sm_clock_rule_is_unchanged() -> None:
    j = judge(_figures(BEFORE, None), _figures(AFTER, None, sm=1980.0 * 0.92))
    assert j.outcome is Outcome.GPU and j.term == "SM clock"
    j = judge(_figures(BEFORE, None), _figures(AFTER, None))
    assert j.outcome is Outcome.CODE
