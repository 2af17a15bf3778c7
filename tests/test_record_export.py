"""``specwatch export`` of a recorded live session holds what the session said: the verdict as it
changed, the benchmark's runs and the per-position acceptance, beside the GPU and server
series (the session's own events are the truth the rows are checked against)."""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path

from specwatch.commands.record import run_export
from specwatch.core.energy import PowerLog
from specwatch.core.goodput import DEFAULT_SLO, histogram_goodput
from specwatch.core.outcomes import CAUSES
from specwatch.core.snapshot_records import BenchConfig
from specwatch.record import Recorder
from specwatch.session.events import (
    BenchFinished,
    GpuTicked,
    MetricsScraped,
    ServerReady,
    VerdictChanged,
)
from tests.session_world import Collector, drive_until, manual_sim
from tests.sim_testing import FAST


def _export(path: Path) -> list[dict[str, str]]:
    out = io.StringIO()
    args = argparse.Namespace(
        file=path, csv=True, json=False, start=None, end=None, slo_ttft=None, slo_tpot=None
    )
    assert run_export(args, out=out, err=io.StringIO()) == 0
    return list(csv.DictReader(io.StringIO(out.getvalue())))


async def test_a_recording_exports_its_verdict_changes_benchmark_runs_and_positions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "night.sqlite"
    with manual_sim("vllm", **FAST) as sim:
        seen = Collector()
        session = sim.session()
        recorder = Recorder(path, session.endpoints, clock=sim.clock.now)
        recorder.start()
        session.subscribe(seen)
        session.subscribe(recorder)
        async with session:
            await drive_until(sim, lambda: session.server_info() is not None)
            job = session.start_benchmark(tmp_path, BenchConfig(runs=2, warmup=1, max_tokens=16))
            assert job is not None
            await drive_until(sim, lambda: bool(seen.of(BenchFinished)), 20, step_s=0.01)

            def judged() -> bool:
                return any(e.state.judgement is not None for e in seen.of(VerdictChanged))

            await drive_until(sim, judged, 60, step_s=0.5)
        recorder.stop()
    rows = _export(path)

    def of(source: str, field: str) -> list[str]:
        return [r["value"] for r in rows if r["source"] == source and r["field"] == field]

    # The verdict timeline: one phase and one cause row per change, in order.
    verdicts = [e.state for e in seen.of(VerdictChanged)]
    assert len(verdicts) >= 2
    assert of("verdict", "phase") == [v.phase for v in verdicts]
    assert of("verdict", "cause") == [CAUSES[v.outcome] for v in verdicts]
    # Where it judged: the figures it judged on, beside the cause.
    judged_states = [v for v in verdicts if v.judgement is not None]
    assert judged_states
    last = judged_states[-1]
    assert last.current is not None and last.reference is not None and last.judgement
    assert float(of("verdict", "tok_s_current")[-1]) == last.current.mean_tok_s
    assert float(of("verdict", "tok_s_reference")[-1]) == last.reference.figures.mean_tok_s
    assert of("verdict", "reference")[-1] == last.reference.label
    reasoned = [v for v in judged_states if v.judgement is not None and v.judgement.reasons]
    assert len(of("verdict", "reason")) == len(reasoned)
    # The benchmark: its outcome and each measured run's figures, as the session had them.
    (done,) = seen.of(BenchFinished)
    assert done.result is not None and done.snapshot_path is not None
    assert of("bench", "outcome") == ["finished"]
    assert of("bench", "runs") == ["2"]
    assert of("bench", "run") == ["1", "2"]
    runs = done.result.runs
    assert of("bench", "run_completion_tokens") == [str(r.completion_tokens) for r in runs]
    assert [float(v) for v in of("bench", "run_wall_s")] == [r.wall_s for r in runs]
    assert of("bench", "snapshot") == [str(done.snapshot_path)]
    (mean,) = of("bench", "mean_tok_s")
    assert math.isclose(float(mean), done.result.overall.tok_s.mean or 0.0)
    # Per-position acceptance: one row per draft position per window that has it.
    windows = [
        e.window for e in seen.of(MetricsScraped) if e.window.per_position_acceptance is not None
    ]
    assert windows
    first = windows[0].per_position_acceptance
    assert first is not None and len(first) >= 2
    for i, rate in enumerate(first):
        assert float(of("server", f"position_acceptance_rate.{i}")[0]) == rate
    # Beside the series that were there before.
    assert of("server", "gen_tok_s") and of("gpu", "sm_clock_mhz")
    # Energy per token: each window's figure as the live GPU pane computed it from the ticks
    # before it, and a power the boards' own readings bear out.
    power, expected = PowerLog(), []
    spec = None
    for e in seen.events:
        if isinstance(e, GpuTicked):
            power.add(e.tick)
        elif isinstance(e, ServerReady):
            spec = e.info.spec
        elif isinstance(e, MetricsScraped) and e.window.dt > 0:
            expected.append(power.energy(e.window, None, spec).tokens_per_joule)
    got = [float(v) for v in of("energy", "tokens_per_joule")]
    assert got and got == [v for v in expected if v is not None]
    summed = [
        sum(s.power_w or 0.0 for s in e.tick.samples) for e in seen.of(GpuTicked) if e.tick.samples
    ]
    watts = [float(v) for v in of("energy", "gpu_power_w")]
    assert min(summed) * 0.5 <= sum(watts) / len(watts) <= max(summed) * 1.5
    # Goodput: each window with finished requests, against the default SLO, as the load pane
    # reads it from the same buckets.
    cdfs = [e.window.latency_cdf for e in seen.of(MetricsScraped) if e.window.latency_cdf]
    assert cdfs
    shares = [histogram_goodput(c, DEFAULT_SLO).ttft for c in cdfs]
    assert [float(v) for v in of("goodput", "ttft_share_low")] == [
        s.low for s in shares if s is not None
    ]
    assert [float(v) for v in of("goodput", "ttft_requests")] == [
        s.requests for s in shares if s is not None
    ]
    assert set(of("goodput", "ttft_slo_s")) == {"1.0"}
