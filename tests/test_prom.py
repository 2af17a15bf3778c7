"""Prometheus text parsing: selection helpers, histograms, and robustness on bad input."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from specwatch.sources.metrics.parse import parse_metrics
from specwatch.sources.metrics.prom import Histogram, Scrape, series_key

GOOD = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1200.0
vllm:generation_tokens_total{engine="1",model_name="m"} 800.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 50
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 30
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="0"} 10
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="1"} 5
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",tp_rank="0"} 3
sglang:num_running_reqs{dp_rank="0",tp_rank="1"} 3
sglang:num_running_reqs{dp_rank="1",tp_rank="0"} 2
sglang:num_running_reqs{dp_rank="1",tp_rank="1"} 2
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01"} 10
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.02"} 30
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf"} 40
vllm:inter_token_latency_seconds_sum{engine="0"} 0.7
vllm:inter_token_latency_seconds_count{engine="0"} 40
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.01"} 0
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.02"} 10
vllm:inter_token_latency_seconds_bucket{engine="1",le="+Inf"} 10
vllm:inter_token_latency_seconds_sum{engine="1"} 0.15
vllm:inter_token_latency_seconds_count{engine="1"} 10
"""


def test_parses_with_types_and_no_error() -> None:
    scrape = parse_metrics(GOOD)
    assert scrape.error is None
    assert scrape.types["vllm:generation_tokens"] == "counter"
    assert scrape.types["vllm:inter_token_latency_seconds"] == "histogram"


def test_total_sums_engines() -> None:
    scrape = parse_metrics(GOOD)
    assert scrape.total("vllm:generation_tokens_total") == 2000.0
    assert scrape.total("vllm:generation_tokens_total", {"engine": "1"}) == 800.0
    assert scrape.total("vllm:absent_total") is None


def test_tp_replicas_counted_once_dp_ranks_summed() -> None:
    scrape = parse_metrics(GOOD)
    assert scrape.total("sglang:num_running_reqs") == 5.0
    assert scrape.mean("sglang:num_running_reqs") == 2.5


def test_by_label_sums_other_labels() -> None:
    scrape = parse_metrics(GOOD)
    per_pos = scrape.by_label("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position")
    assert per_pos == {"0": 60.0, "1": 35.0}


def test_regex_selection() -> None:
    scrape = parse_metrics(
        'c_total{mode="decode_cuda_graph"} 5\nc_total{mode="decode_none"} 2\n'
        'c_total{mode="prefill_cuda_graph"} 9\n'
    )
    assert scrape.total("c_total", {"mode": re.compile(r"decode.*")}) == 7.0


def test_histogram_summed_and_delta_quantiles() -> None:
    scrape = parse_metrics(GOOD)
    hist = scrape.histogram("vllm:inter_token_latency_seconds")
    assert hist is not None
    assert hist.count == 50 and math.isclose(hist.sum, 0.85)
    assert hist.buckets == ((0.01, 10.0), (0.02, 40.0), (math.inf, 50.0))
    earlier = Histogram(sum=0.1, count=10, buckets=((0.01, 10.0), (0.02, 10.0), (math.inf, 10.0)))
    delta = hist.minus(earlier)
    assert delta.count == 40 and math.isclose(delta.sum, 0.75)
    assert delta.buckets == ((0.01, 0.0), (0.02, 30.0), (math.inf, 40.0))
    # median of the delta: rank 20 of 40, inside (0.01, 0.02] holding 30: 0.01 + 0.01 * 20/30
    q50 = delta.quantile(0.5)
    assert q50 is not None and math.isclose(q50, 0.01 + 0.01 * 20 / 30)
    # the top quantile lands in +Inf: clamped to the highest finite bound
    assert delta.quantile(0.99) == 0.02
    assert Histogram(0.0, 0.0, ()).quantile(0.5) is None


def test_series_key_is_stable() -> None:
    scrape = parse_metrics('a_total{b="2",a="1"} 3\n')
    assert series_key(scrape.samples[0]) == 'a_total{a="1",b="2"}'


def test_bad_line_costs_only_itself() -> None:
    text = GOOD.replace(
        'vllm:generation_tokens_total{engine="1",model_name="m"} 800.0',
        'vllm:generation_tokens_total{engine="1",model_name="m"} eight-hundred',
    )
    scrape = parse_metrics(text)
    assert scrape.error is not None and "1 unparseable line" in scrape.error
    assert scrape.total("vllm:generation_tokens_total") == 1200.0
    assert scrape.total("sglang:num_running_reqs") == 5.0
    hist = scrape.histogram("vllm:inter_token_latency_seconds")
    assert hist is not None and hist.count == 50


def test_truncated_mid_line_keeps_everything_before() -> None:
    cut = GOOD.index('vllm:inter_token_latency_seconds_sum{engine="1"}') + 20
    scrape = parse_metrics(GOOD[:cut])
    assert scrape.total("vllm:generation_tokens_total") == 2000.0
    assert scrape.error is not None


def test_empty_and_comment_only() -> None:
    assert parse_metrics("").samples == ()
    assert parse_metrics("# just a comment\n").samples == ()


def _never_raises(text: str) -> Scrape:
    scrape = parse_metrics(text)
    assert isinstance(scrape, Scrape)
    # the helpers must not raise either, whatever was parsed
    for name in scrape.names():
        scrape.total(name)
        scrape.mean(name)
        scrape.by_label(name, "le")
    scrape.histogram("vllm:inter_token_latency_seconds")
    return scrape


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_random_text_never_raises(text: str) -> None:
    _never_raises(text)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=len(GOOD)))
def test_any_truncation_never_raises_and_keeps_a_prefix(cut: int) -> None:
    scrape = _never_raises(GOOD[:cut])
    full = parse_metrics(GOOD)
    full_series = {series_key(s): s.value for s in full.samples}
    # no invented series; every value is right except perhaps the last line's cut-off number
    for s in scrape.samples:
        assert series_key(s) in full_series
    for s in scrape.samples[:-1]:
        assert full_series[series_key(s)] == s.value
    assert len(scrape.samples) <= len(full.samples)


_line = st.one_of(
    st.sampled_from(GOOD.splitlines()),
    st.text(alphabet='abc_:{}="0123456789.+- \t#eE', max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=30))
def test_mixed_good_and_bad_lines_never_raise(lines: list[str]) -> None:
    _never_raises("\n".join(lines))


def _labels_reused(scrape: Scrape, scale: float) -> Scrape:
    """``scrape`` with every value scaled, each series keeping its labels mapping (as the
    filtered reader hands them from one scrape to the next)."""
    return Scrape(tuple(s._replace(value=s.value * scale) for s in scrape.samples), scrape.types)


def test_answers_remembered_by_series_equal_fresh_ones() -> None:
    first = parse_metrics(GOOD)
    for scale in (1.0, 2.0, 0.5):
        again = _labels_reused(first, scale)
        fresh = parse_metrics(GOOD)
        assert again.total("sglang:num_running_reqs") == 5.0 * scale
        assert again.mean("sglang:num_running_reqs") == 2.5 * scale
        for name in ("vllm:generation_tokens_total", "sglang:num_running_reqs"):
            assert again.total(name) == (fresh.total(name) or 0.0) * scale
        hist = again.histogram("vllm:inter_token_latency_seconds")
        assert hist is not None
        assert hist.buckets == (
            (0.01, 10.0 * scale),
            (0.02, 40.0 * scale),
            (math.inf, 50.0 * scale),
        )


def test_one_series_buckets_out_of_order_or_repeated_are_summed_by_bound() -> None:
    text = (
        '# TYPE h histogram\nh_bucket{le="+Inf"} 5\nh_bucket{le="0.5"} 2\nh_bucket{le="x"} 9\n'
        'h_bucket{le="1"} 4\nh_bucket{le="1.0"} 1\nh_sum 3\nh_count 5\n'
    )
    for scrape in (parse_metrics(text), parse_metrics(text)):
        hist = scrape.histogram("h")
        assert hist is not None
        assert hist.buckets == ((0.5, 2.0), (1.0, 5.0), (math.inf, 5.0))
    ordered = parse_metrics('h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n')
    assert ordered.histogram("h") == Histogram(1.0, 2.0, ((1.0, 1.0), (math.inf, 2.0)))


def test_minus_with_other_bounds_matches_by_bound() -> None:
    now = Histogram(3.0, 5.0, ((0.5, 2.0), (1.0, 4.0), (math.inf, 5.0)))
    same = Histogram(1.0, 2.0, ((0.5, 1.0), (1.0, 2.0), (math.inf, 2.0)))
    assert now.minus(same) == Histogram(2.0, 3.0, ((0.5, 1.0), (1.0, 2.0), (math.inf, 3.0)))
    fewer = Histogram(1.0, 2.0, ((1.0, 2.0), (math.inf, 2.0)))
    assert now.minus(fewer).buckets == ((0.5, 2.0), (1.0, 2.0), (math.inf, 3.0))
    repeated = Histogram(0.0, 0.0, ((0.5, 1.0), (0.5, 2.0), (math.inf, 0.0)))
    assert repeated.minus(repeated).buckets == ((0.5, -1.0), (0.5, 0.0), (math.inf, 0.0))


def test_remembered_answers_are_bounded() -> None:
    from specwatch.sources.metrics import prom

    for _ in range(2 * prom.REMEMBERED):  # each full parse: new labels, new keys
        scrape = parse_metrics(GOOD)
        assert scrape.total("sglang:num_running_reqs") == 5.0
        assert scrape.histogram("vllm:inter_token_latency_seconds") is not None
    for memo in (prom._kept, prom._bounds):
        info = memo.cache_info()
        assert info.maxsize == prom.REMEMBERED
        assert info.currsize <= prom.REMEMBERED
