"""Statistics against reference values (computed once with SciPy 1.17, hard-coded here)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specwatch.core import stats

# (df, t_{0.975, df}) from scipy.stats.t.ppf(0.975, df)
T975 = [
    (1, 12.706204736174694),
    (2, 4.302652729749462),
    (3, 3.1824463052837078),
    (4, 2.7764451051977934),
    (5, 2.5705818356363146),
    (9, 2.262157162798205),
    (10, 2.228138851986274),
    (30, 2.0422724563012378),
    (7.5, 2.333039626864974),
    (24.93, 2.0598318181207187),
]


@pytest.mark.parametrize(("df", "expected"), T975)
def test_t_critical_matches_reference(df: float, expected: float) -> None:
    assert stats.t_critical(0.95, df) == pytest.approx(expected, rel=1e-9)


def test_t_cdf_reference_and_closed_forms() -> None:
    assert stats.t_cdf(1.5, 3.3) == pytest.approx(0.8887484016403541, rel=1e-10)
    assert stats.t_cdf(-0.7, 12.0) == pytest.approx(0.24863707689535378, rel=1e-10)
    for t in (-3.0, -0.2, 0.0, 0.9, 7.0):
        # df=1 is Cauchy, df=2 has an algebraic CDF
        assert stats.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
        assert stats.t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert stats.t_cdf(1.959963984540054, math.inf) == pytest.approx(0.975, abs=1e-12)
    assert stats.t_cdf(math.inf, 3) == 1.0


def test_t_ppf_is_symmetric_and_inverts_cdf() -> None:
    assert stats.t_ppf(0.5, 4) == 0.0
    assert stats.t_ppf(0.025, 4) == pytest.approx(-2.7764451051977934, rel=1e-9)
    for p in (0.6, 0.9, 0.999):
        assert stats.t_cdf(stats.t_ppf(p, 6.25), 6.25) == pytest.approx(p, abs=1e-11)
    with pytest.raises(ValueError):
        stats.t_ppf(1.0, 3)


def test_betainc_reference() -> None:
    assert stats.betainc(2.5, 0.5, 0.3) == pytest.approx(0.018927124071945658, rel=1e-10)
    assert stats.betainc(2.0, 3.0, 0.0) == 0.0
    assert stats.betainc(2.0, 3.0, 1.0) == 1.0


def test_summary_of_the_story_runs() -> None:
    runs = [82.4, 82.5, 82.5, 84.0, 82.6]
    s = stats.summarize(runs)
    assert s.n == 5
    assert s.mean == pytest.approx(82.8)
    assert s.std == pytest.approx(0.6745368781616017, rel=1e-12)
    assert (s.min, s.max) == (82.4, 84.0)
    assert s.ci_low == pytest.approx(81.96245184292597, rel=1e-10)
    assert s.ci_high == pytest.approx(83.63754815707402, rel=1e-10)


def test_summary_edge_cases() -> None:
    empty = stats.summarize([])
    assert empty.n == 0 and empty.mean is None and empty.ci_low is None
    one = stats.summarize([3.0])
    assert one.mean == 3.0 and one.std is None and one.ci_low is None and one.max == 3.0
    with pytest.raises(ValueError):
        stats.mean([])


def test_a_wide_spread_of_rates_has_no_interval_below_zero() -> None:
    # three runs of a real llama-server beside two CPU hogs: the t interval reached -28.9 tok/s
    runs = [22.8, 53.4, 90.8]
    whole = stats.mean_ci(runs)
    assert whole is not None and whole[0] < 0.0
    s = stats.summarize(runs)
    assert s.ci_low == 0.0 and s.ci_high == pytest.approx(whole[1], rel=1e-12)
    tight = stats.summarize([82.4, 82.5, 82.5, 84.0, 82.6])
    assert tight.ci_low == pytest.approx(81.96245184292597, rel=1e-10)  # far from 0: uncut
    signed = stats.summarize(runs, floor=None)
    assert signed.ci_low == pytest.approx(whole[0], rel=1e-12)


def test_welch_reference_wikipedia_example() -> None:
    a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    w = stats.welch(a, b)
    assert w is not None
    assert w.t == pytest.approx(2.455356398286006, rel=1e-10)
    assert w.df == pytest.approx(24.988529290231416, rel=1e-10)
    assert w.p_value == pytest.approx(0.021378001462866992, rel=1e-8)
    assert w.ci_low == pytest.approx(0.3492370661924069, rel=1e-8)
    assert w.ci_high == pytest.approx(3.984096267140929, rel=1e-9)
    assert w.significant


def test_welch_89_vs_82_7_is_significant() -> None:
    before = [89.1, 88.7, 89.4, 88.9, 89.2]
    after = [82.4, 82.5, 82.5, 84.0, 82.6]
    w = stats.welch(after, before)
    assert w is not None
    assert w.df == pytest.approx(5.251306780187803, rel=1e-10)
    assert w.ci_low == pytest.approx(5.436541663693412, rel=1e-9)
    assert w.ci_high == pytest.approx(7.083458336306598, rel=1e-9)
    assert w.p_value == pytest.approx(4.487770287415189e-06, rel=1e-6)


def test_welch_degenerate_inputs() -> None:
    assert stats.welch([1.0], [1.0, 2.0]) is None
    same = stats.welch([5.0, 5.0], [5.0, 5.0, 5.0])
    assert same is not None and same.diff == 0.0 and not same.significant and same.p_value == 1.0
    exact = stats.welch([5.0, 5.0], [6.0, 6.0])
    assert exact is not None and exact.significant and exact.t == math.inf


@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=2, max_size=20),
    st.floats(min_value=0.5, max_value=0.999),
)
def test_ci_contains_mean_and_widens_with_level(values: list[float], level: float) -> None:
    s = stats.summarize(values, level, floor=None)
    wider = stats.summarize(values, min(0.9999, level + 0.0005), floor=None)
    assert s.mean is not None and s.ci_low is not None and s.ci_high is not None
    assert s.ci_low <= s.mean + 1e-6 * max(1.0, abs(s.mean))
    assert s.ci_high >= s.mean - 1e-6 * max(1.0, abs(s.mean))
    assert wider.ci_low is not None and wider.ci_high is not None
    assert wider.ci_high - wider.ci_low >= (s.ci_high - s.ci_low) * (1 - 1e-9)


def test_summaries_of_one_size_invert_the_t_distribution_once() -> None:
    # The live verdict summarizes a window of the same size every second: the critical value
    # of that size is worked out once, and the interval is the one worked out from scratch.
    stats.t_critical.cache_clear()
    first = stats.summarize([82.4, 82.5, 82.5, 84.0, 82.6])
    for shift in range(1, 50):
        later = stats.summarize([82.4 + shift, 82.5, 82.5, 84.0, 82.6])
        assert later.ci_low is not None and later.ci_high is not None
        assert later.mean is not None and later.std is not None
        half = stats.t_ppf(0.975, 4) * later.std / math.sqrt(5)
        assert later.ci_high - later.mean == pytest.approx(half, rel=1e-12)
    assert first.ci_low == pytest.approx(81.96245184292597, rel=1e-10)
    assert stats.t_critical.cache_info().misses == 1


def test_ratio_ci_is_the_ratio_of_sums_with_its_interval() -> None:
    r, ci = stats.ratio_ci([2.0, 4.0, 3.0], [1.0, 2.0, 1.0])
    assert r == pytest.approx(9.0 / 4.0)
    assert ci is not None and ci[0] < r < ci[1]
    exact, tight = stats.ratio_ci([2.0, 4.0], [1.0, 2.0])  # every pair at the same ratio
    assert exact == 2.0 and tight == pytest.approx((2.0, 2.0))
    assert stats.ratio_ci([3.0], [2.0]) == (1.5, None)
