"""Clock policy: read from the (fake) NVML, N/A where unsupported, in probe JSON, snapshots, the
pane flag, and compare's note about two snapshots under different policies."""

from __future__ import annotations

import dataclasses

from specwatch.bench.snapshot import build_snapshot, validate
from specwatch.core.clocks import UNLOCKED_LINE, any_unlocked, policy_difference, policy_of
from specwatch.core.compare import compare
from specwatch.core.gpu import GpuStatic
from specwatch.core.snapshot_records import Snapshot
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.nvml.sampler import GpuSampler
from specwatch.sources.probe_gpus import gpus_document
from tests.sim_fixtures import ManualClock
from tests.test_compare import synthetic_result

H100 = GpuStatic(
    index=0,
    persistence_mode=True,
    power_default_limit_w=700.0,
    power_limit_w=700.0,
    app_sm_clock_mhz=1980,
    default_app_sm_clock_mhz=1980,
    app_mem_clock_mhz=2619,
    default_app_mem_clock_mhz=2619,
)


def _sampler(supported: bool = True) -> tuple[GpuSampler, FakeNvml]:
    clock = ManualClock(100.0)
    gpus = SimGpus(2, seed=1, start_t=clock.now())
    fake = FakeNvml(gpus, clock=clock.now)
    fake.policy_supported = supported
    return GpuSampler(nvml=fake, clock=clock.now), fake


def test_policy_reads_from_the_fake_nvml() -> None:
    sampler, fake = _sampler()
    inv = sampler.open()
    sampler.stop()
    for g in inv.gpus:
        assert g.app_mem_clock_mhz == fake.gpus.spec.max_mem_clock_mhz
        assert g.default_app_sm_clock_mhz == fake.gpus.spec.max_sm_clock_mhz
        assert g.default_app_mem_clock_mhz == fake.gpus.spec.max_mem_clock_mhz
        assert g.locked_sm_clock_mhz is None
        assert policy_of(g).unlocked and policy_of(g).flag == ""
    assert any_unlocked(inv.gpus)


def test_unsupported_policy_reads_are_markers_not_exceptions() -> None:
    sampler, _ = _sampler(supported=False)
    inv = sampler.open()
    sampler.stop()
    assert inv.available
    for g in inv.gpus:
        assert g.persistence_mode is None and g.default_app_sm_clock_mhz is None
        assert g.missing["default_app_sm_clock_mhz"].startswith("n/s")
        assert g.missing["persistence_mode"].startswith("n/s")
        assert g.name is not None  # the rest of the board is still read
    entries, _ = gpus_document(inv, None)
    assert entries[0]["missing"]["app_mem_clock_mhz"].startswith("n/s")
    assert "clock_policy" in entries[0]


def test_policy_words_and_flags() -> None:
    assert policy_of(H100).text() == "unlocked (boost)"
    locked = dataclasses.replace(H100, locked_sm_clock_mhz=1500)
    assert policy_of(locked).flag == "lock" and not policy_of(locked).unlocked
    assert "locked SM 1500 MHz" in policy_of(locked).text()
    app = dataclasses.replace(H100, app_sm_clock_mhz=1410)
    assert policy_of(app).flag == "app" and not policy_of(app).unlocked
    capped = dataclasses.replace(H100, power_limit_w=500.0)
    assert policy_of(capped).flag == "cap" and "power cap 500/700 W" in policy_of(capped).text()
    assert policy_of(capped).unlocked  # a cap still lets boost follow temperature
    assert policy_difference([H100], [H100]) is None
    assert policy_difference([H100], [locked]) is not None
    assert UNLOCKED_LINE.startswith("boost follows temperature")


def _snap(statics: tuple[GpuStatic, ...]) -> Snapshot:
    result = synthetic_result([89.1, 88.7, 89.4], (1980.0, 1975.0))
    assert result.inventory is not None
    result = dataclasses.replace(
        result, inventory=dataclasses.replace(result.inventory, gpus=statics)
    )
    return Snapshot.from_dict(validate(build_snapshot(result, ["specwatch", "bench"])))


def test_snapshot_keeps_the_policy_and_compare_flags_a_difference() -> None:
    free = (H100, dataclasses.replace(H100, index=1))
    locked = tuple(dataclasses.replace(g, locked_sm_clock_mhz=1500) for g in free)
    a, b = _snap(free), _snap(locked)
    assert b.gpu_environment.gpus[0].locked_sm_clock_mhz == 1500
    assert a.gpu_environment.gpus[0].default_app_mem_clock_mhz == 2619
    c = compare(a, b)
    (note,) = [n for n in c.notes if "clock policies" in n]
    assert "A unlocked (boost)" in note and "B locked SM 1500 MHz" in note
    assert not [n for n in compare(a, a).notes if "clock policies" in n]


def test_dcgm_gpus_show_the_same_policy_as_nvml() -> None:
    """The simulated exporter serves application clocks, persistence and the power limits; the
    ``--dcgm`` GPUs then carry the same ``app``/``cap`` policy, in the same words, as NVML's."""
    from specwatch.sim.dcgm_exporter import render_dcgm
    from specwatch.sources.dcgm.parse import parse_dcgm, to_static

    sampler, fake = _sampler()
    fake.gpus.set_power_limit(500.0, index=0)
    fake.gpus.set_app_clocks((1410, 2619), index=1)
    nvml = sampler.open().gpus
    sampler.stop()
    exposition = parse_dcgm(render_dcgm(fake.gpus, 100.0))
    dcgm = tuple(to_static(g, i) for i, g in enumerate(exposition.gpus))
    assert [policy_of(g).flag for g in nvml] == ["cap", "app"]
    assert [policy_of(g).flag for g in dcgm] == ["cap", "app"]
    assert [policy_of(g).text() for g in dcgm] == [policy_of(g).text() for g in nvml]
    assert "application SM clock 1410 MHz" in policy_of(dcgm[1]).text()
    assert dcgm[0].persistence_mode is True and dcgm[0].app_mem_clock_mhz == 2619
    assert dcgm[0].missing["locked_sm_clock_mhz"].startswith("n/s")
    assert policy_difference(nvml, dcgm) is None
