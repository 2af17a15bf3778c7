"""dcgm-exporter expositions, as the exporter's versions write them, to specwatch's GPU samples."""

from __future__ import annotations

import pytest

from specwatch.commands.exporter import COUNTERS_FILE, package_file, run_dcgm_counters
from specwatch.core.gpu import GpuSample
from specwatch.sources.dcgm.fields import FIELDS
from specwatch.sources.dcgm.parse import (
    BLANK,
    NOT_EXPORTED,
    dcgm_url,
    extras,
    is_blank,
    not_exported,
    parse_dcgm,
    to_sample,
    to_static,
)

# dcgm-exporter 2.x: no pci_bus_id or driver label, the old throttle-reasons name, few fields.
_L2 = (
    '{gpu="0",UUID="GPU-aaaa",device="nvidia0",'
    'modelName="Tesla V100-SXM2-16GB",Hostname="old-node"}'
)
EXPO_2X = f"""\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{_L2} 1530
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{_L2} 61
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{_L2} 4
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{_L2} 1024
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{_L2} 15136
"""

_L3 = (
    'gpu="{i}", UUID="GPU-{i}{i}{i}{i}", pci_bus_id="00000000:{i}8:00.0", device="nvidia{i}", '
    'modelName="NVIDIA H100 80GB HBM3", Hostname="gpu-node-7", '
    'DCGM_FI_DRIVER_VERSION="550.54.15", container="", namespace="", pod=""'
)


def _l3(i: int) -> str:
    return "{" + _L3.format(i=i) + "}"


# dcgm-exporter 3.x: spaced labels, driver and Kubernetes labels, two GPUs, sentinels, garbage.
EXPO_3X = f"""\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{_l3(0)} 1980
DCGM_FI_DEV_SM_CLOCK{_l3(1)} 1755
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{_l3(0)} 2619
DCGM_FI_DEV_MEM_CLOCK{_l3(1)} 2619
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{_l3(0)} 9223372036854775794
DCGM_FI_DEV_MEMORY_TEMP{_l3(1)} 71
# TYPE DCGM_FI_DEV_PCIE_LINK_GEN gauge
DCGM_FI_DEV_PCIE_LINK_GEN{_l3(0)} 5
DCGM_FI_DEV_PCIE_LINK_GEN{_l3(1)} 2147483632
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{_l3(0)} 699.512
DCGM_FI_DEV_POWER_USAGE{_l3(1)} 140737488355328
this line is not prometheus at all {{{{
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{_l3(0)} 123456789
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{_l3(1)} 2147483640
# TYPE DCGM_FI_DEV_POWER_VIOLATION counter
DCGM_FI_DEV_POWER_VIOLATION{_l3(0)} 2147483635
DCGM_FI_DEV_POWER_VIOLATION{{gpu="1", UUID="GPU-1111" 17
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{_l3(0)} 0
DCGM_FI_DEV_XID_ERRORS{_l3(1)} 0
# TYPE DCGM_FI_DEV_COUNT gauge
DCGM_FI_DEV_COUNT{{Hostname="gpu-node-7"}} 2
go_gc_duration_seconds{{quantile="0"}} 1.2e-05
"""

# dcgm-exporter 4.x in Kubernetes: the new reasons name, every violation counter, pod labels.
_L4 = (
    '{gpu="0",UUID="GPU-4444",pci_bus_id="00000000:18:00.0",device="nvidia0",'
    'modelName="NVIDIA H200",Hostname="dcgm-exporter-x7k2p",DCGM_FI_DRIVER_VERSION="570.86.15",'
    'container="sglang",namespace="llm",pod="sglang-0"}'
)
EXPO_4X = "\n".join(
    f"DCGM_FI_DEV_{name}{_L4} {value}"
    for name, value in (
        ("SM_CLOCK", 1830),
        ("MAX_SM_CLOCK", 1980),
        ("CLOCKS_EVENT_REASONS", 0x24),
        ("POWER_MGMT_LIMIT", 700),
        ("POWER_VIOLATION", 1500),
        ("THERMAL_VIOLATION", 250),
        ("SYNC_BOOST_VIOLATION", 0),
        ("BOARD_LIMIT_VIOLATION", 0),
        ("LOW_UTIL_VIOLATION", 9223372036854775792),
        ("RELIABILITY_VIOLATION", 0),
        ("PCIE_LINK_GEN", 4),
        ("PCIE_LINK_WIDTH", 16),
        ("PCIE_MAX_LINK_GEN", 5),
        ("PCIE_MAX_LINK_WIDTH", 16),
        ("GPU_UTIL", 97),
        ("FB_USED", 130000),
        ("FB_TOTAL", 143771),
        ("XID_ERRORS", 31),
    )
)


@pytest.mark.parametrize(
    ("spec", "url"),
    [
        ("node-a", "http://node-a:9400/metrics"),
        ("node-a:9500", "http://node-a:9500/metrics"),
        ("10.0.0.7", "http://10.0.0.7:9400/metrics"),
        ("[::1]", "http://[::1]:9400/metrics"),
        ("http://node-a:9400/metrics", "http://node-a:9400/metrics"),
        ("https://gw.example/dcgm/metrics", "https://gw.example/dcgm/metrics"),
        ("http://node-a:9400", "http://node-a:9400/metrics"),
    ],
)
def test_dcgm_url_forms(spec: str, url: str) -> None:
    assert dcgm_url(spec) == url


@pytest.mark.parametrize("spec", ["", "  ", "ftp://x/metrics"])
def test_dcgm_url_rejects_nonsense(spec: str) -> None:
    with pytest.raises(ValueError):
        dcgm_url(spec)


def test_version_2_old_throttle_name_and_fields_not_exported() -> None:
    parsed = parse_dcgm(EXPO_2X)
    assert parsed.error is None
    (gpu,) = parsed.gpus
    assert (gpu.key, gpu.gpu, gpu.hostname, gpu.pci_bus_id) == ("GPU-aaaa", 0, "old-node", None)
    sample = to_sample(gpu, 0, t=5.0)
    assert sample.clock_event_reasons == 4
    assert "clock_event_reasons" not in sample.missing
    assert (sample.sm_clock_mhz, sample.temp_c) == (1530, 61)
    assert sample.mem_used_bytes == 1024 * 1024**2
    assert sample.mem_total_bytes == (1024 + 15136) * 1024**2
    assert sample.pcie_gen is None
    assert sample.missing["pcie_gen"] == f"{NOT_EXPORTED} (DCGM_FI_DEV_PCIE_LINK_GEN)"
    assert sample.missing["power_violation_ns"].startswith(NOT_EXPORTED)
    assert sample.missing["pstate"].startswith("n/s")
    static = to_static(gpu, 0)
    assert static.name == "Tesla V100-SXM2-16GB"
    assert static.pci_bus_id is None and static.missing["pci_bus_id"].startswith(NOT_EXPORTED)
    absent = not_exported(gpu)
    assert "mem_total_bytes" not in absent  # used + free give it
    assert {"pcie_gen", "power_w", "max_sm_clock_mhz"} <= set(absent)
    assert "sm_clock_mhz" not in absent


def test_version_3_spaced_labels_sentinels_and_garbage() -> None:
    parsed = parse_dcgm(EXPO_3X)
    assert parsed.error is not None and "unparseable" in parsed.error
    assert [g.key for g in parsed.gpus] == ["GPU-0000", "GPU-1111"]
    g0, g1 = parsed.gpus
    assert g0.hostname == "gpu-node-7" and g0.driver_version == "550.54.15"
    assert g0.pci_bus_id == "00000000:08:00.0" and g0.k8s == {}
    s0, s1 = to_sample(g0, 0, 1.0), to_sample(g1, 1, 1.0)
    assert (s0.sm_clock_mhz, s1.sm_clock_mhz) == (1980, 1755)
    # 2^63 and 2^31 and 2^47 sentinels: not supported, never a number.
    assert s0.hbm_temp_c is None and s0.missing["hbm_temp_c"] == BLANK
    assert s1.hbm_temp_c == 71
    assert s1.pcie_gen is None and s1.missing["pcie_gen"] == BLANK
    assert s1.power_w is None and s1.missing["power_w"] == BLANK
    assert s0.power_w == pytest.approx(699.512)
    # Counters near 2^31 are readings: 2.1 s of power violation (ns), 2.1 MJ of energy.
    assert s0.power_violation_ns == 2147483635
    assert s1.energy_j == pytest.approx(2147483.640)
    assert s0.energy_j == pytest.approx(123456.789)
    # The broken line cost only itself.
    assert s1.power_violation_ns is None
    assert extras(g0)["xid"] == 0
    assert not any(s.lost for s in (s0, s1))


def test_counter_families_keep_their_names_when_the_whole_text_parses() -> None:
    clean = "\n".join(
        ln
        for ln in EXPO_3X.splitlines()
        if "not prometheus" not in ln and 'UUID="GPU-1111" 17' not in ln
    )
    parsed = parse_dcgm(clean)
    assert parsed.error is None
    s0 = to_sample(parsed.gpus[0], 0, 1.0)
    assert s0.energy_j == pytest.approx(123456.789)
    assert s0.power_violation_ns == 2147483635


def test_version_4_kubernetes_labels_reasons_and_violation_counters() -> None:
    parsed = parse_dcgm(EXPO_4X)
    assert parsed.error is None
    (gpu,) = parsed.gpus
    assert gpu.k8s == {"container": "sglang", "namespace": "llm", "pod": "sglang-0"}
    sample = to_sample(gpu, 3, 2.0)
    assert sample.index == 3
    assert sample.clock_event_reasons == 0x24
    # nanoseconds as exported, as NVML's violationTime (not the stock CSV's "in us")
    assert (sample.power_violation_ns, sample.thermal_violation_ns) == (1500, 250)
    assert sample.mem_total_bytes == 143771 * 1024**2
    assert (sample.pcie_gen, sample.pcie_width) == (4, 16)
    static = to_static(gpu, 3)
    assert (static.max_pcie_gen, static.max_pcie_width, static.max_sm_clock_mhz) == (5, 16, 1980)
    assert static.power_limit_w == 700.0
    more = extras(gpu)
    assert more["xid"] == 31 and more["sync_boost_violation_ns"] == 0
    assert "low_util_violation_ns" not in more
    assert "DCGM_FI_DEV_LOW_UTIL_VIOLATION" in gpu.blank
    assert to_sample(gpu, 3, 2.0, extra_reasons=0x200).clock_event_reasons == 0x224


def test_gpu_fallen_off_the_bus() -> None:
    text = 'DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="GPU-lost"} 79\n'
    (gpu,) = parse_dcgm(text).gpus
    sample = to_sample(gpu, 2, 1.0)
    assert sample.lost and sample.sm_clock_mhz is None
    assert "XID 79" in sample.missing["sm_clock_mhz"]


def test_series_without_uuid_key_by_index_and_node_series_skipped() -> None:
    text = 'DCGM_FI_DEV_SM_CLOCK{gpu="1"} 900\nDCGM_FI_DEV_COUNT 8\n'
    (gpu,) = parse_dcgm(text).gpus
    assert (gpu.key, gpu.gpu) == ("gpu1", 1)


def test_is_blank_ranges() -> None:
    assert is_blank(9223372036854775792) and is_blank(float(2**63))
    assert is_blank(2147483632) and not is_blank(2147483632, counter=True)
    assert is_blank(140737488355328.0) and is_blank(float("nan"))
    assert not is_blank(2147483631) and not is_blank(0) and not is_blank(1e12)


def test_empty_and_unrelated_text() -> None:
    assert parse_dcgm("").gpus == ()
    assert parse_dcgm("node_load1 0.5\n<html>nope</html>\n").gpus == ()


def test_counters_csv_lists_every_field_in_exporter_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    csv = package_file(COUNTERS_FILE)
    rows = [ln for ln in csv.splitlines() if ln.strip() and not ln.startswith("#")]
    parsed = [[part.strip() for part in row.split(",")] for row in rows]
    assert all(len(p) == 3 for p in parsed), "dcgm-exporter reads field, type, help"
    assert [p[0] for p in parsed] == [f.dcgm for f in FIELDS]
    assert {p[1] for p in parsed} == {"gauge", "counter"}
    kinds = {p[0]: p[1] for p in parsed}
    assert kinds["DCGM_FI_DEV_POWER_VIOLATION"] == "counter"
    assert kinds["DCGM_FI_DEV_SM_CLOCK"] == "gauge"
    assert run_dcgm_counters() == 0
    assert capsys.readouterr().out == csv


def test_every_sample_target_is_a_gpu_field() -> None:
    fields = set(GpuSample.__dataclass_fields__) | {
        "max_sm_clock_mhz",
        "max_mem_clock_mhz",
        "app_sm_clock_mhz",
        "app_mem_clock_mhz",
        "persistence_mode",
        "slowdown_temp_c",
        "shutdown_temp_c",
        "power_limit_w",
        "power_default_limit_w",
        "max_pcie_gen",
        "max_pcie_width",
    }
    for f in FIELDS:
        assert f.target.startswith("extra:") or f.target in fields, f.dcgm
