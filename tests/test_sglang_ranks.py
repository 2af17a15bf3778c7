"""SGLang as it really runs: data-parallel ranks, priority scheduling, labels that set a series
apart (issue 22), on hand-written expositions in SGLang's own format.

Shapes follow SGLang's ``scheduler_metrics_mixin.py`` ``init_metrics`` (scheduler labels
``engine_type``, ``model_name``, ``moe_ep_rank``, ``pp_rank``, ``tp_rank``, ``priority=""`` with
priority scheduling, ``dp_rank`` per data-parallel rank, then ``--extra-metric-labels``),
``metrics_collector.py`` (``QueueCount``: the per-priority breakdown next to the total;
``cuda_graph_passes_total{mode}``, ``realtime_tokens_total{mode}``) and the tokenizer manager's
histograms (one process for all ranks; ``_sum`` written before the buckets by prometheus_client's
multiprocess collector). Ground truth: EAGLE3, 3 steps, topk 1, 4 draft tokens, accept length
2.8, 29 ms per draft+verify pass, 2 running per rank.
"""

from __future__ import annotations

import pytest

from specwatch.core.server import Dialect, ServerInfo, SpecConfig, version_tuple
from specwatch.sources.dialects.base import WindowBuilder, dialect_for
from specwatch.sources.metrics.parse import parse_metrics

PASS_S = 0.029
ACCEPT = 2.8
RUNNING = 2
MODEL = "m"


def _at_least(version: str, floor: str) -> bool:
    return version_tuple(version) >= version_tuple(floor)


def _info(version: str) -> ServerInfo:
    spec = SpecConfig(
        enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=4, topk=1, source="t"
    )
    return ServerInfo(
        base_url="http://x",
        dialect=Dialect.SGLANG,
        version=version,
        model=MODEL,
        spec=spec,
        metrics_enabled=True,
    )


def _sched(rank: int | None, version: str, priority: str | None = None, **extra: str) -> str:
    labels: dict[str, str] = {"engine_type": "unified", "model_name": MODEL}
    labels.update({"pp_rank": "0", "tp_rank": str(rank or 0) if rank is not None else "0"})
    if _at_least(version, "0.5.23"):
        labels["moe_ep_rank"] = "0"
    if priority is not None:
        labels["priority"] = priority
    if rank is not None:
        labels["dp_rank"] = str(rank)
    labels.update(extra)
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def exposition(
    version: str,
    ranks: int,
    passes: list[int],
    *,
    usage: list[float] | None = None,
    hit: list[float] | None = None,
    running: list[int] | None = None,
    queued: list[int] | None = None,
    priority: bool = False,
    finished: int = 0,
    verify: int = 0,
    gauge_len: list[float] | None = None,
) -> str:
    """One ``/metrics`` body of a server with ``ranks`` data-parallel ranks (1: no ``dp_rank``)."""
    lines: list[str] = []
    ids: list[int | None] = list(range(ranks)) if ranks > 1 else [None]
    run = running or [RUNNING] * ranks
    waiting = queued or [0] * ranks
    gauges: dict[str, list[float]] = {
        "num_running_reqs": [float(x) for x in run],
        "num_queue_reqs": [float(x) for x in waiting],
        "token_usage": usage or [0.1] * ranks,
        "cache_hit_rate": hit or [0.0] * ranks,
        "spec_accept_length": gauge_len or [ACCEPT] * ranks,
        "gen_throughput": [RUNNING * ACCEPT / PASS_S] * ranks,
    }
    for name, values in gauges.items():
        lines.append(f"# HELP sglang:{name} {name}")
        lines.append(f"# TYPE sglang:{name} gauge")
        for i, rank in enumerate(ids):
            labels = _sched(rank, version, "" if priority else None)
            lines.append(f"sglang:{name}{{{labels}}} {float(values[i])}")
            if priority and name in ("num_running_reqs", "num_queue_reqs"):
                # QueueCount.by_priority: the same requests again, split by priority
                low = int(values[i]) // 2
                for prio, n in (("0", int(values[i]) - low), ("1", low)):
                    lines.append(f"sglang:{name}{{{_sched(rank, version, prio)}}} {float(n)}")
    lines.append("# HELP sglang:cuda_graph_passes_total passes")
    lines.append("# TYPE sglang:cuda_graph_passes_total counter")
    for i, rank in enumerate(ids):
        labels = _sched(rank, version, "" if priority else None)
        lines.append(
            f'sglang:cuda_graph_passes_total{{{labels},mode="decode_cuda_graph"}} '
            f"{float(passes[i])}"
        )
        lines.append(f'sglang:cuda_graph_passes_total{{{labels},mode="decode_none"}} 0.0')
        lines.append(f'sglang:cuda_graph_passes_total{{{labels},mode="prefill_none"}} 3.0')
    tok = (
        'engine_type="unified",model_name="m"' if _at_least(version, "0.5.23") else 'model_name="m"'
    )
    decoded = sum(p * RUNNING * ACCEPT for p in passes)
    lines.append("# TYPE sglang:realtime_tokens_total counter")
    lines.append(f'sglang:realtime_tokens_total{{{tok},mode="decode"}} {decoded}')
    lines.append(f'sglang:realtime_tokens_total{{{tok},mode="prefill_compute"}} 100.0')
    lines.append("# TYPE sglang:generation_tokens_total counter")
    lines.append(f"sglang:generation_tokens_total{{{tok}}} {float(finished * 280)}")
    lines.append("# TYPE sglang:num_requests_total counter")
    lines.append(f"sglang:num_requests_total{{{tok}}} {float(finished)}")
    if _at_least(version, "0.5.15"):  # the 0.5.15.post1 wheel has it
        lines.append("# TYPE sglang:spec_verify_calls_total counter")
        lines.append(f"sglang:spec_verify_calls_total{{{tok}}} {float(verify)}")
    chunks = sum(passes) * RUNNING
    lines.append("# TYPE sglang:inter_token_latency_seconds histogram")
    lines.append(f"sglang:inter_token_latency_seconds_sum{{{tok}}} {chunks * PASS_S}")
    for le, c in (("0.01", 0.0), ("0.02", chunks * ACCEPT), ("+Inf", chunks * ACCEPT)):
        lines.append(f'sglang:inter_token_latency_seconds_bucket{{{tok},le="{le}"}} {c}')
    lines.append(f"sglang:inter_token_latency_seconds_count{{{tok}}} {chunks * ACCEPT}")
    return "\n".join(lines) + "\n"


def _window(version: str, before: str, after: str, dt: float) -> WindowBuilder:
    b = WindowBuilder()
    dialect_for(Dialect.SGLANG).derive_window(
        b, parse_metrics(after), parse_metrics(before), dt, _info(version)
    )
    return b


@pytest.mark.parametrize("version", ["0.5.23", "0.5.9"])
@pytest.mark.parametrize("ranks", [2, 8])
def test_step_latency_with_dp_ranks_is_the_per_pass_time(version: str, ranks: int) -> None:
    # every rank steps in parallel: 100 passes of 29 ms in 2.9 s each (some one pass short)
    windows = [[100] * ranks, [100 - (i % 2) for i in range(ranks)], [99] * ranks]
    start = [1000 + 7 * i for i in range(ranks)]
    for steps in windows:
        before = exposition(version, ranks, start)
        end = [s + n for s, n in zip(start, steps, strict=True)]
        b = _window(version, before, exposition(version, ranks, end), 100 * PASS_S)
        step = b.values["step_latency_s"]
        assert step == pytest.approx(PASS_S, rel=0.02), (steps, b.sources["step_latency_s"])
        start = end


def test_step_latency_leaves_out_a_rank_idle_at_a_scrape() -> None:
    # rank 1 was idle when the window began: its passes cover part of the window only
    before = exposition("0.5.23", 2, [1000, 500], running=[2, 0])
    after = exposition("0.5.23", 2, [1100, 530], running=[2, 2])
    b = _window("0.5.23", before, after, 100 * PASS_S)
    assert b.values["step_latency_s"] == pytest.approx(PASS_S, rel=0.02)


@pytest.mark.parametrize("version", ["0.5.23", "0.5.9"])
def test_ratio_gauges_are_a_mean_over_dp_ranks(version: str) -> None:
    text = exposition(version, 2, [10, 10], usage=[0.09, 0.07], hit=[0.25, 0.25])
    b = _window(version, text, text, 1.0)
    assert b.values["kv_cache_usage"] == pytest.approx(0.08)
    assert 0.07 <= b.values["kv_cache_usage"] <= 0.09
    assert b.values["prefix_cache_hit_rate"] == pytest.approx(0.25)
    eight = exposition(version, 8, [10] * 8, usage=[0.5] * 8)
    assert _window(version, eight, eight, 1.0).values["kv_cache_usage"] == pytest.approx(0.5)


@pytest.mark.parametrize("ranks", [1, 2])
def test_priority_scheduling_counts_the_total_not_the_breakdown_too(ranks: int) -> None:
    text = exposition(
        "0.5.23", ranks, [10] * ranks, running=[2] * ranks, queued=[3] * ranks, priority=True
    )
    assert 'priority="0"' in text and 'priority=""' in text
    b = _window("0.5.23", text, text, 1.0)
    assert b.values["requests_running"] == 2 * ranks
    assert b.values["requests_waiting"] == 3 * ranks


def test_gauge_mean_leaves_out_series_set_apart() -> None:
    text = exposition("0.5.9", 1, [10], gauge_len=[2.8])
    extra = (
        "sglang:spec_accept_length{"
        + _sched(None, "0.5.9").replace('"unified"', '"prefill"')
        + "} 1.0\n"
        + "sglang:spec_accept_length{"
        + _sched(None, "0.5.9", lora="a")
        + "} 4.0\n"
    )
    text = text.replace("# HELP sglang:gen_throughput", extra + "# HELP sglang:gen_throughput")
    b = _window("0.5.9", text, text, 1.0)
    assert b.values["accept_length"] == pytest.approx(2.8)


def test_version_notes_follow_the_wheels() -> None:
    # 0.5.9 advances realtime_tokens_total every decode pass (no "log ticks" caveat) and has
    # no spec_verify_calls_total, which 0.5.15.post1 already has (issue 22 item 8)
    before = exposition("0.5.9", 1, [1000])
    b = _window("0.5.9", before, exposition("0.5.9", 1, [1100]), 100 * PASS_S)
    assert "gen_tok_s" in b.values and "log ticks" not in b.notes.get("gen_tok_s", "")
    assert "0.5.15.post1" in b.notes["lifetime_accept_length"]
    with_counter = exposition("0.5.15.post1", 1, [10], finished=2, verify=200)
    assert "spec_verify_calls_total" in with_counter
    b = _window("0.5.15.post1", with_counter, with_counter, 1.0)
    assert "lifetime_accept_length" in b.values
