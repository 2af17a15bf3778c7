"""``specwatch record`` reads its sources as every command does (the session factory): a real
simulated server over HTTP, with ``--no-gpu``, ``--demo-dialect`` and ``--dcgm``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from specwatch.commands.main import main
from specwatch.core.gpu import GpuInventory
from specwatch.record import Reader
from specwatch.session.events import GpuInventoryChanged, ServerReady
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from tests.sim_fixtures import faults_of


def _recorded(path: Path) -> list[object]:
    with Reader(path) as reader:
        return [e.event for e in reader.events()]


def _inventories(path: Path) -> list[GpuInventory]:
    return [e.inventory for e in _recorded(path) if isinstance(e, GpuInventoryChanged)]


def test_record_no_gpu_records_the_server_and_reads_no_gpus(tmp_path: Path) -> None:
    server = SimServer(SimWorld(preset("vllm")))
    url = server.start()
    path = tmp_path / "no-gpu.sqlite"
    try:
        argv = ["record", "--no-gpu", url, "-o", str(path), "--duration", "1.5s"]
        assert main([*argv, "--interval", "0.2"]) == 0
    finally:
        server.stop()
    inventories = _inventories(path)
    assert inventories and not any(i.available for i in inventories)
    assert "--no-gpu" in (inventories[0].reason or "")
    assert any(isinstance(e, ServerReady) for e in _recorded(path))


def test_record_demo_takes_the_demo_dialect(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    argv = ["record", "--demo", "--demo-dialect", "llamacpp", "--no-gpu", "-o", str(path)]
    # The demo's model loads for about 3 s before the server is ready.
    assert main([*argv, "--duration", "5s", "--interval", "0.2"]) == 0
    statuses = [e for e in _recorded(path) if isinstance(e, ServerReady)]
    assert statuses, "no server status recorded"
    assert statuses[-1].info.dialect.value == "llamacpp"


def test_record_refuses_no_gpu_with_dcgm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["record", "--no-gpu", "--dcgm", "localhost:9400", "localhost:1"]
    assert main([*argv, "-o", str(tmp_path / "x.sqlite")]) == 2
    assert "--no-gpu" in capsys.readouterr().err


def test_record_says_a_late_read_at_once_and_counts_them_at_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A /metrics answer held for a second against --interval 0.2: the window after it spans
    # more than three intervals, as a starved recorder's would.
    world = SimWorld(preset("vllm"))
    faults = faults_of(world)
    server = SimServer(world)
    url = server.start()
    faults.hang(path="/metrics", after=3)  # a scrape after the server is ready is held

    def hold_one_scrape() -> None:
        assert faults.wait_hung(1, timeout=10)
        time.sleep(1.0)  # the gap under test, not a wait for something to happen
        faults.clear_hang()

    holder = threading.Thread(target=hold_one_scrape)
    holder.start()
    path = tmp_path / "late.sqlite"
    try:
        argv = ["record", "--no-gpu", url, "-o", str(path), "--duration", "3s"]
        assert main([*argv, "--interval", "0.2"]) == 0
    finally:
        holder.join(15)
        server.stop()
    err = capsys.readouterr().err
    assert "/metrics read 1." in err and "against --interval 0.2s" in err
    summary = err.strip().splitlines()[-1]
    assert f"events in {path}; 1 /metrics read late, up to 1." in summary


def test_late_reads_name_the_server_when_several_are_recorded() -> None:
    from specwatch.commands.record import LateReads
    from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
    from specwatch.session.events import MetricsScraped

    said: list[str] = []
    late = LateReads(1.0, said.append, ["http://a:8000", "http://b:8000"])
    for server in (0, 1):
        late(ServerReady(0.0, ServerInfo("http://x", Dialect.VLLM), server))
    late(MetricsScraped(MetricsWindow(t=5.0, dt=1.0), 1))  # on time
    late(MetricsScraped(MetricsWindow(t=15.0, dt=10.0), 1))
    late(MetricsScraped(MetricsWindow(t=30.0, dt=12.0), 0))
    assert len(said) == 1 and said[0].startswith("http://b:8000: /metrics read 10.0s apart")
    assert late.summary() == "; 2 /metrics reads late, up to 12.0s apart"
    # a window reaching back before the server's last ready spans its outage
    late(ServerReady(40.0, ServerInfo("http://x", Dialect.VLLM), 0))
    late(MetricsScraped(MetricsWindow(t=41.0, dt=20.0), 0))
    assert late.count == 2
