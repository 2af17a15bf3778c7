"""``specwatch bench --demo``: the story replayed from the command line, end to end."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from specwatch.bench.snapshot import read_snapshot
from specwatch.commands.main import build_parser
from specwatch.core.compare import VERDICT_CODE, VERDICT_GPU, compare
from specwatch.core.snapshot_records import Snapshot
from specwatch.sim import demo
from specwatch.sim.demo import StoryServer, start_story_server
from specwatch.sim.truth import RequestTruth
from tests.server_timed import server_timed

# A third of the default step latency keeps each benchmark under two seconds; the GPU state
# and the slowdown act on it the same way.
FAST = ("--demo-step-factor", "0.3")


def _bench(tmp_path: Path, *extra: str) -> Path:
    return _bench_on(tmp_path, *extra)[0]


def _bench_on(tmp_path: Path, *extra: str) -> tuple[Path, list[RequestTruth]]:
    """Run ``bench`` on the command line; the snapshot and the story server's finished requests."""
    out = tmp_path / "snaps"
    before = set(out.glob("*.json")) if out.exists() else set()
    argv = ["bench", "-n", "5", "--max-tokens", "256", "--out", str(out), *extra]
    args = build_parser().parse_args(argv)
    from specwatch.commands.bench import run_bench

    servers: list[StoryServer] = []

    def keep(*a: Any, **k: Any) -> StoryServer:
        servers.append(start_story_server(*a, **k))
        return servers[-1]

    stdout = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(demo, "start_story_server", keep)
        code = run_bench(args, argv=argv, stdout=stdout, stderr=io.StringIO())
    assert code == 0, stdout.getvalue()
    (new,) = set(out.glob("*.json")) - before
    return new, [r for s in servers for r in s.world.truth.requests()]


@pytest.mark.slow
def test_cold_against_warm_gpus_is_explained_by_gpu_state(tmp_path: Path) -> None:
    # Judged on the server's timing: see tests/server_timed.py for why (the client's wall time
    # on a loaded machine turned this into "no significant change").
    cold_path, cold_truth = _bench_on(tmp_path, "--demo", "cold", *FAST, "--label", "cold")
    warm_path, warm_truth = _bench_on(tmp_path, "--demo", "hot", *FAST, "--label", "hot")
    cold = server_timed(read_snapshot(cold_path), cold_truth)
    warm = server_timed(read_snapshot(warm_path), warm_truth)
    assert cold["gpu_environment"] or cold["runs"][0]["gpus"]
    c = compare(Snapshot.from_dict(cold), Snapshot.from_dict(warm))
    assert c.verdict == VERDICT_GPU, c.reason
    assert c.change is not None and -0.12 < c.change < -0.04


def _without_host(snap: dict[str, Any]) -> dict[str, Any]:
    """``snap`` without its host CPU readings: in a test run they describe the suite's own
    workers beside the simulator (a run queue of 4 on 2 cores in one benchmark and 1.4 in the
    other was judged host contention, rightly), which this test does not control."""
    runs = [{k: v for k, v in run.items() if k != "host_cpu"} for run in snap["runs"]]
    return {**{k: v for k, v in snap.items() if k != "host_cpu"}, "runs": runs}


@pytest.mark.slow
def test_same_gpus_slower_step_is_the_code(tmp_path: Path) -> None:
    cold_path, cold_truth = _bench_on(tmp_path, "--demo", "cold", *FAST)
    slower_path, slower_truth = _bench_on(tmp_path, "--demo", "cold", "--demo-step-factor", "0.345")
    cold = _without_host(server_timed(read_snapshot(cold_path), cold_truth))
    slower = _without_host(server_timed(read_snapshot(slower_path), slower_truth))
    c = compare(Snapshot.from_dict(cold), Snapshot.from_dict(slower))
    assert c.verdict == VERDICT_CODE, c.reason


def test_demo_and_url_together_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from specwatch.commands.main import main

    assert main(["bench", "--demo", "cold", "--url", "localhost:1"]) == 2
    assert "not both" in capsys.readouterr().err
    from specwatch.commands.bench import run_bench
    from specwatch.commands.main import build_parser

    # Unsettled (main gives it http://localhost:8000): called directly without a server.
    assert run_bench(build_parser().parse_args(["bench"])) == 2
    assert "--url is required" in capsys.readouterr().err


def test_a_list_of_concurrencies_writes_one_snapshot_each(tmp_path: Path) -> None:
    from specwatch.commands.bench import run_bench

    out = tmp_path / "snaps"
    argv = ["bench", "--demo", "cold", *FAST, "-n", "2", "--warmup", "0", "--max-tokens", "48"]
    argv += ["-c", "1,2,1", "--label", "sweep", "--out", str(out)]
    stdout = io.StringIO()
    assert run_bench(build_parser().parse_args(argv), argv=argv, stdout=stdout) == 0
    snaps = [read_snapshot(p) for p in sorted(out.glob("*.json"))]
    assert sorted((s["config"]["concurrency"], s["label"]) for s in snaps) == [
        (1, "sweep-c1"),
        (2, "sweep-c2"),
    ]
    assert stdout.getvalue().count("Benchmarking ") == 2
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "-c", "1,0"])
    err = io.StringIO()
    args = build_parser().parse_args(["bench", "--demo", "cold", "-c", "1,4", "--json"])
    assert run_bench(args, stderr=err) == 2 and "give one concurrency" in err.getvalue()
