"""The one aggregation rule of ``sources/metrics/prom.py``, and vLLM's ``engine`` label under it.

vLLM writes one series per data-parallel engine (``engine="0"``, ``engine="1"``, ...: the
``labelnames=["model_name", "engine"]`` of ``vllm/v1/metrics/loggers.py``); SGLang one per
``dp_rank``. Both are parallel schedulers.
"""

from __future__ import annotations

import pytest

from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.sources.dialects.base import WindowBuilder, dialect_for
from specwatch.sources.metrics import prom as agg
from specwatch.sources.metrics.parse import parse_metrics


def test_rule_counts_ratios_breakdowns_and_series_set_apart() -> None:
    scrape = parse_metrics(
        "# TYPE x gauge\n"
        'x{dp_rank="0",engine_type="unified",priority="",tp_rank="0"} 2.0\n'
        'x{dp_rank="0",engine_type="unified",priority="",tp_rank="1"} 2.0\n'
        'x{dp_rank="0",engine_type="unified",priority="0",tp_rank="0"} 2.0\n'
        'x{dp_rank="1",engine_type="unified",priority="",tp_rank="2"} 4.0\n'
        'x{dp_rank="1",engine_type="prefill",priority="",tp_rank="2"} 9.0\n'
        "# TYPE r gauge\n"
        'r{dp_rank="0"} 0.2\n'
        'r{dp_rank="1"} 0.4\n'
        'r{dp_rank="1",lora="a"} 0.9\n'
        'r{dp_rank="2"} NaN\n'
    )
    assert agg.count(scrape, "x") == 6.0
    assert agg.per_scheduler(scrape, "x") == {("0", ""): 2.0, ("1", ""): 4.0}
    assert agg.ratio_mean(scrape, "r") == pytest.approx(0.3)
    assert agg.count(scrape, "missing") is None
    only_breakdown = parse_metrics('# TYPE q gauge\nq{priority="0"} 1.0\nq{priority="1"} 2.0\n')
    assert agg.count(only_breakdown, "q") == 3.0


def test_vllm_kv_usage_is_a_mean_over_engines_counts_a_sum() -> None:
    text = (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 3.0\n'
    )
    info = ServerInfo(
        base_url="http://x",
        dialect=Dialect.VLLM,
        version="0.20.0",
        model="m",
        spec=SpecConfig(enabled=False),
        metrics_enabled=True,
    )
    b = WindowBuilder()
    dialect_for(Dialect.VLLM).derive_window(b, parse_metrics(text), None, 1.0, info)
    assert b.values["kv_cache_usage"] == pytest.approx(0.4)
    assert b.values["requests_running"] == 5.0
