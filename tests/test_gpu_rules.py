"""The GPU rules: one busy rule, one straggler, shared by the pane, the summaries and compare."""

from __future__ import annotations

from specwatch.bench.runner import busy_view
from specwatch.bench.snapshot import build_snapshot, validate
from specwatch.core import gpu as rules
from specwatch.core.compare import compare
from specwatch.core.gpu import IDLE_BIT, GpuSample, GpuTick
from specwatch.core.snapshot_records import Snapshot
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpus import STRAGGLER, gpu_rows
from tests.scene import scene_inventory
from tests.test_compare import STORY_AFTER, STORY_BEFORE, gpu_summary, synthetic_result

PWRCAP = 0x004


def test_busy_trusts_the_idle_reason_first_then_utilisation_then_pstate() -> None:
    s = GpuSample(index=0, t=0)
    assert rules.sample_busy(s)  # nothing says idle
    assert not rules.sample_busy(GpuSample(index=0, t=0, clock_event_reasons=IDLE_BIT))
    # The driver's own idle reason wins over a stale utilisation reading.
    assert not rules.sample_busy(
        GpuSample(index=0, t=0, clock_event_reasons=IDLE_BIT, util_gpu_pct=3)
    )
    assert rules.sample_busy(GpuSample(index=0, t=0, clock_event_reasons=PWRCAP))
    assert not rules.sample_busy(GpuSample(index=0, t=0, util_gpu_pct=0, pstate=0))
    assert rules.sample_busy(GpuSample(index=0, t=0, util_gpu_pct=40))
    assert not rules.sample_busy(GpuSample(index=0, t=0, pstate=8))
    assert not rules.sample_busy(GpuSample(index=0, t=0, lost=True))


def test_run_summaries_are_busy_when_idle_at_most_half_the_run() -> None:
    assert rules.summary_busy(gpu_summary(0, 1900.0, reasons={"idle": 0.5}))
    assert not rules.summary_busy(gpu_summary(0, 1900.0, reasons={"idle": 0.51}))


def test_the_runner_drops_idle_ticks_by_the_same_rule() -> None:
    busy = GpuSample(index=0, t=1, sm_clock_mhz=1900, util_gpu_pct=90)
    idle = GpuSample(index=0, t=2, sm_clock_mhz=345, util_gpu_pct=0)
    other = GpuSample(index=1, t=2, sm_clock_mhz=345, util_gpu_pct=0)
    view = busy_view([GpuTick(1, 0, (busy,), 0.1), GpuTick(2, 0, (idle, other), 0.1)])
    # GPU 0 worked, so its idle tick goes; GPU 1 never worked, so it keeps showing as idle.
    assert [[s.sm_clock_mhz for s in k.samples] for k in view] == [[1900], [345]]
    assert view[1].samples[0].index == 1


def test_straggler_ignores_idle_gpus_and_ties() -> None:
    hot = GpuSample(index=0, t=0, sm_clock_mhz=1800, temp_c=80, util_gpu_pct=99)
    cool = GpuSample(index=1, t=0, sm_clock_mhz=1900, temp_c=60, util_gpu_pct=99)
    idle = GpuSample(index=2, t=0, sm_clock_mhz=345, temp_c=30, util_gpu_pct=0)
    assert rules.sample_straggler([hot, cool, idle]) == 0
    assert rules.sample_straggler([hot]) is None
    assert rules.sample_straggler([hot, hot]) is None
    pace = rules.slowest(rules.pace_of_samples([hot]))
    assert pace is not None and pace.sm_clock_mhz == 1800.0


def test_pane_and_compare_name_the_same_straggler() -> None:
    # GPU 1 runs hottest, GPU 2 slowest; GPU 3 idles at its idle clock (not in the TP group).
    clocks = {0: 1950, 1: 1900, 2: 1830, 3: 345}
    temps = {0: 60, 1: 84, 2: 70, 3: 30}
    samples = tuple(
        GpuSample(
            index=i,
            t=1.0,
            sm_clock_mhz=clocks[i],
            temp_c=temps[i],
            clock_event_reasons=IDLE_BIT if i == 3 else PWRCAP,
        )
        for i in clocks
    )
    model = MonitorModel()
    model.set_inventory(scene_inventory(4))
    model.add_tick(GpuTick(t=1.0, wall_time=0.0, samples=samples, cost_ms=0.1))
    marked = [r["gpu"].text for r in gpu_rows(model) if r["gpu"].text.endswith(STRAGGLER)]

    result = synthetic_result(STORY_BEFORE, (1950.0, 1900.0, 1830.0, 345.0))
    snap = build_snapshot(result)
    for run in [*snap["runs"], snap["overall"]]:
        for g in run["gpus"]:
            g["temp_max_c"] = temps[g["index"]]
            if g["index"] == 3:
                g["reason_fractions"] = {"idle": 1.0}
    a = Snapshot.from_dict(validate(snap))
    b = Snapshot.from_dict(
        validate(build_snapshot(synthetic_result(STORY_AFTER, (1950.0, 1900.0, 1830.0, 345.0))))
    )
    c = compare(a, b)
    assert marked == [f"2{STRAGGLER}"]
    assert c.attribution.straggler_a == 2 == rules.sample_straggler(samples)
    assert c.attribution.clock_a_mhz is not None and round(c.attribution.clock_a_mhz) == 1830


def test_clock_deficit_link_and_power_rules() -> None:
    assert rules.clock_deficit(1485, 1980) == 0.25
    assert rules.clock_deficit(None, 1980) is None
    assert rules.clock_fraction(1980, None) is None
    # A narrower link always counts; a lower generation only under load.
    assert rules.link_degraded(5, 8, 5, 16, busy=False)
    assert not rules.link_degraded(1, 16, 5, 16, busy=False)
    assert rules.link_degraded(4, 16, 5, 16, busy=True)
    assert not rules.link_degraded(5, 16, 5, 16, busy=True)
    assert rules.near_power_limit(390.0, 400.0)
    assert not rules.near_power_limit(380.0, 400.0)
    assert not rules.near_power_limit(390.0, None)
