"""compare() on synthetic snapshots: the three verdicts, the rule's edges, the table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from specwatch.bench.aggregate import overall_of
from specwatch.bench.snapshot import build_snapshot, validate
from specwatch.core.compare import (
    VERDICT_CODE,
    VERDICT_GPU,
    VERDICT_NONE,
    VERDICT_UNKNOWN,
    VERDICTS,
    compare,
)
from specwatch.core.gpu import GpuInventory, GpuStatic, SystemInfo
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.outcomes import Outcome
from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.core.snapshot_figures import straggler_clock
from specwatch.core.snapshot_records import (
    BenchConfig,
    BenchResult,
    RunResult,
    SeriesPoint,
    Snapshot,
)


def gpu_summary(
    index: int,
    clock: float,
    *,
    temp: int = 60,
    reasons: Mapping[str, float] | None = None,
    power: float = 500.0,
    pcie: tuple[int, int] = (5, 16),
) -> GpuRunSummary:
    return GpuRunSummary(
        index=index,
        name="Simulated H100 80GB HBM3",
        sm_clock_mean_mhz=clock,
        sm_clock_min_mhz=int(clock) - 15,
        board_max_sm_clock_mhz=1980,
        temp_max_c=temp,
        hbm_temp_max_c=temp + 8,
        power_mean_w=power,
        reason_fractions=dict(reasons or {}),
        pcie_gen=pcie[0],
        pcie_width=pcie[1],
        pcie_max_gen=5,
        pcie_max_width=16,
        energy_j=power * 2.0,
        joules_per_token=power * 2.0 / 2048,
        samples=20,
    )


def synthetic_result(
    tok_s: Sequence[float],
    clocks: Sequence[float] | None = (1980.0, 1975.0),
    *,
    temp: int = 60,
    reasons: Mapping[str, float] | None = None,
    version: str = "0.5.23",
    launch_args: Mapping[str, Any] | None = None,
    interrupted: bool = False,
    label: str | None = None,
    max_tokens: int = 2048,
) -> BenchResult:
    """A BenchResult as the runner would return it, with chosen tok/s and GPU clocks."""
    runs = []
    t = 0.0
    for i, rate in enumerate(tok_s, start=1):
        wall = 2048 / rate
        gpus = tuple(
            gpu_summary(k, c, temp=temp, reasons=reasons) for k, c in enumerate(clocks or ())
        )
        runs.append(
            RunResult(
                index=i,
                warmup=False,
                prompt_index=i,
                streams=1,
                completion_tokens=2048,
                prompt_tokens=30,
                wall_s=wall,
                tok_s=rate,
                decode_tok_s=rate * 1.01,
                ttft_s=0.05,
                steps=700,
                step_latency_mean_s=wall / 700,
                step_latency_p50_s=wall / 700,
                step_latency_p90_s=wall / 650,
                step_latency_p99_s=wall / 600,
                tokens_per_step=2.9,
                accept_length=2.9,
                draft_acceptance_rate=0.63,
                counts_exact=True,
                count_source="meta_info.completion_tokens",
                finish_reason="length",
                t_start=t,
                t_end=t + wall,
                server_counters={"sglang:generation_tokens_total": 2048.0},
                gpus=gpus,
            )
        )
        t += wall + 0.1
    inventory = GpuInventory(
        available=clocks is not None,
        reason=None if clocks is not None else "NVML unavailable: NVML Shared Library Not Found",
        system=SystemInfo("580.65.06", "12.580.65.06", "13.0"),
        gpus=tuple(
            GpuStatic(index=k, name="Simulated H100 80GB HBM3", max_sm_clock_mhz=1980)
            for k in range(len(clocks or ()))
        ),
    )
    server = ServerInfo(
        base_url="http://127.0.0.1:8000",
        dialect=Dialect.SGLANG,
        version=version,
        model="sim/Llama-3.1-8B-Instruct",
        spec=SpecConfig(enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=4),
        metrics_enabled=True,
        launch_args=dict(launch_args or {"tp_size": 8}),
    )
    all_gpus = tuple(
        gpu_summary(k, c, temp=temp, reasons=reasons) for k, c in enumerate(clocks or ())
    )
    return BenchResult(
        config=BenchConfig(runs=len(tok_s), label=label, max_tokens=max_tokens),
        server=server,
        inventory=inventory,
        prompts_source="builtin (seed 0)",
        started_at=1_780_000_000.0,
        duration_s=t,
        warmups=(),
        runs=tuple(runs),
        overall=overall_of(runs),
        gpus=all_gpus,
        series=(SeriesPoint(0.0, 80.0, "run", 1),),
        interrupted=interrupted,
        error=None,
    )


def snap(
    tok_s: Sequence[float], clocks: Sequence[float] | None = (1980.0, 1975.0), **kw: Any
) -> Snapshot:
    return Snapshot.from_dict(snap_dict(tok_s, clocks, **kw))


def snap_dict(
    tok_s: Sequence[float], clocks: Sequence[float] | None = (1980.0, 1975.0), **kw: Any
) -> dict[str, Any]:
    return validate(build_snapshot(synthetic_result(tok_s, clocks, **kw), ["specwatch", "bench"]))


STORY_BEFORE = [89.1, 88.7, 89.4, 88.9, 89.2]
STORY_AFTER = [82.4, 82.5, 82.5, 84.0, 82.6]


def test_story_hot_gpus_explain_the_drop() -> None:
    cold = snap(STORY_BEFORE, (1980.0, 1965.0), temp=58)
    # One GPU hot and power-capped: it paces every tensor-parallel step.
    hot = snap(STORY_AFTER, (1950.0, 1830.0), temp=84, reasons={"pwrcap": 0.9})
    c = compare(cold, hot)
    assert c.verdict == VERDICT_GPU
    assert c.beyond_noise
    assert c.change == pytest.approx(82.8 / 89.06 - 1)
    assert c.attribution.expected_ratio == pytest.approx(1830.0 / 1965.0)
    assert c.attribution.straggler_a == 1 and c.attribution.straggler_b == 1
    assert c.attribution.share is not None and c.attribution.share > 0.75
    assert "1965 → 1830 MHz" in c.reason
    rows = {r.name: r for r in c.rows}
    assert rows["time under pwrcap (worst GPU)"].b == "90%"
    assert rows["time under pwrcap (worst GPU)"].differs
    assert rows["GPU temperature (max)"].a == "58 °C"


def test_same_clocks_slower_code_is_not_the_gpu() -> None:
    before = snap(STORY_BEFORE, version="0.5.22")
    after = snap(STORY_AFTER, version="0.5.23")
    c = compare(before, after)
    assert c.verdict == VERDICT_CODE
    assert c.attribution.expected_ratio == pytest.approx(1.0)
    rows = {r.name: r for r in c.rows}
    assert rows["server version"].differs and rows["server version"].b == "0.5.23"
    assert "do not account" in c.reason


def test_noise_is_no_change() -> None:
    a = snap([82.4, 82.5, 82.5, 84.0, 82.6])
    b = snap([82.6, 82.9, 82.3, 83.1, 82.5], (1930.0, 1900.0))
    c = compare(a, b)
    assert c.verdict == VERDICT_NONE
    assert not c.beyond_noise
    assert c.change_low is not None and c.change_low < 0 < (c.change_high or 0)


def test_tiny_but_significant_change_is_below_the_practical_threshold() -> None:
    a = snap([100.0, 100.01, 99.99, 100.0])
    b = snap([99.5, 99.51, 99.49, 99.5])
    c = compare(a, b)
    assert c.welch is not None and c.welch.significant
    assert c.verdict == VERDICT_NONE
    assert "smaller than 2%" in c.reason


def test_clock_drop_bigger_than_tok_s_drop_still_explains_it() -> None:
    # Memory-bound decode: a 10% clock drop costs only ~5% tok/s.
    a = snap([100.0, 100.5, 99.5, 100.2], (1980.0, 1980.0))
    b = snap([95.0, 95.3, 94.8, 95.1], (1782.0, 1782.0))
    assert compare(a, b).verdict == VERDICT_GPU


def test_clock_change_accounts_for_too_little() -> None:
    # Clocks -3%, tok/s -15%: most of the drop is something else.
    a = snap([100.0, 100.5, 99.5, 100.2], (1980.0, 1980.0))
    b = snap([85.0, 85.3, 84.8, 85.1], (1920.0, 1920.0))
    c = compare(a, b)
    assert c.verdict == VERDICT_CODE
    assert c.attribution.share is not None and 0.1 < c.attribution.share < 0.3


def test_opposite_directions_are_not_explained() -> None:
    a = snap([100.0, 100.5, 99.5, 100.2], (1800.0, 1800.0))
    b = snap([90.0, 90.5, 89.5, 90.2], (1980.0, 1980.0))  # faster clocks, slower tok/s
    c = compare(a, b)
    assert c.verdict == VERDICT_CODE
    assert c.attribution.share is not None and c.attribution.share < 0


def test_speedup_explained_by_cooler_gpus() -> None:
    a = snap(STORY_AFTER, (1830.0, 1830.0))
    b = snap(STORY_BEFORE, (1975.0, 1980.0))
    assert compare(a, b).verdict == VERDICT_GPU


def test_no_gpu_data_leaves_the_cause_unknown() -> None:
    a = snap(STORY_BEFORE, None)
    b = snap(STORY_AFTER, None)
    c = compare(a, b, a_name="a.json", b_name="b.json")
    assert c.verdict == VERDICT_UNKNOWN
    assert c.attribution.expected_ratio is None
    assert "no SM clock readings in a.json and b.json" in c.reason


def test_idle_gpus_outside_the_tp_group_are_not_stragglers() -> None:
    s = build_snapshot(synthetic_result(STORY_BEFORE, (1900.0, 1950.0)))
    for run in s["runs"]:
        run["gpus"].append(
            {
                **run["gpus"][0],
                "index": 7,
                "sm_clock_mean_mhz": 345.0,
                "reason_fractions": {"idle": 1.0},
            }
        )
    clock, index = straggler_clock(Snapshot.from_dict(validate(s)))
    assert clock == pytest.approx(1900.0) and index == 0


def test_single_runs_have_no_interval_and_say_so() -> None:
    c = compare(snap([89.0]), snap([82.0], (1700.0, 1700.0)))
    assert c.welch is None and c.change_low is None
    assert any("no confidence interval" in n for n in c.notes)
    assert c.verdict == VERDICT_GPU


def test_interrupted_and_unlike_runs_are_noted() -> None:
    a = snap(STORY_BEFORE[:3], interrupted=True)
    b = snap(STORY_AFTER, max_tokens=512)
    c = compare(a, b)
    assert any("interrupted: 3 of 3 runs" in n for n in c.notes)
    assert any(n.startswith("max tokens differs") for n in c.notes)


def test_launch_arg_and_spec_differences_are_rows() -> None:
    a = snap(STORY_BEFORE, launch_args={"tp_size": 8, "cuda_graph_max_bs": 8})
    b = snap(STORY_BEFORE, launch_args={"tp_size": 8, "cuda_graph_max_bs": 4, "new": True})
    c = compare(a, b)
    rows = {r.name: r for r in c.rows}
    graphs = rows["CUDA graph max batch"]
    assert (graphs.section, graphs.a, graphs.b, graphs.differs) == ("launch", "8", "4", True)
    assert rows["new"].a == "—" and rows["new"].b == "on" and rows["new"].differs
    assert rows["tensor parallel"].a == "8" and not rows["tensor parallel"].differs
    assert c.verdict is Outcome.CONFIG and c.verdict.exit_code == 8
    assert c.reason.startswith(
        "configuration changed: CUDA graph max batch 8 → 4 (cuda_graph_max_bs), new — → on;"
    )


def test_where_and_when_a_server_started_is_not_a_difference() -> None:
    a = snap(STORY_BEFORE, launch_args={"tp_size": 8, "port": 30000, "startup_time": 1.0})
    b = snap(STORY_BEFORE, launch_args={"tp_size": 8, "port": 30001, "startup_time": 2.0})
    c = compare(a, b)
    assert not [r for r in c.rows if r.section in ("server", "launch") and r.differs]
    assert c.verdict is Outcome.NO_CHANGE and not c.configuration


def test_small_numeric_wobbles_are_not_marked() -> None:
    a = snap(STORY_BEFORE, (1980.0, 1975.0))
    b = snap(STORY_BEFORE, (1978.0, 1971.0))
    rows = {r.name: r for r in compare(a, b).rows}
    assert rows["SM clock, all GPUs (mean)"].a != rows["SM clock, all GPUs (mean)"].b
    assert not rows["SM clock, all GPUs (mean)"].differs


def test_verdict_is_always_one_of_three_and_to_dict_is_plain() -> None:
    import orjson

    for b in (STORY_AFTER, STORY_BEFORE, [1.0, 1.0]):
        c = compare(snap(STORY_BEFORE), snap(b, (1000.0, 1000.0)))
        assert c.verdict in VERDICTS
        d = orjson.loads(orjson.dumps(c.to_dict()))
        assert d["verdict"] == c.verdict
        assert isinstance(d["rows"], list) and d["rows"]
        assert all(math.isfinite(x) for x in d["tok_s"]["change_ci"] if x is not None)
