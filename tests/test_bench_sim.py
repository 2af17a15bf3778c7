"""The benchmark on the simulator: the story replayed, interruptions, the command line.

Step latencies are 2 ms and runs are 60-80 tokens, so a whole benchmark takes well under a
second; the GPUs are simulated (``SimGpus`` behind ``FakeNvml``) and pinned to a temperature,
so their state is the same from run to run unless a test changes it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from specwatch.bench.report import results_lines
from specwatch.bench.runner import BenchEvent, run_benchmark
from specwatch.bench.snapshot import build_snapshot, read_snapshot, validate, write_snapshot
from specwatch.commands.bench import add_bench_arguments, run_bench
from specwatch.commands.compare import add_compare_arguments, run_compare
from specwatch.core.compare import VERDICT_CODE, VERDICT_GPU, VERDICT_NONE, compare
from specwatch.core.redaction import WITHHELD
from specwatch.core.snapshot_records import BenchConfig, BenchResult, Snapshot
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.nvml.sampler import GpuSampler
from tests.server_timed import server_timed
from tests.sim_fixtures import faults_of

KEY = "sk-sim-bench-7d2a91"


def cold(gpus: SimGpus) -> None:
    """Freshly started boards: cool, full boost, nothing limiting the clock."""
    gpus.set_temperature(40.0, pin=True)
    gpus.set_power_limit(800.0)


def hot(gpus: SimGpus) -> None:
    """Hours later: hot and pressed against a lower power limit (clock ~1620 of 1980 MHz)."""
    gpus.set_temperature(85.0, pin=True)
    gpus.set_power_limit(450.0)


@dataclass
class Sim:
    world: SimWorld
    server: SimServer
    sampler: GpuSampler


@contextmanager
def simulated(
    gpu_state: Callable[[SimGpus], None] = cold, api_key: str | None = None, **overrides: Any
) -> Iterator[Sim]:
    settings: dict[str, Any] = {
        "spec_algorithm": None,  # plain decode: the same steps every run, no acceptance dice
        "plain_step_ms": 2.0,
        "base_step_ms": 2.0,
        "prefill_ms": 2.0,
        "warmup_requests": 0,
        "gpu_count": 2,
        "api_key": api_key,
    }
    settings.update(overrides)
    world = SimWorld(preset(settings.pop("dialect", "sglang"), **settings))
    gpu_state(world.gpus)
    sampler = GpuSampler(nvml=FakeNvml(world.gpus))
    with SimServer(world) as server:
        try:
            yield Sim(world, server, sampler)
        finally:
            sampler.stop()


CONFIG = BenchConfig(runs=4, warmup=1, max_tokens=80, warmup_max_tokens=8, gpu_interval_s=0.05)


async def bench(
    sim: Sim,
    config: BenchConfig = CONFIG,
    on_event: Callable[[BenchEvent], None] | None = None,
    cancel: asyncio.Event | None = None,
) -> BenchResult:
    async with ServerClient(Endpoint(sim.server.url), timeout_s=10) as client:
        info = await detect(client)
        return await run_benchmark(client, info, config, sim.sampler, on_event, cancel)


def snapshot_of(result: BenchResult) -> dict[str, Any]:
    return validate(orjson.loads(orjson.dumps(build_snapshot(result, ["specwatch", "bench"]))))


STEP_MS = 5.0
"""Verdict benchmarks use 5 ms steps: 0.3 s runs hold several 50 ms GPU ticks each. Their tok/s
is the server's (:func:`server_timed`): the client's wall time on a busy machine is not."""
VERDICT_CONFIG = BenchConfig(
    runs=4, warmup=1, max_tokens=60, warmup_max_tokens=8, gpu_interval_s=0.05
)


async def bench_snapshot(gpu_state: Callable[[SimGpus], None], **overrides: Any) -> dict[str, Any]:
    with simulated(gpu_state, **{"plain_step_ms": STEP_MS, **overrides}) as sim:
        result = await bench(sim, VERDICT_CONFIG)
        assert result.ok, result.error
        truth = sim.world.truth.requests()
    # The server's own count of every measured request matches what the client counted.
    assert [r.completion_tokens for r in truth[-len(result.runs) :]] == [
        r.completion_tokens for r in result.runs
    ]
    return server_timed(snapshot_of(result), truth)


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("bench-sim")


@pytest.fixture(scope="module")
def cold_snapshot() -> dict[str, Any]:
    """The 89 tok/s day: shared by the tests that compare against it."""
    return asyncio.run(bench_snapshot(cold))


@pytest.fixture(scope="module")
def hot_snapshot() -> dict[str, Any]:
    """The 82.7 tok/s day: same server, hot power-capped GPUs."""
    return asyncio.run(bench_snapshot(hot))


def test_story_replayed_hot_gpus_explain_the_drop(
    cold_snapshot: dict[str, Any], hot_snapshot: dict[str, Any]
) -> None:
    c = compare(Snapshot.from_dict(cold_snapshot), Snapshot.from_dict(hot_snapshot))
    assert c.verdict == VERDICT_GPU, c.reason
    assert c.change is not None and -0.25 < c.change < -0.12
    assert c.attribution.clock_a_mhz == pytest.approx(1980, abs=5)
    assert c.attribution.clock_b_mhz is not None and c.attribution.clock_b_mhz < 1700
    assert c.attribution.expected_ratio == pytest.approx(c.attribution.observed_ratio, abs=0.04)
    rows = {r.name: r for r in c.rows}
    assert rows["time under pwrcap (worst GPU)"].b == "100%"
    assert rows["GPU temperature (max)"].b == "85 °C"


def test_same_gpus_slower_step_is_not_the_gpu(cold_snapshot: dict[str, Any]) -> None:
    after = asyncio.run(bench_snapshot(cold, plain_step_ms=STEP_MS * 1.3))
    c = compare(Snapshot.from_dict(cold_snapshot), Snapshot.from_dict(after))
    assert c.verdict == VERDICT_CODE, c.reason
    assert c.attribution.expected_ratio == pytest.approx(1.0, abs=0.005)
    assert c.change is not None and c.change < -0.15


def test_the_same_twice_is_no_significant_change(cold_snapshot: dict[str, Any]) -> None:
    again = asyncio.run(bench_snapshot(cold))
    c = compare(Snapshot.from_dict(cold_snapshot), Snapshot.from_dict(again))
    assert c.verdict == VERDICT_NONE, c.reason


async def test_per_run_measurements() -> None:
    with simulated(cold) as sim:
        events: list[BenchEvent] = []
        result = await bench(sim, on_event=events.append)
    kinds = [e.kind for e in events]
    assert kinds == ["warmup_done", "steady"] + ["run_start", "run_done"] * 4 + ["finished"]
    assert events[0].message == "Warmup 1/1 done (8 tokens)"
    assert re.fullmatch(
        r"Run 1/4: 80 tokens in \d+\.\d\ds = \d+\.\d tok/s \(prompt: \d+ toks\)", events[3].message
    )
    run = result.runs[0]
    assert run.completion_tokens == 80 and run.prompt_tokens
    assert run.tok_s == pytest.approx(80 / run.wall_s)
    assert run.tok_s is not None and run.decode_tok_s is not None
    assert run.tok_s < run.decode_tok_s
    assert run.ttft_s is not None and run.ttft_s > 0
    # Client-side gaps: at least the 2 ms step, more when chunks merge on a busy machine.
    assert run.step_latency_mean_s is not None and 0.0018 < run.step_latency_mean_s < 0.01
    assert run.server_counters["sglang:generation_tokens_total"] == 80
    assert [g.index for g in run.gpus] == [0, 1]
    assert all(g.sm_clock_mean_mhz == pytest.approx(1980, abs=5) for g in run.gpus)
    assert result.overall.tok_s.n == 4 and result.overall.tok_s.ci_low is not None
    assert result.series and {p.phase for p in result.series} <= {"warmup", "run", "idle"}
    assert sum(p.tok_s for p in result.series) > 0
    assert result.series[0].gpus and result.series[0].gpus[0].sm_clock_mhz is not None


async def test_llamacpp_counts_and_counter_accept_length() -> None:
    with simulated(cold, dialect="llamacpp", spec_algorithm="draft-simple") as sim:
        result = await bench(sim)
    assert result.ok
    for run in result.runs:
        assert run.completion_tokens == 80
        # The server's own per-request count, and the accept length from its counters.
        assert run.server_stats["timings"]["predicted_n"] == 80
        c = run.server_counters
        accepted = c["llamacpp:spec_decode_num_accepted_tokens_total"]
        drafts = c["llamacpp:spec_decode_num_drafts_total"]
        assert accepted > 0
        assert run.server_accept_length == pytest.approx(1 + accepted / drafts)


async def test_without_ignore_eos_runs_keep_their_real_counts() -> None:
    """A generic OpenAI server gets no ``ignore_eos``: a run that stops early (run 4 of the
    story, 1687 of 2048 tokens) counts what it produced and is not an error."""
    with simulated(cold, dialect="openai", eos_per_token=0.02) as sim:
        result = await bench(sim, BenchConfig(runs=4, warmup=0, max_tokens=80))
        truth = sim.world.truth.requests()
    assert result.ok, result.error
    counts = [r.completion_tokens for r in result.runs]
    assert counts == [t.completion_tokens for t in truth]
    assert any(n < 80 for n in counts)
    for run in result.runs:
        assert run.finish_reason == ("stop" if run.completion_tokens < 80 else "length")
        assert run.tok_s == pytest.approx(run.completion_tokens / run.wall_s)


async def test_concurrency_runs_streams_together() -> None:
    with simulated(cold) as sim:
        result = await bench(sim, BenchConfig(runs=2, warmup=0, max_tokens=40, concurrency=3))
    assert [r.streams for r in result.runs] == [3, 3]
    assert [r.completion_tokens for r in result.runs] == [120, 120]
    # a run's tok/s is its streams' together, its decode speed one stream's: said so
    lines = results_lines(result)
    assert any(line.startswith("  Decode (without TTFT, per stream): ") for line in lines), lines


async def test_cancel_midway_keeps_finished_runs(tmp_path: Path) -> None:
    cancel = asyncio.Event()

    def on_event(e: BenchEvent) -> None:
        if e.kind == "run_done" and e.index == 2:
            cancel.set()

    with simulated(cold) as sim:
        result = await bench(sim, BenchConfig(runs=5, warmup=0, max_tokens=80), on_event, cancel)
    assert result.interrupted and not result.ok
    assert [r.index for r in result.runs] == [1, 2]
    back = read_snapshot(write_snapshot(build_snapshot(result), tmp_path))
    assert back["interrupted"] is True and len(back["runs"]) == 2
    assert back["overall"]["runs"] == 2


async def test_task_cancelled_mid_stream_keeps_finished_runs() -> None:
    loop = asyncio.get_running_loop()
    second_started = loop.create_future()

    def on_event(e: BenchEvent) -> None:
        if e.kind == "run_start" and e.index == 2 and not second_started.done():
            second_started.set_result(None)

    with simulated(cold, plain_step_ms=4.0) as sim:
        config = BenchConfig(runs=3, warmup=0, max_tokens=100)
        task = asyncio.create_task(bench(sim, config, on_event))
        await second_started
        task.cancel()
        result = await task
    assert result.interrupted
    assert len(result.runs) == 1
    snapshot_of(result)


async def test_stream_failure_is_an_error_with_finished_runs_kept() -> None:
    failing = BenchConfig(runs=3, warmup=0, max_tokens=80)

    def on_event(e: BenchEvent) -> None:
        if e.kind == "run_done" and e.index == 1:
            faults_of(sim.world).drop_stream(after_chunks=3)

    with simulated(cold) as sim:
        result = await bench(sim, failing, on_event)
    assert result.error is not None and result.error.startswith("Run 2/3 failed: ")
    assert len(result.runs) == 1 and not result.interrupted
    assert snapshot_of(result)["error"] == result.error


# --- the command line -----------------------------------------------------------------------


def bench_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_bench_arguments(p)
    return p.parse_args(argv)


def compare_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_compare_arguments(p)
    return p.parse_args(argv)


def cli_bench(
    sim: Sim, extra: Sequence[str], stdout: io.StringIO | None = None
) -> tuple[int, str, str]:
    argv = ["--url", sim.server.url, "-n", "3", "--warmup", "1", "--max-tokens", "60", *extra]
    out, err = stdout or io.StringIO(), io.StringIO()
    status = run_bench(
        bench_args(argv),
        sampler=sim.sampler,
        argv=["specwatch", "bench", *argv],
        stdout=out,
        stderr=err,
    )
    return status, out.getvalue(), err.getvalue()


def test_cli_prints_like_the_story_and_writes_a_snapshot(tmp_path: Path) -> None:
    with simulated(cold) as sim:
        status, out, err = cli_bench(sim, ["--out", str(tmp_path), "--label", "cold"])
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Benchmarking {sim.server.url}"
    assert lines[1] == "  max_tokens=60, num_runs=3, warmup=1"
    assert re.fullmatch(r"  Warmup 1/1 done \(\d+ tokens\)", lines[3])
    runs = [line for line in lines if line.startswith("  Run ")]
    assert len(runs) == 3
    for i, line in enumerate(runs, start=1):
        assert re.fullmatch(
            rf"  Run {i}/3: 60 tokens in \d+\.\d\ds = \d+\.\d tok/s \(prompt: \d+ toks\)", line
        )
    assert "  ========== Results ==========" in lines
    assert any(line.startswith("  Overall: ") and "95% CI" in line for line in lines)
    assert any(line.startswith("  GPUs: slowest GPU") for line in lines)
    saved = Path(lines[-1].removeprefix("  Snapshot: "))
    assert saved.parent == tmp_path and "-cold" in saved.name
    snap = read_snapshot(saved)
    assert len(snap["runs"]) == 3
    assert snap["config"]["prompts_source"] == "builtin (seed 0)"


def test_cli_json_goes_to_stdout_progress_to_stderr(tmp_path: Path) -> None:
    with simulated(cold) as sim:
        status, out, err = cli_bench(sim, ["--out", str(tmp_path), "--json"])
    assert status == 0
    snap = validate(orjson.loads(out))
    assert len(snap["runs"]) == 3
    assert "Run 3/3" in err


def test_cli_read_only_output_is_refused_before_the_first_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ro"
    target.mkdir()
    target.chmod(0o555)
    if os.geteuid() == 0:
        # root ignores permission bits: fail the way a read-only mount does.
        def read_only(*_a: Any, **_k: Any) -> Any:
            raise OSError(30, "Read-only file system")

        monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with simulated(cold) as sim:
        status, out, err = cli_bench(sim, ["--out", str(target / "new")])
    assert status == 2
    assert "Run 1/" not in out and "Warmup" not in out
    assert err.splitlines() == [
        f"specwatch bench: cannot write snapshot to {target / 'new'}: "
        f"{'read-only file system' if os.geteuid() == 0 else 'permission denied'}; nothing measured"
    ]
    assert list(target.iterdir()) == []


def test_cli_out_under_a_file_or_proc_is_refused_before_the_first_run(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with simulated(cold) as sim:
        for out_dir, why in (
            (afile / "sub", f"{afile} is not a directory"),
            (Path("/proc/sw"), ""),
        ):
            status, out, err = cli_bench(sim, ["--out", str(out_dir)])
            assert status == 2 and "Run 1/" not in out, err
            (line,) = err.splitlines()
            assert line.startswith(f"specwatch bench: cannot write snapshot to {out_dir}: ")
            assert why in line and line.endswith("; nothing measured")


def test_cli_api_key_never_in_the_snapshot(tmp_path: Path) -> None:
    with simulated(cold, api_key=KEY) as sim:
        status, out, err = cli_bench(sim, ["--out", str(tmp_path), "--api-key", KEY])
    assert status == 0, err
    files = list(tmp_path.iterdir())
    assert len(files) == 1
    assert KEY.encode() not in files[0].read_bytes()
    assert KEY not in out and KEY not in err
    command = read_snapshot(files[0])["command"]
    # the one redaction rule keeps the option and withholds its value
    assert command[command.index("--api-key") + 1] == WITHHELD


class _SignalOnRun(io.StringIO):
    """Stdout that sends ``sig`` to this process once run 2 is printed."""

    def __init__(self, sig: int) -> None:
        super().__init__()
        self.sig = sig
        self.sent = False

    def write(self, s: str) -> int:
        n = super().write(s)
        if not self.sent and "Run 2/" in s:
            self.sent = True
            os.kill(os.getpid(), self.sig)
        return n


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_cli_signal_keeps_finished_runs(tmp_path: Path, sig: signal.Signals) -> None:
    with simulated(cold) as sim:
        argv = ["--out", str(tmp_path), "-n", "20", "--max-tokens", "60"]
        status, out, _err = cli_bench(sim, argv, stdout=_SignalOnRun(sig))
    assert status == 128 + sig
    files = list(tmp_path.iterdir())
    assert len(files) == 1
    snap = read_snapshot(files[0])
    assert snap["interrupted"] is True
    assert 2 <= len(snap["runs"]) < 20
    assert "Interrupted: " in out


def test_cli_ctrl_c_while_connecting_to_a_hung_server_stops_at_once(tmp_path: Path) -> None:
    import threading

    with simulated(cold) as sim:
        faults_of(sim.world).hang(path="/v1/models")

        def interrupt_once_held() -> None:
            if faults_of(sim.world).wait_hung(1):
                os.kill(os.getpid(), signal.SIGINT)

        sender = threading.Thread(target=interrupt_once_held)
        sender.start()
        try:
            # Without the fix Ctrl-C waited out the 60 s timeout, then failed with status 1.
            status, out, err = cli_bench(sim, ["--out", str(tmp_path), "--timeout", "60"])
        finally:
            sender.join()
            faults_of(sim.world).clear_hang()
    assert status == 128 + signal.SIGINT
    assert err == "specwatch bench: interrupted before the first run; nothing saved\n"
    assert "Results" not in out
    assert list(tmp_path.iterdir()) == []


def test_cli_ctrl_c_during_warmup_saves_nothing(tmp_path: Path) -> None:
    class SignalOnWarmup(io.StringIO):
        def write(self, s: str) -> int:
            n = super().write(s)
            if "Warmup 1/2 done" in s:
                os.kill(os.getpid(), signal.SIGINT)
            return n

    with simulated(cold) as sim:
        argv = ["--out", str(tmp_path), "--warmup", "2"]
        status, out, err = cli_bench(sim, argv, stdout=SignalOnWarmup())
    assert status == 128 + signal.SIGINT
    assert "Warmup 1/2 done" in out and "Run 1/" not in out
    assert err == "specwatch bench: interrupted before the first run; nothing saved\n"
    assert list(tmp_path.iterdir()) == []


def test_cli_closed_stdout_keeps_benchmarking_and_saves(tmp_path: Path) -> None:
    """``specwatch bench ... | head -3``: the reader goes away, the runs must not."""

    class ClosedAfterHeader(io.StringIO):
        def write(self, s: str) -> int:
            if "Benchmarking" not in self.getvalue():
                return super().write(s)
            raise BrokenPipeError(32, "Broken pipe")

    with simulated(cold) as sim:
        status, _out, err = cli_bench(sim, ["--out", str(tmp_path)], stdout=ClosedAfterHeader())
    assert status == 0, err
    (saved,) = tmp_path.iterdir()
    assert len(read_snapshot(saved)["runs"]) == 3


def test_cli_unreachable_server_is_one_line() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = io.StringIO()
    status = run_bench(
        bench_args(["--url", f"127.0.0.1:{port}", "--no-gpu"]), stdout=io.StringIO(), stderr=err
    )
    assert status == 1
    text = err.getvalue()
    assert text.startswith(f"specwatch bench: cannot connect to http://127.0.0.1:{port}/")
    assert text.endswith(": connection refused\n") and text.count("\n") == 1


def test_cli_bad_url_and_prompts_are_usage_errors(tmp_path: Path) -> None:
    err = io.StringIO()
    assert run_bench(bench_args(["--url", "ftp://x"]), stderr=err) == 2
    assert err.getvalue().startswith("specwatch bench: unsupported scheme")
    empty = tmp_path / "p.txt"
    empty.write_text("\n\n")
    err = io.StringIO()
    assert run_bench(bench_args(["--url", "h:1", "--prompts", str(empty)]), stderr=err) == 2
    assert "no prompts in it" in err.getvalue()


def test_compare_cli_on_simulated_snapshots(
    tmp_path: Path, cold_snapshot: dict[str, Any], hot_snapshot: dict[str, Any]
) -> None:
    a = write_snapshot(cold_snapshot, tmp_path)
    b = write_snapshot(hot_snapshot, tmp_path)
    out = io.StringIO()
    assert run_compare(compare_args([str(a), str(b)]), stdout=out) == 3
    text = out.getvalue()
    assert f"A: {a.name}" in text
    assert "SM clock, slowest GPU (mean)" in text
    assert "Verdict: explained by GPU state" in text
    out = io.StringIO()
    assert run_compare(compare_args([str(a), str(b), "--json"]), stdout=out) == 3
    assert orjson.loads(out.getvalue())["verdict"] == VERDICT_GPU
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    err = io.StringIO()
    assert run_compare(compare_args([str(a), str(bad)]), stderr=err) == 2
    assert err.getvalue().startswith("specwatch compare: ") and err.getvalue().count("\n") == 1


def test_cli_without_the_key_a_server_with_open_metrics_wants_saves_nothing(
    tmp_path: Path,
) -> None:
    """SGLang keeps /metrics open under --api-key, so the server is named; its streams are not
    open: the benchmark stops before a warmup, with the refusal, and saves nothing."""
    with simulated(cold, api_key=KEY) as sim:
        status, _out, err = cli_bench(sim, ["--out", str(tmp_path)])
        hits = dict(sim.world.truth.endpoint_hits)
    assert status == 1, err
    assert err.startswith("specwatch bench: API key missing or wrong: use --api-key, or"), err
    assert "/v1/models: HTTP 401" in err
    assert not tmp_path.exists() or not list(tmp_path.iterdir())
    assert not [path for path in hits if "completions" in path or "generate" in path], hits
