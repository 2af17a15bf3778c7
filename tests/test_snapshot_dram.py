"""Snapshots carry the GPUs' DRAM activity (dcgm-exporter's profiling field), so ``compare``
knows a decode is memory-bound as the live verdict does: issue 26's stories (a) and (c) between
two benchmark snapshots; older snapshots (no DRAM reading) keep the SM clock rule."""

from __future__ import annotations

import dataclasses

from specwatch.bench.snapshot import build_snapshot, validate
from specwatch.core.compare import compare
from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.core.gpu_summary import summarize_ticks
from specwatch.core.outcomes import Outcome
from specwatch.core.snapshot_figures import figures
from specwatch.core.snapshot_records import Snapshot
from tests.test_compare import synthetic_result

BEFORE = [89.1, 88.7, 89.4, 88.9, 89.2]
AFTER = [round(v * 0.92, 2) for v in BEFORE]


def _snap(tok_s: list[float], clock: float, dram: float | None) -> Snapshot:
    result = synthetic_result(tok_s, (clock, clock))
    gpus = tuple(
        dataclasses.replace(g, mem_clock_mean_mhz=2619.0, dram_active_mean=dram)
        for g in result.gpus
    )
    runs = tuple(dataclasses.replace(r, gpus=gpus) for r in result.runs)
    result = dataclasses.replace(result, gpus=gpus, runs=runs)
    return Snapshot.from_dict(validate(build_snapshot(result, ["specwatch", "bench"])))


def test_the_gpu_summary_keeps_the_mean_dram_activity() -> None:
    ticks = [
        GpuTick(t, t, (GpuSample(0, t, sm_clock_mhz=1980, dram_active=d),), 0.1)
        for t, d in ((1.0, 0.7), (2.0, 0.9))
    ]
    (summary,) = summarize_ticks(ticks, None)
    assert summary.dram_active_mean is not None and abs(summary.dram_active_mean - 0.8) < 1e-9


def test_story_a_between_snapshots_is_not_gpu_state() -> None:
    a, b = _snap(BEFORE, 1980.0, 0.8), _snap(AFTER, 1980.0 * 0.92, 0.8 * 0.92)
    assert figures(a).dram_active == 0.8
    assert compare(a, b).verdict is Outcome.CODE
    old_a, old_b = _snap(BEFORE, 1980.0, None), _snap(AFTER, 1980.0 * 0.92, None)
    assert figures(old_a).dram_per_token is None
    assert compare(old_a, old_b).verdict is Outcome.GPU


def test_story_c_between_snapshots_is_load() -> None:
    a, b = _snap(BEFORE, 1980.0, 0.8), _snap(AFTER, 1980.0, 0.8)
    c = compare(a, b)
    assert c.verdict is Outcome.LOAD, c.reason
    assert "DRAM bytes per token +8.7% (more work per token)" in c.reason


def test_a_snapshot_reference_for_the_live_verdict_carries_the_dram_figures() -> None:
    from specwatch.session.verdict_state import snapshot_reference

    snap = _snap(BEFORE, 1980.0, 0.8)
    ref = snapshot_reference(snap, "a.json").figures
    assert ref.dram_active == 0.8 and ref.dram_per_token == figures(snap).dram_per_token
    assert ref.dram_per_token is not None
