"""summarize_ticks: per-GPU benchmark summaries from sampler ticks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.gpu_summary import summarize_ticks
from specwatch.core.values import to_jsonable
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock

IDLE, PWRCAP, THERMAL = 0x001, 0x004, 0x020

INVENTORY = GpuInventory(
    available=True,
    gpus=(
        GpuStatic(index=0, name="H100", max_sm_clock_mhz=1980, max_pcie_gen=5, max_pcie_width=16),
        GpuStatic(index=1, name="H100", max_sm_clock_mhz=1980, max_pcie_gen=5, max_pcie_width=16),
    ),
)


def sample(index: int, t: float, **kw: Any) -> GpuSample:
    return GpuSample(index=index, t=t, **kw)


def ticks_of(rows: list[list[GpuSample]]) -> list[GpuTick]:
    return [
        GpuTick(t=float(i), wall_time=1e9 + i, samples=tuple(row), cost_ms=1.0)
        for i, row in enumerate(rows)
    ]


def test_means_maxima_fractions_and_energy_per_token() -> None:
    rows = []
    masks = [PWRCAP, PWRCAP | THERMAL, 0, PWRCAP]
    for i, mask in enumerate(masks):
        rows.append(
            [
                sample(
                    0,
                    i,
                    sm_clock_mhz=1800 - 100 * i,
                    temp_c=60 + i,
                    hbm_temp_c=70 + 2 * i,
                    power_w=600.0 + 10 * i,
                    energy_j=1000.0 + 650.0 * i,
                    clock_event_reasons=mask,
                    util_gpu_pct=100,
                    pcie_gen=5 if i != 2 else 4,
                    pcie_width=16,
                    power_violation_ns=int(i * 0.5e9),
                    thermal_violation_ns=0,
                ),
                sample(1, i, sm_clock_mhz=1900, energy_j=None, clock_event_reasons=None),
            ]
        )
    gpu0, gpu1 = summarize_ticks(ticks_of(rows), INVENTORY, tokens=1300)
    assert gpu0.index == 0 and gpu0.name == "H100" and gpu0.samples == 4
    assert gpu0.sm_clock_mean_mhz == pytest.approx(1650.0)
    assert gpu0.sm_clock_min_mhz == 1500 and gpu0.board_max_sm_clock_mhz == 1980
    assert gpu0.temp_max_c == 63 and gpu0.hbm_temp_max_c == 76
    assert gpu0.power_mean_w == pytest.approx(615.0)
    assert dict(gpu0.reason_fractions) == {"pwrcap": 0.75, "thermal": 0.25}
    assert gpu0.reason_samples == 4
    assert (gpu0.pcie_gen, gpu0.pcie_width) == (4, 16)
    assert (gpu0.pcie_max_gen, gpu0.pcie_max_width) == (5, 16)
    assert gpu0.energy_j == pytest.approx(1950.0)
    assert gpu0.joules_per_token == pytest.approx(1.5)
    assert gpu0.power_violation_s == pytest.approx(1.5)
    assert gpu0.thermal_violation_s == 0.0
    assert gpu0.util_mean_pct == 100.0
    # GPU 1 lacks energy and reasons: None and empty, never an exception.
    assert gpu1.energy_j is None and gpu1.joules_per_token is None
    assert dict(gpu1.reason_fractions) == {} and gpu1.reason_samples == 0
    assert gpu1.temp_max_c is None and gpu1.power_mean_w is None


def test_no_ticks_and_no_tokens() -> None:
    summaries = summarize_ticks([], INVENTORY)
    assert [s.index for s in summaries] == [0, 1]
    first = summaries[0]
    assert first.samples == 0 and first.sm_clock_mean_mhz is None and first.energy_j is None
    assert first.pcie_gen is None and first.board_max_sm_clock_mhz == 1980
    assert summarize_ticks([], GpuInventory(available=False, reason="no NVML")) == ()
    assert summarize_ticks([], None) == ()


def test_idle_link_is_not_held_against_the_gpu() -> None:
    rows = [
        [sample(0, 0, util_gpu_pct=0, pcie_gen=1, pcie_width=16)],
        [sample(0, 1, util_gpu_pct=90, pcie_gen=5, pcie_width=8)],
        [sample(0, 2, util_gpu_pct=0, pcie_gen=1, pcie_width=4)],
    ]
    (gpu,) = summarize_ticks(ticks_of(rows), GpuInventory(True, gpus=(GpuStatic(0),)))
    assert (gpu.pcie_gen, gpu.pcie_width) == (5, 8)
    only_idle = summarize_ticks(ticks_of([rows[0], rows[2]]), GpuInventory(True))
    assert (only_idle[0].pcie_gen, only_idle[0].pcie_width) == (1, 16)
    # Without utilisation, the idle reason bit decides.
    by_reason = [
        [sample(0, 0, clock_event_reasons=IDLE, pcie_gen=1)],
        [sample(0, 1, clock_event_reasons=PWRCAP, pcie_gen=3)],
    ]
    assert summarize_ticks(ticks_of(by_reason), GpuInventory(True))[0].pcie_gen == 3


def test_lost_samples_and_counter_reset() -> None:
    rows = [
        [sample(0, 0, energy_j=100.0, sm_clock_mhz=1000)],
        [sample(0, 1, lost=True)],
        [sample(0, 2, energy_j=300.0, sm_clock_mhz=1200)],
        [sample(0, 3, energy_j=5.0)],
        [sample(0, 4, energy_j=55.0)],
    ]
    (gpu,) = summarize_ticks(ticks_of(rows), GpuInventory(True), tokens=10)
    assert gpu.samples == 4 and gpu.lost_samples == 1
    assert gpu.name is None and gpu.board_max_sm_clock_mhz is None
    assert gpu.sm_clock_mean_mhz == 1100.0
    # 100 -> 300, reset, 5 -> 55: the interval across the reset is left out.
    assert gpu.energy_j == pytest.approx(250.0)
    assert gpu.joules_per_token == pytest.approx(25.0)


def test_a_summary_is_orjson_ready() -> None:
    rows = [[sample(0, 0, clock_event_reasons=PWRCAP, energy_j=1.0)]]
    gpu = summarize_ticks(ticks_of(rows), INVENTORY)[0]
    data = orjson.loads(orjson.dumps(to_jsonable(gpu)))
    assert data["reason_fractions"] == {"pwrcap": 1.0}
    assert data["index"] == 0 and data["energy_j"] is None
    assert set(data) >= {"sm_clock_mean_mhz", "pcie_max_gen", "joules_per_token", "samples"}


def test_summary_over_a_simulated_power_capped_run() -> None:
    clock = ManualClock(0.0)
    gpus = SimGpus(2, seed=3)
    gpus.advance_to(0.0, load=1.0)
    sampler = GpuSampler(nvml=FakeNvml(gpus, clock=clock.now), clock=clock.now)
    inventory = sampler.open()
    ticks = []
    for _ in range(10):
        clock.advance(1.0)
        ticks.append(sampler.sample())
    sampler.stop()
    summaries = summarize_ticks(ticks, inventory, tokens=9000)
    for s in summaries:
        assert s.samples == 10
        assert s.reason_fractions.get("pwrcap") == 1.0
        assert s.power_mean_w == pytest.approx(700.0, abs=1.0)
        # Nine seconds between the first and last tick at the 700 W cap.
        assert s.energy_j == pytest.approx(9 * 700.0, rel=0.01)
        assert s.joules_per_token == pytest.approx(0.7, rel=0.01)
        assert s.sm_clock_mean_mhz is not None and s.sm_clock_mean_mhz < 1980
        assert (s.pcie_gen, s.pcie_max_gen) == (5, 5)
