"""GPUs over dcgm-exporter through every front end: the session, the app, bench + compare, probe.

"specwatch on a machine without NVML, ``--dcgm host`` shows GPUs with throttle reasons and the
straggler": NVML is made to fail here, and everything GPU comes from the simulated exporter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from textual.geometry import Region
from textual.widget import Widget

from specwatch.commands.main import build_parser, main
from specwatch.commands.tui import build_session
from specwatch.core import gpu as rules
from specwatch.core.gpu import GpuInventory, GpuOrigin, GpuSample, GpuStatic, GpuTick, harmful
from specwatch.session import DcgmExporterGpuSource, NvmlGpuSource
from specwatch.session.events import GpuInventoryChanged, GpuTicked
from specwatch.sim.dcgm_exporter import SimDcgmExporter, render_dcgm
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus, SimGpuSpec
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.dcgm.parse import parse_dcgm, to_sample
from specwatch.sources.dcgm.source import DcgmGpuSource
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.probe import SCHEMA_VERSION, probe, probe_to_dict
from specwatch.sources.probe_gpus import GPU_KEYS, gpus_document
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpus import STRAGGLER, GpusPane, origin_note, with_node_headings
from specwatch.ui.settings import AppSettings
from tests.session_world import Collector, ManualSim, drive_until, manual_sim

HOT = 1
"""The GPU held at its slowdown temperature: thermal throttling makes it the straggler."""


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no NVML: constructing the NVML sampler fails the test."""

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("NVML must not be used with --dcgm")

    monkeypatch.setattr("specwatch.sources.nvml.sampler.GpuSampler", refuse)


@pytest.fixture
def hot_node() -> Iterator[tuple[ManualSim, SimDcgmExporter]]:
    """A loaded 2-GPU node on a manual clock, GPU 1 pinned hot, with its dcgm-exporter."""
    with manual_sim(gpu_count=2, background_concurrency=8) as sim:
        sim.world.gpus.set_temperature(95.0, pin=True, index=HOT)
        with SimDcgmExporter(sim.world.gpus, sim.clock.now, update_interval_s=0.2) as exporter:
            yield sim, exporter


def _host_port(url: str) -> str:
    return url.removeprefix("http://").removesuffix("/metrics")


def _straggling(tick: GpuTick) -> bool:
    hot = tick.samples[HOT]
    return (
        rules.sample_straggler(tick.samples) == HOT
        and hot.clock_event_reasons is not None
        and harmful(hot.clock_event_reasons)
    )


async def test_session_reads_a_remote_node_without_nvml(
    no_nvml: None, hot_node: tuple[ManualSim, SimDcgmExporter]
) -> None:
    sim, exporter = hot_node
    args = build_parser().parse_args(
        ["--url", sim.url, "--dcgm", _host_port(exporter.url), "--interval", "0.1"]
    )
    session = build_session(args)
    assert isinstance(session.gpus, DcgmExporterGpuSource)
    seen = Collector()
    session.subscribe(seen)
    async with session:
        await drive_until(sim, lambda: any(_straggling(e.tick) for e in seen.of(GpuTicked)))
    inventory = seen.of(GpuInventoryChanged)[0].inventory
    assert inventory.available and [g.index for g in inventory.gpus] == [0, 1]
    assert inventory.gpus[0].max_sm_clock_mhz == sim.world.gpus.spec.max_sm_clock_mhz
    origin = inventory.origin
    assert origin is not None and origin.source == "dcgm"
    assert origin.nodes == ("sim-node", "sim-node")
    # The simulated exporter leaves the fan out, as passively cooled boards do.
    assert "fan_pct" in origin.not_exported
    first = seen.events.index(seen.of(GpuInventoryChanged)[0])
    assert first < seen.events.index(seen.of(GpuTicked)[0])


def _text_of(widget: Widget) -> str:
    w, h = widget.region.size
    return "\n".join(s.text for s in widget.render_lines(Region(0, 0, w, h)))


async def test_the_app_shows_remote_gpus_their_node_and_what_is_not_sent(
    no_nvml: None, hot_node: tuple[ManualSim, SimDcgmExporter]
) -> None:
    sim, exporter = hot_node
    args = build_parser().parse_args(["--url", sim.url, "--dcgm", exporter.url])
    session = build_session(args)
    app = SpecwatchApp(AppSettings(watch_terminal=False, redraw_s=0.1), session)
    try:
        async with app.run_test(size=(140, 36)) as pilot:

            async def pause() -> None:
                await pilot.pause(0.05)

            def shown() -> bool:
                tick = app.model.tick
                return tick is not None and _straggling(tick)

            await drive_until(sim, shown, pause=pause)
            app.redraw()
            await pilot.pause()
            pane = app.query_one(GpusPane)
            text = _text_of(pane)
            assert "node sim-node via dcgm" in str(pane.border_title)
            assert f"{HOT}{STRAGGLER}" in text
            hot_row = next(line for line in text.splitlines() if f"{HOT}{STRAGGLER}" in line)
            assert "thermal" in hot_row
            assert "exporter does not send:" in text and "fan_pct" in text
    finally:
        session.stop()


def _model(nodes: tuple[str, ...], interval: float | None = None) -> MonitorModel:
    model = MonitorModel()
    origin = GpuOrigin("dcgm", nodes, ("hbm_temp_c",), interval, 1.0)
    statics = tuple(GpuStatic(i, name="H100", max_sm_clock_mhz=1980) for i in range(len(nodes)))
    model.set_inventory(GpuInventory(True, gpus=statics, origin=origin))
    samples = tuple(GpuSample(i, 1.0, sm_clock_mhz=1900) for i in range(len(nodes)))
    model.add_tick(GpuTick(1.0, 0.0, samples, 0.1))
    return model


def test_gpus_of_several_nodes_get_a_heading_per_node_and_the_note_says_the_interval() -> None:
    from specwatch.ui.panes.gpus import gpu_rows, node_heading_count

    model = _model(("n1", "n1", "n2"), interval=30.0)
    rows = with_node_headings(model, gpu_rows(model))
    spans = [r["span"].text for r in rows if "span" in r]
    assert spans == ["node n1", "node n2"] and len(rows) == 5
    # the pane's height is counted without building the rows: the same count
    assert node_heading_count(model) == 2
    assert node_heading_count(_model(("n1", "n2", "n1"))) == 3
    note = origin_note(model)
    assert note is not None and "hbm_temp_c" in note and "every 30 s (view 1 s)" in note
    one_node = _model(("n1", "n1"))
    assert len(with_node_headings(one_node, gpu_rows(one_node))) == 2
    assert node_heading_count(one_node) == 0
    assert origin_note(one_node) == "exporter does not send: hbm_temp_c"
    assert origin_note(MonitorModel()) is None


# --- bench + compare -----------------------------------------------------------------------


@pytest.fixture
def real_time_node() -> Iterator[tuple[SimWorld, str, str]]:
    """A fast simulated server on the real clock, and its exporter collecting every 50 ms."""
    world = SimWorld(
        preset(
            "sglang",
            spec_algorithm=None,
            plain_step_ms=3.0,
            base_step_ms=3.0,
            prefill_ms=2.0,
            warmup_requests=0,
            gpu_count=2,
        )
    )
    with (
        SimServer(world) as server,
        SimDcgmExporter(world.gpus, world.clock.now, update_interval_s=0.05) as exporter,
    ):
        yield world, server.url, exporter.url


def test_bench_records_remote_gpus_and_compare_judges_them(
    no_nvml: None, real_time_node: tuple[SimWorld, str, str], tmp_path: Path
) -> None:
    world, url, dcgm = real_time_node
    common = ["bench", "--url", url, "--dcgm", dcgm, "-n", "3", "--warmup", "1"]
    common += ["--max-tokens", "40", "--gpu-interval", "0.05", "--out", str(tmp_path)]
    assert main([*common, "--label", "a"]) == 0
    assert main([*common, "--label", "b"]) == 0
    paths = sorted(tmp_path.glob("*.json"))
    assert len(paths) == 2
    for path in paths:
        snap = json.loads(path.read_text())
        env = snap["gpu_environment"]
        assert env["available"] is True and env["driver_version"] == "570.133.20"
        assert [g["index"] for g in env["gpus"]] == [0, 1]
        assert env["gpus"][0]["max_sm_clock_mhz"] == world.gpus.spec.max_sm_clock_mhz
        runs = snap["runs"]
        assert runs and all(len(r["gpus"]) == 2 for r in runs)
        assert all(g["sm_clock_mean_mhz"] > 0 and g["samples"] for r in runs for g in r["gpus"])
    # The same GPUs both times: the GPU state is known, so the verdict is not "unknown" (5).
    # (9, host CPU contention, is what a loaded CI machine may rightly get.)
    assert main(["compare", str(paths[0]), str(paths[1])]) in (0, 3, 4, 9)


def test_bench_refuses_dcgm_with_no_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--url", "localhost:1", "--dcgm", "x", "--no-gpu"]) == 2
    assert "--dcgm or --no-gpu" in capsys.readouterr().err


# --- probe ---------------------------------------------------------------------------------


async def test_probe_json_has_one_gpu_shape_for_nvml_and_dcgm(
    real_time_node: tuple[SimWorld, str, str],
) -> None:
    world, url, dcgm = real_time_node
    endpoint = parse_endpoint(url, env={})
    by_nvml = probe_to_dict(await probe(endpoint, max_tokens=8, nvml=FakeNvml(world.gpus)))
    by_dcgm = probe_to_dict(await probe(endpoint, max_tokens=8, dcgm=[dcgm]))
    for doc, source in ((by_nvml, "nvml"), (by_dcgm, "dcgm")):
        assert doc["schema_version"] == SCHEMA_VERSION and doc["gpus_reason"] is None
        assert [g["index"] for g in doc["gpus"]] == [0, 1]
        for gpu in doc["gpus"]:
            assert tuple(gpu) == GPU_KEYS and gpu["source"] == source
            assert isinstance(gpu["clock_event_reasons"], int)
            assert isinstance(gpu["clock_event_reason_names"], list)
            assert all(isinstance(w, str) and len(w) > 1 for w in gpu["clock_event_reason_names"])
            # Every null is explained.
            assert {k for k, v in gpu.items() if v is None} <= set(gpu["missing"])
        assert orjson.loads(orjson.dumps(doc)) == doc
    assert [g["node"] for g in by_dcgm["gpus"]] == ["sim-node", "sim-node"]
    for key in ("name", "uuid", "pci_bus_id", "max_sm_clock_mhz", "power_limit_w", "max_pcie_gen"):
        assert [g[key] for g in by_nvml["gpus"]] == [g[key] for g in by_dcgm["gpus"]], key


def test_probe_gpu_entry_from_a_sparse_exporter_says_what_is_not_sent() -> None:
    body = (
        'DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-a", Hostname="edge-7", modelName="L4"} 1500\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="0", UUID="GPU-a", Hostname="edge-7", modelName="L4"} 61\n'
    )
    source = DcgmGpuSource("edge-7", fetch=lambda url, timeout_s, max_bytes: body)
    from specwatch.sources.dcgm.source import dcgm_origin

    inventory = source.open()
    tick = source.sample()
    import dataclasses

    inventory = dataclasses.replace(inventory, origin=dcgm_origin(source))
    entries, reason = gpus_document(inventory, tick)
    assert reason is None and len(entries) == 1
    (gpu,) = entries
    assert tuple(gpu) == GPU_KEYS
    assert gpu["node"] == "edge-7" and gpu["source"] == "dcgm" and gpu["name"] == "L4"
    assert gpu["sm_clock_mhz"] == 1500 and gpu["temp_c"] == 61
    assert gpu["power_w"] is None and "not exported" in gpu["missing"]["power_w"]
    assert gpu["clock_event_reasons"] is None and gpu["clock_event_reason_names"] is None
    assert gpu["missing"]["clock_event_reason_names"] == gpu["missing"]["clock_event_reasons"]


def test_probe_json_carries_dram_and_tensor_activity_from_a_4x_exporter() -> None:
    # dcgm-exporter 4.x with its profiling (PROF) fields, as a DCGM 4 node sends them.
    labels = '{gpu="0",UUID="GPU-4444",Hostname="h200-3",modelName="NVIDIA H200",pod="sglang-0"}'
    body = "".join(
        f"{name}{labels} {value}\n"
        for name, value in (
            ("DCGM_FI_DEV_SM_CLOCK", 1830),
            ("DCGM_FI_PROF_DRAM_ACTIVE", 0.812345),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.153),
        )
    )
    source = DcgmGpuSource("h200-3", fetch=lambda url, timeout_s, max_bytes: body)
    inventory = source.open()
    entries, reason = gpus_document(inventory, source.sample())
    assert reason is None
    (gpu,) = entries
    assert gpu["dram_active"] == pytest.approx(0.812345)
    assert gpu["tensor_active"] == pytest.approx(0.153)
    # The simulated exporter: a step 80% memory-bound at full clocks is 20% tensor work.
    gpus = SimGpus(1, spec=SimGpuSpec(memory_bound_share=0.8), seed=1)
    gpus.set_temperature(40.0, pin=True)
    gpus.advance_to(1.0, load=1.0)
    (exported,) = parse_dcgm(render_dcgm(gpus, 1.0)).gpus
    sample = to_sample(exported, 0, 1.0)
    assert sample.dram_active == pytest.approx(0.8, abs=0.01)
    assert sample.tensor_active == pytest.approx(0.2, abs=0.01)


def test_nvml_session_source_is_unchanged_without_dcgm() -> None:
    args = build_parser().parse_args(["--url", "localhost:8000"])
    session = build_session(args)
    assert isinstance(session.gpus, NvmlGpuSource)


def test_demo_can_read_its_gpus_over_http() -> None:
    args = build_parser().parse_args(["--demo", "--demo-dcgm"])
    session = build_session(args)
    try:
        assert isinstance(session.gpus, DcgmExporterGpuSource)
        assert session.demo is not None
        (url,) = session.gpus.dcgm.urls
        inventory = session.gpus.dcgm.open()
        assert url.endswith("/metrics") and inventory.available and len(inventory.gpus) == 8
    finally:
        session.stop()


def test_dcgm_counters_prints_the_csv(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dcgm-counters"]) == 0
    out = capsys.readouterr().out
    assert "DCGM_FI_DEV_SM_CLOCK" in out and "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in out
