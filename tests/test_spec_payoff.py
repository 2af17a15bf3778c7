"""The verify-latency arithmetic: effective latency, break-even accept length, gain or cost."""

from __future__ import annotations

import pytest

from specwatch.core.spec_payoff import (
    baseline_ms_from_snapshot,
    break_even_accept_length,
    effective_ms_per_token,
    spec_payoff,
)


def test_effective_latency_spreads_the_step_over_its_tokens() -> None:
    assert effective_ms_per_token(29.0, 2.0) == pytest.approx(14.5)
    assert effective_ms_per_token(None, 2.0) is None
    assert effective_ms_per_token(29.0, 0.0) is None


def test_break_even_is_step_over_plain() -> None:
    assert break_even_accept_length(29.0, 12.1) == pytest.approx(29.0 / 12.1)
    assert break_even_accept_length(29.0, None) is None


def test_the_story_speculation_costs_27_percent() -> None:
    # Plain decode at 82.7 tok/s; EAGLE-3 at 60 tok/s with 29 ms verify steps.
    plain_ms = 1000 / 82.7
    tokens_per_step = 29.0 / (1000 / 60.0)
    v = spec_payoff(29.0, tokens_per_step, plain_ms)
    assert v.text == "speculation costs 27%"
    assert v.speed_ratio == pytest.approx(60.0 / 82.7)
    assert v.break_even_accept_length == pytest.approx(29.0 / plain_ms)


def test_gains_when_effective_latency_beats_plain() -> None:
    v = spec_payoff(12.0, 2.4, 5.9)
    assert v.text == "speculation gains 18%"
    assert v.speed_ratio is not None and v.speed_ratio > 1


def test_about_even_inside_the_band() -> None:
    assert spec_payoff(10.0, 2.0, 5.05).text.startswith("speculation about even")


def test_unknown_without_baseline_or_steps() -> None:
    assert "no baseline" in spec_payoff(12.0, 2.4, None).text
    v = spec_payoff(None, 2.4, 6.0)
    assert v.speed_ratio is None and "waiting" in v.text


def test_baseline_from_snapshot_prefers_decode_rate() -> None:
    snap = {"overall": {"decode_tok_s": {"mean": 80.0}, "tok_s": {"mean": 50.0}}}
    assert baseline_ms_from_snapshot(snap) == pytest.approx(12.5)
    assert baseline_ms_from_snapshot({"overall": {"tok_s": {"mean": 50.0}}}) == pytest.approx(20.0)
    assert baseline_ms_from_snapshot({"overall": {"tok_s": {"mean": None}}}) is None
    assert baseline_ms_from_snapshot({}) is None
