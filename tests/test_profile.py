"""``specwatch profile`` on the simulator (SGLang and vLLM profilers over HTTP, Kineto traces of the
simulated steps) and the trace reader on hostile files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from specwatch.commands.main import main
from specwatch.core.profile import compare_profiles, profile_from_json
from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.presets import preset
from specwatch.sim.profiler import SimStep, write_trace
from specwatch.sources.profile.trace import TraceError, read_profile, read_rank
from tests.sim_testing import serving


def _config(dialect: Dialect, **over: Any) -> SimConfig:
    base = {
        "base_step_ms": 12.0,
        "plain_step_ms": 12.0,
        "warmup_requests": 0,
        "background_concurrency": 4,
        "gpu_count": 1,
    }
    return preset(dialect.value, **{**base, **over})


def _profile(url: str, out: Path, capsys: pytest.CaptureFixture[str], *more: str) -> dict[str, Any]:
    status = main(["profile", url, "--steps", "10", "--out", str(out), "--json", *more])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    doc: dict[str, Any] = orjson.loads(captured.out)
    return doc


def test_eager_verify_reads_verify_ran_eager_beside_draft_in_graphs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(_config(Dialect.SGLANG, verify_eager=True)) as (_, server):
        doc = _profile(server.url, tmp_path, capsys)
    assert doc["engine"]["name"] == "sglang"
    verify = next(k for k in doc["kinds"] if k["kind"] == "VERIFY")
    draft = next(k for k in doc["kinds"] if k["kind"] == "DRAFT")
    assert verify["graph_launches"] == 0
    assert verify["eager_launches"] >= 100
    assert verify["graph_share"] == 0.0
    assert draft["graph_share"] == 1.0
    assert verify["gpu_idle_ms"] > 0.2 * verify["wall_ms"]["mean"]
    # eager verify: the seed's 29 ms against 12 ms in graphs
    assert 25.0 < verify["wall_ms"]["mean"] < 34.0
    assert doc["verdict"].startswith("VERIFY ran eager: 0 graph launches, ")
    assert "kernel launches a step, GPU idle" in doc["verdict"]
    # SGLang wrote the traces where it was asked, beside the profile
    (trace,) = doc["trace_files"]
    assert Path(trace["path"]).parent.parent == tmp_path
    assert "-TP-0-DECODE.trace.json.gz" in trace["path"]


def test_graph_verify_reads_verify_in_graphs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(_config(Dialect.SGLANG)) as (_, server):
        doc = _profile(server.url, tmp_path, capsys)
    verify = next(k for k in doc["kinds"] if k["kind"] == "VERIFY")
    assert verify["graph_launches"] == 1 and verify["eager_launches"] == 0
    assert doc["verdict"].startswith("VERIFY ran in CUDA graphs (100% of kernel time)")
    # a graph step returns on the CPU at once: its time is the GPU-side extent, not 60 µs
    assert 10.0 < verify["wall_ms"]["mean"] < 14.0


def test_tp8_gives_eight_rank_files_the_spread_and_the_slowest_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(_config(Dialect.SGLANG, tp_size=8, slow_rank=5)) as (_, server):
        doc = _profile(server.url, tmp_path, capsys)
    assert len(doc["trace_files"]) == 8
    assert len(doc["ranks"]) == 8
    assert doc["slowest_rank"] == 5
    assert 0.15 < doc["spread"] < 0.35
    verify = next(k for k in doc["kinds"] if k["kind"] == "VERIFY")
    assert verify["collective_share"] > 0.1
    assert any("ncclDevKernel_AllReduce" in t["name"] for t in verify["top_kernels"])
    assert "slowest rank 5" in doc["verdict"]
    # the slow rank's wall time is no longer than the others': they wait inside the collective
    walls = {r["rank"]: r["kinds"][0]["wall_ms"]["mean"] for r in doc["ranks"]}
    assert max(walls.values()) - min(walls.values()) < 0.05 * walls[5]


def test_vllm_profile_is_stopped_and_a_new_start_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "vllm"
    traces.mkdir()
    with serving(_config(Dialect.VLLM, profiler_dir=str(traces))) as (_, server):
        doc = _profile(server.url, tmp_path / "out", capsys, "--trace-dir", str(traces))
        again = httpx.post(server.url + "/start_profile", json={"profile_prefix": "x"})
        assert again.status_code == 200
        assert httpx.post(server.url + "/start_profile", json={}).status_code == 409
        assert httpx.post(server.url + "/stop_profile").status_code == 200
    assert doc["stopped"] is True
    (verify,) = doc["kinds"]
    assert verify["kind"] == "VERIFY k=3" and verify["n"] == 10


def test_vllm_without_a_profiler_and_llamacpp_get_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(_config(Dialect.VLLM)) as (_, server):
        assert httpx.post(server.url + "/start_profile", json={}).status_code == 404
        status = main(["profile", server.url, "--out", str(tmp_path), "--trace-dir", "/tmp/x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert [line for line in err if "--profiler-config" in line] == [err[-1]]
    assert "HTTP 404" in err[-1]
    with serving(_config(Dialect.LLAMACPP)) as (_, server):
        status = main(["profile", server.url, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1 and "no profiler endpoint" in err[0]


def test_a_second_profile_while_one_runs_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(_config(Dialect.SGLANG, background_concurrency=0)) as (_, server):
        body = {"output_dir": str(tmp_path), "num_steps": 5}
        assert httpx.post(server.url + "/start_profile", json=body).status_code == 200
        status = main(["profile", server.url, "--out", str(tmp_path), "--capture", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and "already profiling" in err[-1]


def test_two_profiles_compare_by_what_moved(tmp_path: Path) -> None:
    steps_graph = [SimStep("VERIFY", 4, 16, 12.0, True) for _ in range(5)]
    steps_eager = [SimStep("VERIFY", 4, 16, 29.3, False) for _ in range(5)]
    a, b = tmp_path / "a-TP-0.trace.json.gz", tmp_path / "b-TP-0.trace.json.gz"
    write_trace(a, engine="sglang", rank=0, tp=1, steps=steps_graph)
    write_trace(b, engine="sglang", rank=0, tp=1, steps=steps_eager)
    pa, pb = read_profile([a], engine="sglang"), read_profile([b], engine="sglang")
    (line,) = compare_profiles(pa, pb)
    assert line.startswith("VERIFY: step 12.0 → 29.3 ms (+144%); in graphs 100% → 0%")
    from specwatch.core.profile import profile_to_json

    back = profile_from_json({"kind": "profile", **profile_to_json(pb)})
    assert back.kinds == pb.kinds


# --- hostile traces ---------------------------------------------------------------------------


def _trace(path: Path, events: list[Any], gz: bool = False) -> Path:
    data = json.dumps({"traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _step(name: str, ts: float, dur: float | None) -> dict[str, Any]:
    e: dict[str, Any] = {"ph": "X", "cat": "user_annotation", "name": name, "ts": ts}
    if dur is not None:
        e["dur"] = dur
    return e


def test_hostile_traces_get_one_line_each(tmp_path: Path) -> None:
    good = _trace(tmp_path / "g.json", [_step("step[VERIFY bs=1]", 0, 10)], gz=True)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(good.read_bytes()[:-12])
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\xffnot json at all")
    for path, words in ((cut, "truncated or corrupt gzip"), (bad, "not a JSON trace")):
        with pytest.raises(TraceError) as caught:
            read_rank(path, engine="sglang")
        assert words in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(TraceError):
        read_rank(garbage, engine="sglang")


def test_unclosed_spans_out_of_order_events_and_long_names(tmp_path: Path) -> None:
    long = "k\x1b[2J" + "x" * 10_000
    events: list[Any] = [
        # a kernel before its launch and its step (out of order)
        {"ph": "X", "cat": "kernel", "name": long, "ts": 5, "dur": 3, "args": {"correlation": 9}},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "ts": 2,
            "dur": 1,
            "args": {"correlation": 9},
        },
        _step("step[VERIFY bs=1]", 0, 10),
        _step("step[VERIFY bs=1]", 50, None),
    ]
    rank = read_rank(_trace(tmp_path / "r-TP-0.trace.json", events), engine="sglang")
    (verify,) = rank.kinds
    assert verify.n == 1 and verify.eager_launches == 1
    assert rank.unclosed == 1
    (top,) = verify.top_kernels
    assert len(top.name) <= 160 and "\x1b" not in top.name
    summary = read_profile(
        [tmp_path / "r-TP-0.trace.json", tmp_path / "r-TP-2.trace.json"], engine="sglang"
    )
    assert any("without an end" in p for p in summary.problems)
    assert any("cannot read" in p for p in summary.problems)


def test_compare_of_two_profile_files_says_what_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = []
    for eager in (False, True):
        with serving(_config(Dialect.SGLANG, verify_eager=eager)) as (_, server):
            docs.append(_profile(server.url, tmp_path / str(eager), capsys))
    files = [next((tmp_path / str(e)).glob("specwatch-*-profile.json")) for e in (False, True)]
    assert main(["compare", str(files[0]), str(files[1])]) == 0
    out = capsys.readouterr().out
    assert "VERIFY: step " in out and "in graphs 100% → 0%" in out
    assert "VERIFY ran eager" in out
    assert main(["compare", str(files[0]), str(tmp_path / "nope.json")]) == 2
