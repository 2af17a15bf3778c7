"""The headless live session against the simulator: typed events, several servers, limits that
change, a benchmark, and no textual anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specwatch.core.gpu import GpuInventory
from specwatch.session import LiveSession, load_baseline
from specwatch.session.events import (
    BenchFinished,
    BenchProgress,
    GpuInventoryChanged,
    GpuTicked,
    MetricsScraped,
    ServerReady,
    ServerWaiting,
)
from tests.session_world import START_T, Collector, drive_until, manual_sim
from tests.sim_testing import FAST


def _limits(inv: GpuInventory) -> list[float | None]:
    return [g.power_limit_w for g in inv.gpus]


async def test_a_session_emits_typed_events_stamped_with_its_clock() -> None:
    with manual_sim() as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)  # before start: the first events come at once
        async with session:
            await drive_until(
                sim,
                lambda: (
                    any(w.window.gen_tok_s for w in seen.of(MetricsScraped))
                    and len(seen.of(GpuTicked)) >= 2
                ),
            )
            assert session.server_info() is not None
        ready = seen.of(ServerReady)
        assert len(ready) == 1 and ready[0].info.dialect.value == "sglang" and ready[0].server == 0
        inventory = seen.of(GpuInventoryChanged)
        assert len(inventory) == 1 and len(inventory[0].inventory.gpus) == 2
        ticks = seen.of(GpuTicked)
        # Every timestamp is on the manual clock, not the wall clock.
        assert all(START_T <= k.tick.t <= sim.clock.now() for k in ticks)
        assert all(START_T <= w.window.t <= sim.clock.now() for w in seen.of(MetricsScraped))
        # The inventory comes before the first tick.
        assert seen.events.index(inventory[0]) < seen.events.index(ticks[0])
        count = len(seen.events)
    # Stopped: nothing more arrives.
    await drive_until(sim, lambda: True)
    assert len(seen.events) == count


async def test_a_session_watches_a_list_of_servers() -> None:
    with manual_sim() as a, manual_sim("vllm", clock=a.clock) as b:
        from specwatch.session import NvmlGpuSource
        from specwatch.sources.http.endpoint import parse_endpoint

        seen = Collector()
        session = LiveSession(
            [parse_endpoint(a.url), parse_endpoint(b.url)],
            NvmlGpuSource(0.05, nvml=a.nvml(), clock=a.clock.now),
            metrics_interval_s=0.05,
            clock=a.clock.now,
        )
        session.subscribe(seen)
        async with session:
            await drive_until(a, lambda: len({e.server for e in seen.of(ServerReady)}) == 2)
            b.advance(0.0)
        dialects = {e.server: e.info.dialect.value for e in seen.of(ServerReady)}
        assert dialects == {0: "sglang", 1: "vllm"}
        assert session.server_info(1) is not None and session.server_info(2) is None


async def test_a_power_limit_change_flows_as_an_event() -> None:
    """700 W lowered to 400 W while watching: a new inventory says so, before the next tick."""
    with manual_sim() as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)  # before start: the first events come at once
        async with session:
            await drive_until(sim, lambda: len(seen.of(GpuTicked)) >= 1)
            assert _limits(seen.of(GpuInventoryChanged)[0].inventory) == [700.0, 700.0]
            sim.world.gpus.set_power_limit(400.0)
            # The sampler re-reads fixed data every few seconds of its clock.
            await drive_until(sim, lambda: len(seen.of(GpuInventoryChanged)) >= 2, step_s=1.0)
        changed = seen.of(GpuInventoryChanged)
        assert len(changed) == 2
        assert _limits(changed[1].inventory) == [400.0, 400.0]
        after = seen.events[seen.events.index(changed[1]) + 1 :]
        assert any(isinstance(e, GpuTicked) for e in after)


async def test_a_server_that_is_loading_is_waited_for() -> None:
    with manual_sim(load_time_s=30.0) as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)  # before start: the first events come at once
        async with session:
            await drive_until(sim, lambda: len(seen.of(ServerReady)) == 1, step_s=2.0)
        assert seen.of(ServerWaiting)
        assert seen.events.index(seen.of(ServerWaiting)[0]) < seen.events.index(
            seen.of(ServerReady)[0]
        )


async def test_a_benchmark_runs_in_the_session_and_saves_its_snapshot(tmp_path: Path) -> None:
    from specwatch.core.snapshot_records import BenchConfig

    with manual_sim(**FAST) as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)  # before start: the first events come at once
        async with session:
            assert session.start_benchmark(tmp_path) is None  # not connected yet
            await drive_until(sim, lambda: session.server_info() is not None)
            job = session.start_benchmark(tmp_path, BenchConfig(runs=2, warmup=1, max_tokens=16))
            assert job is not None and session.bench_running
            await drive_until(sim, lambda: bool(seen.of(BenchFinished)), 20, step_s=0.01)
        (done,) = seen.of(BenchFinished)
        assert done.outcome == "finished" and done.result is not None
        assert len(done.result.runs) == 2 and done.snapshot_error is None
        assert done.snapshot_path is not None and done.snapshot_path.parent == tmp_path
        kinds = [e.kind for e in seen.of(BenchProgress)]
        assert kinds[0] == "started" and kinds[-1] == "finished" and kinds.count("run_done") == 2
        # Run times are on the session's clock, like the ticks summarised for each run.
        assert all(r.gpus for r in done.result.runs)


def test_baseline_from_the_command_line_or_a_snapshot(tmp_path: Path) -> None:
    assert load_baseline(12.0).ms == 12.0
    assert load_baseline().ms is None and load_baseline().error is None
    missing = load_baseline(None, tmp_path / "nope.json")
    assert missing.ms is None and missing.error and "nope.json" in missing.error


HEADLESS = """
import asyncio, json, sys
from tests.session_world import Collector, drive_until, manual_sim

WANTED = {"ServerReady", "MetricsScraped", "GpuInventoryChanged", "GpuTicked"}

async def main():
    with manual_sim() as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)
        async with session:
            await drive_until(sim, lambda: WANTED <= {type(e).__name__ for e in seen.events})
    return sorted({type(e).__name__ for e in seen.events})

names = asyncio.run(main())
ui = sorted(m for m in sys.modules if m.split(".")[0] == "textual")
print(json.dumps({"events": names, "ui": ui}))
"""


def test_a_session_runs_without_textual() -> None:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", HEADLESS], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["ui"] == []
    assert {"ServerReady", "MetricsScraped", "GpuInventoryChanged", "GpuTicked"} <= set(
        report["events"]
    )
