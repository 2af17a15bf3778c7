"""DcgmGpuSource: polling, interval inference, violation folding, real loopback HTTP against the
simulated exporter, and agreement with NVML-fake for the same simulated GPUs."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from specwatch.sim.dcgm_exporter import DcgmQuirks, SimDcgmExporter, render_dcgm
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.dcgm.fetch import DcgmFetchError, fetch_metrics
from specwatch.sources.dcgm.parse import BLANK, NOT_EXPORTED
from specwatch.sources.dcgm.source import DcgmGpuSource
from specwatch.sources.nvml.sampler import GpuSampler
from tests.sim_fixtures import ManualClock


def _expo(sm: int, power_violation_ns: int, reasons: int = 0, host: str = "n1") -> str:
    labels = f'gpu="0", UUID="GPU-x", Hostname="{host}", modelName="Sim"'
    return (
        f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} {sm}\n"
        f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{labels}}} {reasons}\n"
        f"DCGM_FI_DEV_POWER_VIOLATION{{{labels}}} {power_violation_ns}\n"
    )


class Scripted:
    """A fetch that answers from a list per URL and records what was asked."""

    def __init__(self, bodies: dict[str, list[str | Exception]]) -> None:
        self.bodies = bodies
        self.asked: list[str] = []

    def __call__(self, url: str, timeout_s: float, max_bytes: int) -> str:
        self.asked.append(url)
        queue = self.bodies[url]
        body = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(body, Exception):
            raise body
        return body


def test_collection_interval_inferred_and_warned_and_violations_folded() -> None:
    clock = ManualClock(0.0)
    url = "http://n1:9400/metrics"
    # Values change every 5 polls (a 5 s collection under a 1 s view); between the second and
    # third collections 1 s of power violation happened while the exported reasons show none.
    bodies: list[str | Exception] = []
    for collection in range(5):
        violation = 1_000_000_000 if collection >= 3 else 0  # ns
        bodies += [_expo(1900 + collection, violation)] * 5
    fetch = Scripted({url: bodies})
    source = DcgmGpuSource("n1", interval_s=1.0, clock=clock.now, fetch=fetch)
    inv = source.open()
    assert inv.available and len(inv.gpus) == 1 and inv.gpus[0].name == "Sim"
    assert source.collection_interval_s is None
    ticks = [source.latest]
    for _ in range(16):
        clock.advance(1.0)
        ticks.append(source.sample())
    assert fetch.asked[0] == url
    assert source.collection_interval_s == pytest.approx(5.0)
    warning = source.collection_warning
    assert warning is not None and "every 5 s" in warning and "-c 1000" in warning
    # t=15: the collection where the violation counter grew by 1 s over a 5 s collection.
    folded = ticks[15]
    assert folded is not None
    assert folded.samples[0].clock_event_reasons == 0x004
    assert source.latest_extras[0].exported_reasons == 0
    assert source.latest_extras[0].violation_share["power"] == pytest.approx(0.2)
    before = ticks[14]
    assert before is not None and before.samples[0].clock_event_reasons == 0


def test_fast_exporter_gives_no_warning() -> None:
    clock = ManualClock(0.0)
    bodies: list[str | Exception] = [_expo(1000 + i, 0) for i in range(10)]
    source = DcgmGpuSource("n1", clock=clock.now, fetch=Scripted({dcgm(): bodies}))
    source.open()
    for _ in range(6):
        clock.advance(1.0)
        source.sample()
    assert source.collection_interval_s == pytest.approx(1.0)
    assert source.collection_warning is None


def test_unchanged_exporter_warned_before_an_estimate() -> None:
    clock = ManualClock(0.0)
    source = DcgmGpuSource("n1", clock=clock.now, fetch=Scripted({dcgm(): [_expo(1, 0)]}))
    source.open()
    for _ in range(4):
        clock.advance(1.0)
        source.sample()
    assert source.collection_interval_s is None
    assert "unchanged for 4 s" in (source.collection_warning or "")


def dcgm(host: str = "n1") -> str:
    return f"http://{host}:9400/metrics"


def test_several_nodes_numbered_in_order_and_a_failing_one_reported() -> None:
    clock = ManualClock(0.0)
    two = _expo(1500, 0, host="alpha") + _expo(1400, 0, host="alpha").replace(
        'gpu="0", UUID="GPU-x"', 'gpu="1", UUID="GPU-y"'
    )
    fetch = Scripted(
        {
            dcgm("a"): [two],
            dcgm("b"): [_expo(1300, 0, host="beta"), DcgmFetchError("connection refused")],
        }
    )
    source = DcgmGpuSource(["a", "b:9400"], clock=clock.now, fetch=fetch)
    inv = source.open()
    assert inv.available and [g.index for g in inv.gpus] == [0, 1, 2]
    assert [source.node_of(i) for i in range(3)] == ["alpha", "alpha", "beta"]
    assert [i.node_gpu for i in source.gpu_info] == [0, 1, 0]
    clock.advance(1.0)
    tick = source.sample()
    assert tick.error == "beta: connection refused"
    assert [s.sm_clock_mhz for s in tick.samples] == [1500, 1400, None]
    assert tick.samples[2].missing["sm_clock_mhz"] == "N/A: beta: connection refused"
    assert source.endpoints[1].error == "connection refused"
    assert source.missing_fields(0)["pcie_gen"].startswith(NOT_EXPORTED)


def test_unreachable_exporter_gives_an_unavailable_inventory() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = DcgmGpuSource(f"127.0.0.1:{port}", timeout_s=2.0)
    inv = source.open()
    assert not inv.available
    assert inv.reason is not None and inv.reason.startswith("dcgm-exporter unavailable")
    tick = source.sample()
    assert tick.samples == () and tick.error is not None


def test_fetch_deadline_holds_against_a_silent_server() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # the kernel accepts; nobody ever answers
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(DcgmFetchError, match=r"within 0\.3 s"):
            fetch_metrics(f"http://127.0.0.1:{port}/metrics", timeout_s=0.3)
        assert time.monotonic() - started < 2.0


@pytest.fixture
def sim() -> Iterator[tuple[SimGpus, ManualClock]]:
    clock = ManualClock(100.0)
    gpus = SimGpus(4, seed=1, start_t=clock.now())
    gpus.advance_to(clock.now(), load=1.0)
    yield gpus, clock


def test_simulated_exporter_over_loopback(sim: tuple[SimGpus, ManualClock]) -> None:
    gpus, clock = sim
    with SimDcgmExporter(gpus, clock.now, update_interval_s=5.0, hostname="sim-a") as exporter:
        assert exporter.url.endswith("/metrics")
        with pytest.raises(DcgmFetchError, match=r"larger than 100 bytes"):
            fetch_metrics(exporter.url, max_bytes=100)
        text = fetch_metrics(exporter.url)
        assert '{gpu="0", UUID=' in text  # spaced labels
        assert "9223372036854775794" in text  # a sentinel
        assert "DCGM_FI_DEV_FAN_SPEED" not in text  # an absent field
        source = DcgmGpuSource(exporter.url, clock=clock.now)
        inv = source.open()
        assert inv.available and len(inv.gpus) == 4
        assert inv.system.driver_version == "570.133.20"
        assert {source.node_of(i) for i in range(4)} == {"sim-a"}
        for _ in range(16):
            clock.advance(1.0)
            tick = source.sample()
        assert tick.error is None
        assert source.collection_interval_s == pytest.approx(5.0)
        assert source.collection_warning is not None
        sample = tick.samples[0]
        assert sample.missing["fan_pct"] == f"{NOT_EXPORTED} (DCGM_FI_DEV_FAN_SPEED)"
        assert "low_util_violation_ns" not in source.latest_extras[0].values
        assert source.missing_fields(0)["fan_pct"].startswith(NOT_EXPORTED)
        assert "low_util_violation_ns" not in source.missing_fields(0)  # blank, not absent


def test_simulated_lost_gpu_and_old_throttle_name(sim: tuple[SimGpus, ManualClock]) -> None:
    gpus, clock = sim
    gpus.set_lost(2)
    quirks = DcgmQuirks(old_throttle_name=True, spaced_labels=False, blank={})
    with SimDcgmExporter(gpus, clock.now, quirks=quirks) as exporter:
        source = DcgmGpuSource(exporter.url, clock=clock.now)
        source.open()
        tick = source.sample()
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in render_dcgm(gpus, clock.now(), quirks=quirks)
    assert [s.lost for s in tick.samples] == [False, False, True, False]
    assert tick.samples[0].clock_event_reasons is not None
    assert tick.samples[0].clock_event_reasons & 0x004  # at the power limit under full load


def test_same_gpus_agree_through_nvml_fake_and_dcgm(sim: tuple[SimGpus, ManualClock]) -> None:
    gpus, clock = sim
    clock.advance(45.0)  # warm, power-capped
    gpus.set_link(3, 8, index=1)
    nvml = GpuSampler(nvml=FakeNvml(gpus, clock=clock.now), clock=clock.now)
    with SimDcgmExporter(gpus, clock.now, update_interval_s=30.0) as exporter:
        dcgm_source = DcgmGpuSource(exporter.url, clock=clock.now)
        inv_d = dcgm_source.open()
        tick_d = dcgm_source.sample()
    inv_n = nvml.open()
    tick_n = nvml.sample()
    nvml.stop()
    assert tick_n.t == tick_d.t == clock.now()
    for gn, gd in zip(inv_n.gpus, inv_d.gpus, strict=True):
        for name in (
            "index",
            "name",
            "uuid",
            "pci_bus_id",
            "max_sm_clock_mhz",
            "max_mem_clock_mhz",
            "max_pcie_gen",
            "max_pcie_width",
            "slowdown_temp_c",
            "shutdown_temp_c",
            "power_limit_w",
            "power_default_limit_w",
        ):
            assert getattr(gd, name) == getattr(gn, name), name
    exact = (
        "sm_clock_mhz",
        "mem_clock_mhz",
        "temp_c",
        "hbm_temp_c",
        "energy_j",
        "clock_event_reasons",
        "util_gpu_pct",
        "util_mem_pct",
        "mem_total_bytes",
        "pcie_gen",
        "pcie_width",
    )
    assert len(tick_n.samples) == len(tick_d.samples) == 4
    for sn, sd in zip(tick_n.samples, tick_d.samples, strict=True):
        for name in exact:
            assert getattr(sd, name) == getattr(sn, name), name
        assert sd.power_w == pytest.approx(sn.power_w, abs=1e-3)
        assert sn.mem_used_bytes is not None and sd.mem_used_bytes is not None
        assert abs(sd.mem_used_bytes - sn.mem_used_bytes) < 1024**2  # MiB resolution
        for name in ("power_violation_ns", "thermal_violation_ns"):
            n, d = getattr(sn, name), getattr(sd, name)
            assert n is not None and d is not None and d == n  # ns both, nothing lost
        assert sd.missing.get("pstate", "").startswith("n/s")
        assert sd.fan_pct is None and sn.fan_pct is None
    assert tick_d.samples[1].pcie_width == 8
    assert tick_d.samples[0].clock_event_reasons == 0x004
    assert tick_d.samples[0].power_violation_ns


def test_sentinel_in_simulated_exporter_reads_as_not_supported(
    sim: tuple[SimGpus, ManualClock],
) -> None:
    gpus, clock = sim
    quirks = DcgmQuirks(blank={"DCGM_FI_DEV_MEMORY_TEMP": 9223372036854775794})
    with SimDcgmExporter(gpus, clock.now, quirks=quirks) as exporter:
        tick = DcgmGpuSource(exporter.url, clock=clock.now).sample()
    assert all(s.hbm_temp_c is None and s.missing["hbm_temp_c"] == BLANK for s in tick.samples)
