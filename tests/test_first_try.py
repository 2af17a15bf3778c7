"""The obvious first try (issue 21 item 15): ``specwatch sim`` in one terminal, then
``specwatch localhost:PORT`` on the same machine, which has no NVML: the monitor shows the
simulated GPUs and traffic as they are, and an idle server reads "idle", not "warming up".

Both run as a user runs them: the simulator is the real command in a subprocess, the monitor
is built from its command line and driven by a Textual pilot.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from textual.geometry import Region
from textual.widget import Widget

from specwatch.commands.main import parse_args
from specwatch.commands.sim import DCGM_DEFAULT_PORT
from specwatch.commands.tui import build_session
from specwatch.sources.nvml.sampler import GpuSampler
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.panes.verdict import VerdictLine
from specwatch.ui.settings import AppSettings
from tests.unavailable_nvml import unavailable_nvml

# These run `specwatch sim` with its dcgm-exporter on its default port (9400), or need that
# port free or taken by themselves: under pytest-xdist they share one worker.
pytestmark = pytest.mark.xdist_group("dcgm-default-port")


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no NVML (whether or not the test machine has one)."""

    def sampler(*args: Any, **kw: Any) -> GpuSampler:
        return GpuSampler(*args, **{**kw, "nvml": unavailable_nvml()})

    monkeypatch.setattr("specwatch.sources.nvml.sampler.GpuSampler", sampler)


@contextmanager
def specwatch_sim(*extra: str) -> Iterator[str]:
    """``specwatch sim --port 0 EXTRA...``: its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "specwatch", "sim", "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield line.split(" at ")[1].split()[0]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)


def _text(widget: Widget) -> str:
    w, h = widget.region.size
    return "\n".join(s.text for s in widget.render_lines(Region(0, 0, w, h)))


async def _run_until(app: SpecwatchApp, pilot: Any, cond: Callable[[], bool], limit: float) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await pilot.pause(0.1)


async def test_sim_then_monitor_shows_gpus_and_traffic(no_nvml: None) -> None:
    if _port_taken(DCGM_DEFAULT_PORT):
        pytest.skip(f"port {DCGM_DEFAULT_PORT} (dcgm-exporter's) is taken on this machine")
    with specwatch_sim() as url:
        session = build_session(parse_args([url.removeprefix("http://")], env={}))
        app = SpecwatchApp(AppSettings(watch_terminal=False, redraw_s=0.2), session)
        async with app.run_test(size=(120, 40)) as pilot:
            m = app.model

            def gpus_and_traffic() -> bool:
                inv, tok = m.inventory, m.tok_s.last()
                return inv is not None and inv.available and tok is not None and tok > 0

            await _run_until(app, pilot, gpus_and_traffic, 30)
            assert m.inventory is not None and len(m.inventory.gpus) == 8
            assert m.inventory.origin is not None and m.inventory.origin.source == "dcgm"
            # Its warmup ends under the simulator's steady traffic: no "warming up" forever.
            await _run_until(app, pilot, lambda: m.verdict.phase in ("reference", "judged"), 60)


async def test_an_idle_sim_reads_idle_not_warming_up(no_nvml: None) -> None:
    if _port_taken(DCGM_DEFAULT_PORT):  # the monitor would find that exporter's GPUs
        pytest.skip(f"port {DCGM_DEFAULT_PORT} (dcgm-exporter's) is taken on this machine")
    with specwatch_sim("--background", "0", "--no-dcgm") as url:
        session = build_session(parse_args([url.removeprefix("http://")], env={}))
        app = SpecwatchApp(AppSettings(watch_terminal=False, redraw_s=0.2), session)
        async with app.run_test(size=(120, 40)) as pilot:
            m = app.model
            phases: set[str] = set()

            def idle() -> bool:
                phases.add(m.verdict.phase)
                return m.verdict.phase == "idle"

            await _run_until(app, pilot, idle, 20)
            assert phases <= {"waiting", "idle"}, phases
            assert m.inventory is not None and not m.inventory.available
            assert "no dcgm-exporter at http://127.0.0.1:9400/metrics" in (m.inventory.reason or "")
            app.redraw()
            await pilot.pause()
            assert "idle" in _text(app.query_one(VerdictLine))
