"""The packed GPU tick history: bounded, and ticks come back as they went in."""

from __future__ import annotations

from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.gpu_reader import GpuTickHistory
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock


def _sampler(count: int = 8, history: int = 50) -> tuple[GpuSampler, ManualClock]:
    clock = ManualClock(100.0)
    gpus = SimGpus(count, seed=1, start_t=clock.now())
    gpus.advance_to(clock.now(), load=0.9)
    return GpuSampler(nvml=FakeNvml(gpus, clock=clock.now), clock=clock.now, history=history), clock


def test_sampled_ticks_round_trip_packed() -> None:
    sampler, clock = _sampler()
    ticks = []
    for _ in range(5):
        clock.advance(1.0)
        ticks.append(sampler.sample())
    assert sampler.history.snapshot() == ticks
    assert sampler.history.last(2) == ticks[-2:]
    assert sampler.history.latest is ticks[-1]
    # the ticks were packed, not kept as objects
    assert all(not isinstance(item, GpuTick) for item in sampler.history._items)


def test_history_is_bounded_and_shares_missing_maps() -> None:
    sampler, clock = _sampler(history=10)
    for _ in range(40):
        clock.advance(1.0)
        sampler.sample()
    assert len(sampler.history) == 10
    items = list(sampler.history._items)
    assert items[0][1] is items[-1][1]  # type: ignore[index]
    assert [t.t for t in sampler.history] == [131.0 + i for i in range(10)]


def test_unpackable_tick_is_kept_as_it_came() -> None:
    history = GpuTickHistory(3)
    odd = GpuTick(
        t=1.0,
        wall_time=2.0,
        samples=(GpuSample(index=0, t=1.0, temp_c=10**9, missing={"fan_pct": "n/s"}),),
        cost_ms=0.5,
    )
    plain = GpuTick(t=2.0, wall_time=3.0, samples=(GpuSample(index=0, t=2.0),), cost_ms=0.1)
    history.append(odd)
    history.append(plain)
    assert history.snapshot() == [odd, plain]
    assert history.since(lambda tick: tick.t >= 2.0) == [plain]
    history.clear()
    assert not history and history.latest is None
