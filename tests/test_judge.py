"""The verdict rule on its own: one test per outcome, and the order the causes are tried in."""

from __future__ import annotations

import pytest

from specwatch.core.judge import Figures, judge, load_changes
from specwatch.core.outcomes import Outcome

BEFORE = (89.1, 88.7, 89.4, 88.9, 89.2)
AFTER = (82.4, 82.5, 82.5, 84.0, 82.6)  # about −7.3%


def fig(tok_s: tuple[float, ...] = BEFORE, **kw: object) -> Figures:
    base: dict[str, object] = {
        "slowest_sm_clock_mhz": 1980.0,
        "board_max_sm_clock_mhz": 1980.0,
        "running_requests": 1.0,
        "prompt_tok_s": 2.0,
        "accept_length": 2.9,
    }
    base.update(kw)
    return Figures(tok_s, **base)  # type: ignore[arg-type]


def test_same_figures_are_no_significant_change() -> None:
    j = judge(fig(), fig())
    assert j.outcome is Outcome.NO_CHANGE
    assert "within noise" in j.reason


def test_story_clock_drop_without_a_reason_is_gpu_state_and_says_so() -> None:
    j = judge(fig(), fig(AFTER, slowest_sm_clock_mhz=1830.0))
    assert j.outcome is Outcome.GPU
    assert "1980 → 1830 MHz" in j.reason
    assert "-7.6% of its 1980 MHz maximum, no clock-event reason" in j.reason
    assert j.explained_by_clock


def test_active_clock_reasons_are_named() -> None:
    hot = fig(AFTER, slowest_sm_clock_mhz=1830.0, clock_reasons=frozenset({"pwrcap"}))
    assert "pwrcap" in judge(fig(), hot).reason


def test_accept_length_that_accounts_for_the_drop_is_acceptance() -> None:
    j = judge(fig(), fig(AFTER, accept_length=2.69))
    assert j.outcome is Outcome.ACCEPTANCE
    assert "accept length 2.90 → 2.69" in j.reason
    assert j.accept_share is not None and j.accept_share > 0.75


def test_accept_length_moving_the_other_way_explains_nothing() -> None:
    j = judge(fig(), fig(AFTER, accept_length=3.1))
    assert j.outcome is Outcome.CODE


def test_more_running_requests_is_load() -> None:
    j = judge(fig(), fig(AFTER, running_requests=3.0))
    assert j.outcome is Outcome.LOAD
    assert j.load_changes == ("running requests 1.0 → 3.0",)
    assert "load changed: running requests 1.0 → 3.0" in j.reason


def test_more_prompt_traffic_is_load() -> None:
    j = judge(fig(), fig(AFTER, prompt_tok_s=900.0))
    assert j.outcome is Outcome.LOAD
    assert "prompt tok/s 2 → 900" in j.reason


def test_small_load_wobbles_are_not_a_change() -> None:
    assert load_changes(fig(), fig(running_requests=1.3, prompt_tok_s=9.0)) == ()
    assert load_changes(fig(running_requests=None), fig(running_requests=5.0)) == ()


def test_gpu_state_is_tried_before_load_and_acceptance() -> None:
    both = fig(AFTER, slowest_sm_clock_mhz=1830.0, running_requests=3.0, accept_length=2.69)
    assert judge(fig(), both).outcome is Outcome.GPU


def test_load_or_acceptance_answer_even_without_clock_readings() -> None:
    ref = fig(slowest_sm_clock_mhz=None)
    assert judge(ref, fig(AFTER, slowest_sm_clock_mhz=None, running_requests=3.0)).outcome is (
        Outcome.LOAD
    )


def test_no_clock_readings_is_unknown_and_names_the_side() -> None:
    j = judge(
        fig(slowest_sm_clock_mhz=None),
        fig(AFTER),
        reference_name="a.json",
        current_name="b.json",
    )
    assert j.outcome is Outcome.UNKNOWN
    assert "no SM clock readings in a.json:" in j.reason


def test_same_clocks_same_load_same_acceptance_is_the_code() -> None:
    j = judge(fig(), fig(AFTER))
    assert j.outcome is Outcome.CODE
    assert "do not account" in j.reason


def test_single_samples_use_the_threshold_alone() -> None:
    j = judge(fig((89.0,)), fig((80.0,), slowest_sm_clock_mhz=1780.0))
    assert j.welch is None and j.beyond_noise
    assert j.outcome is Outcome.GPU
    assert j.change == pytest.approx(80.0 / 89.0 - 1)


def test_no_samples_is_no_change() -> None:
    j = judge(fig(()), fig(()))
    assert j.outcome is Outcome.NO_CHANGE
    assert j.reason == "no tok/s figures to compare"


def test_no_change_is_below_minus_100_percent() -> None:
    # a real llama-server's runs beside two CPU hogs against a quiet side: the t interval of
    # the change reached -117.6%, which no tok/s can fall to
    quiet, hogged = (163.0, 164.5, 161.6), (22.8, 53.4, 90.8)
    j = judge(fig(quiet), fig(hogged))
    assert j.welch is not None and j.change is not None
    raw_low = j.welch.ci_low / j.tok_s_reference.mean  # type: ignore[operator]
    assert raw_low < -1.0
    assert j.change_low == -1.0 and j.observed_ratio_low == 0.0
    assert "95% CI -100.0% to " in j.reason
    # the noise said beside a live verdict stays the t interval's half width
    half = (j.welch.ci_high - j.welch.ci_low) / 2 / j.tok_s_reference.mean  # type: ignore[operator]
    assert j.noise == pytest.approx(half)
    assert j.noise > (j.change_high - j.change_low) / 2  # type: ignore[operator]
