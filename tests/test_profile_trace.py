"""The trace reader on its own: a real vLLM CPU trace, the launch and collective names of real
traces, and hostile files (each one line, bounded)."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specwatch.core.profile import verdict
from specwatch.sim.profiler import SimStep, write_trace
from specwatch.sources.profile import trace
from specwatch.sources.profile.trace import (
    COPY,
    EAGER,
    GRAPH,
    NOT_LAUNCH,
    OTHER_KERNELS,
    TraceError,
    launch_kind,
    read_profile,
    read_rank,
)

DATA = Path(__file__).parent / "data" / "vllm_cpu_trace"
REAL = DATA / "sw_rank0.1796310335830146389.pt.trace.json.gz"


def _write(path: Path, events: list[Any], gz: bool = False) -> Path:
    data = json.dumps({"traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _span(name: str, ts: float, dur: float | None, cat: str = "user_annotation") -> dict[str, Any]:
    e: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "ts": ts}
    if dur is not None:
        e["dur"] = dur
    return e


def _call(name: str, ts: float, corr: int, cat: str = "cuda_runtime") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": 2, "args": {"correlation": corr}}


def _kernel(name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, **args},
    }


# --- a real trace ------------------------------------------------------------------------------


def test_a_real_vllm_cpu_trace_gives_the_spans_own_steps_and_says_no_gpu_activity() -> None:
    with gzip.open(REAL) as f:
        spans = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "user_annotation"]
    mean_ms = sum(e["dur"] for e in spans) / len(spans) / 1000.0
    # the server's own profiler table: 20 calls of the step span, 7.609 ms on average
    table = (DATA / "sw_rank0.profiler_out.txt").read_text()
    step = re.escape("execute_context_0(0)_generation_3(15)")
    row = re.search(step + r".*?([\d.]+)ms\s+(\d+)\s*$", table, re.M)
    assert row is not None and int(row.group(2)) == len(spans) == 20
    summary = read_profile([REAL], engine="vllm")
    (kind,) = summary.kinds
    assert kind.kind == "VERIFY k=4" and kind.n == 20
    assert kind.batch == 3 and kind.tokens == 15
    assert kind.wall_ms.mean == pytest.approx(mean_ms, rel=1e-9)
    assert round(kind.wall_ms.mean, 3) == float(row.group(1))
    assert summary.gpu_activity is False and summary.ranks[0].rank == 0
    assert kind.graph_share is None and kind.eager_launches is None
    words = verdict(summary, {})
    assert words.startswith("no GPU activity was recorded")
    assert "VERIFY k=4: 20 steps, mean 7.61 ms" in words


# --- launch and collective names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("cudaLaunchKernel", EAGER),
        ("cudaLaunchKernel_ptsz", EAGER),
        ("cudaLaunchKernelExC", EAGER),
        ("cudaLaunchKernelExC_v11060", EAGER),  # an Nsight Systems export
        ("cudaLaunchCooperativeKernel", EAGER),
        ("cuLaunchKernel", EAGER),
        ("cuLaunchKernelEx", EAGER),
        ("cudaGraphLaunch", GRAPH),
        ("cudaGraphLaunch_ptsz", GRAPH),
        ("cudaGraphLaunch_v10000", GRAPH),
        ("cudaMemcpyAsync", COPY),
        ("cudaMemsetAsync", COPY),
        ("cudaStreamSynchronize", NOT_LAUNCH),
        ("cudaGraphInstantiate", NOT_LAUNCH),
        ("cudaLaunchHostFunc", NOT_LAUNCH),
        (["cudaLaunchKernel"], NOT_LAUNCH),
        (None, NOT_LAUNCH),
    ],
)
def test_launch_names_as_kineto_and_nsys_write_them(name: object, kind: int) -> None:
    assert launch_kind(name) == kind


COLLECTIVES = [
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "ncclDevKernel_Generic_1",
    "ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)",
    "mscclKernel_Sum_hip_bfloat16_Simple",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals,"
    " vllm::Signal*, __nv_bfloat16*, int, int)",
    "void sglang::cross_device_reduce_2stage<__half, 8>(sglang::RankData*, sglang::RankSignals)",
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer"
    "::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, false, false>",
    "void (anonymous namespace)::all_reduce_one_shot_push_kernel<__nv_bfloat16, 8u, true>",
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, 2>",
]
COMPUTE = [
    "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float>>",
    "void at::native::sbtopk::gatherTopK<float, unsigned int, (int)2, (bool)0>",
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn",
    "void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float>",
]


def test_collective_kernels_by_the_names_real_traces_give_them(tmp_path: Path) -> None:
    events: list[Any] = [_span("step[DECODE bs=8]", 0, 1000)]
    for i, name in enumerate(COLLECTIVES + COMPUTE):
        events.append(_call("cudaLaunchKernel", 10 + i, i + 1))
        events.append(_kernel(name, 100 + 10 * i, 10, i + 1))
    rank = read_rank(_write(tmp_path / "c-TP-0.trace.json", events), engine="sglang")
    (kind,) = rank.kinds
    assert kind.collective_share == pytest.approx(len(COLLECTIVES) / len(events[1::2]))
    assert rank.collective_ms == pytest.approx(len(COLLECTIVES) * 0.010)


def test_graph_and_eager_launches_and_copies_inside_a_step(tmp_path: Path) -> None:
    events: list[Any] = [
        _span("step[VERIFY bs=2]", 0, 100),
        _call("cudaGraphLaunch_ptsz", 5, 1),
        _kernel("graph_a", 100, 50, 1, **{"graph id": 3}),
        _kernel("graph_b", 150, 50, 1, **{"graph id": 3}),
        _call("cuLaunchKernelEx", 10, 2, cat="cuda_driver"),
        _kernel("eager_c", 300, 50, 2),
        _call("cudaMemcpyAsync", 20, 3),
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD",
            "ts": 350,
            "dur": 50,
            "args": {"correlation": 3},
        },
    ]
    (kind,) = read_rank(_write(tmp_path / "g.json", events), engine="sglang").kinds
    assert kind.graph_launches == 1 and kind.eager_launches == 1
    assert kind.graph_share == pytest.approx(100 / 150)
    # the GPU extent is 100..400 µs; kernels and the copy cover 200 of it
    assert kind.wall_ms.mean == pytest.approx(0.300)
    assert kind.gpu_busy_ms == pytest.approx(0.200)
    assert kind.gpu_idle_ms == pytest.approx(0.100)
    assert kind.launch_ms == pytest.approx(0.004)  # the graph and kernel launch, not the copy
    assert kind.batch == 2 and kind.tokens is None


# --- hostile traces ----------------------------------------------------------------------------


def _one_line(path: Path, words: str, **kw: Any) -> str:
    with pytest.raises(TraceError) as caught:
        read_rank(path, engine="sglang", **kw)
    text = str(caught.value)
    assert words in text and "\n" not in text and path.name in text
    return text


def test_files_that_are_not_traces_get_one_line(tmp_path: Path) -> None:
    plain = _write(tmp_path / "p-TP-0.trace.json", [_span("step[VERIFY bs=1]", 0, 10)])
    cut = tmp_path / "cut.trace.json.gz"
    cut.write_bytes(gzip.compress(plain.read_bytes())[:-12])
    _one_line(cut, "truncated or corrupt gzip")
    half = tmp_path / "half.json"
    half.write_bytes(plain.read_bytes()[:-9])
    _one_line(half, "not a JSON trace")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x00\xff\xfe not json")
    _one_line(binary, "not a JSON trace")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"traceEvents": [{"name": "\xe9\xff"}]}')
    _one_line(latin, "not a JSON trace")
    other = tmp_path / "other.json"
    other.write_text('{"schemaVersion": 1, "events": []}')
    _one_line(other, "no traceEvents")
    _one_line(tmp_path / "absent.json", "cannot read")


def test_deep_nesting_is_refused_before_it_is_built(tmp_path: Path) -> None:
    # ijson's item builder holds every level's prefix: 30,000 levels (60 KB) take 2 GB
    deep = tmp_path / "deep.json"
    n = 200_000
    deep.write_bytes(b'{"traceEvents": [' + b'[{"a":' * n + b"1}]" * n + b"]}")
    _one_line(deep, "nested deeper than 1000 levels")
    # brackets inside names are not nesting, also in a string longer than a read, with
    # escaped quotes and backslashes in it
    names = [_span("step[VERIFY bs=1]", 0, 10)] + [
        _kernel("k" + "[" * 300, 1, 1, 1) for _ in range(20)
    ]
    names.append(_kernel('\\"[{\\' * 100_000, 1, 1, 1))
    assert read_rank(_write(tmp_path / "b.json", names), engine="sglang").kinds[0].n == 1
    after = tmp_path / "after.json"
    after.write_bytes(_write(tmp_path / "b.json", names).read_bytes()[:-2] + b"," + b"[" * 2000)
    _one_line(after, "nested deeper than 1000 levels")


def test_a_gzip_bomb_stops_at_the_byte_bound(tmp_path: Path) -> None:
    steps = [SimStep("VERIFY", 4, 16, 29.3, False) for _ in range(20)]
    bomb = tmp_path / "bomb-TP-0.trace.json.gz"
    write_trace(bomb, engine="sglang", rank=0, tp=1, steps=steps)
    _one_line(bomb, "larger than 1 MB uncompressed", max_bytes=1_000_000)
    assert read_rank(bomb, engine="sglang").kinds[0].n == 20


def test_odd_events_are_skipped_not_fatal(tmp_path: Path) -> None:
    events: list[Any] = [
        1,
        "x",
        None,
        [1, 2],
        {"cat": "kernel", "args": [1], "ts": 1},
        {"cat": "cuda_runtime", "name": ["cudaLaunchKernel"], "ts": 1, "args": {}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": "1", "args": {"correlation": 1}},
        {"cat": "user_annotation", "ph": "X", "name": {"a": 1}, "ts": 0, "dur": 1},
        {"cat": "user_annotation", "ph": "X", "name": "step[VERIFY bs=1]", "ts": True, "dur": 1},
        _span("step[VERIFY bs=99999999999]", 0, 5),
        _span("step[VERIFY bs=1]", 0, 10),
        _call("cudaLaunchKernel", 2, True),
        _kernel("k", 3, 1, 7),
    ]
    rank = read_rank(_write(tmp_path / "odd-TP-0.trace.json", events), engine="sglang")
    (kind,) = rank.kinds
    assert kind.kind == "VERIFY" and kind.n == 2 and kind.eager_launches == 0
    assert rank.events == len(events) - 4


def test_spans_without_an_end_out_of_order_events_and_a_missing_rank(tmp_path: Path) -> None:
    events: list[Any] = [
        _kernel("late_launch", 30, 5, 9),  # before its launch and its step
        _span("step[DECODE bs=1]", 100, 50, cat="gpu_user_annotation"),
        _call("cudaLaunchKernel", 12, 9),
        _span("step[DECODE bs=1]", 60, 10),
        _span("step[DECODE bs=1]", 10, 20),
        _span("step[DECODE bs=1]", 200, None),
    ]
    path = _write(tmp_path / "o-TP-0.trace.json", events)
    rank = read_rank(path, engine="sglang")
    (kind,) = rank.kinds
    assert kind.n == 2 and kind.eager_launches == 0.5 and rank.unclosed == 1
    assert kind.top_kernels[0].name == "late_launch"
    summary = read_profile([path, tmp_path / "o-TP-2.trace.json"], engine="sglang")
    assert summary.problems == (
        "o-TP-0.trace.json: 1 step spans without an end, left out",
        "o-TP-2.trace.json: cannot read (No such file or directory)",
        "no trace for rank 1, 2",
    )


def test_escapes_and_ten_thousand_character_names_are_cut_and_made_visible(tmp_path: Path) -> None:
    evil = "k\x1b]0;owned\x07\x1b[2J\u202e" + "x" * 10_000
    events: list[Any] = [_span("step[VERIFY bs=1]", 0, 100)]
    for i in range(50):
        events += [_call("cudaLaunchKernel", 1 + i, i), _kernel(evil + str(i % 2), 10 + i, 1, i)]
    path = _write(tmp_path / ("x\x1b[2J" + "n" * 200 + "-TP-0.json"), events)
    rank = read_rank(path, engine="sglang")
    (top,) = rank.kinds[0].top_kernels  # one name: the cut part is the same
    assert len(top.name) <= 160 and "\x1b" not in top.name and "\\x1b" in top.name
    assert "\u202e" not in top.name
    assert len(rank.file) <= 160 and "\x1b" not in rank.file
    with pytest.raises(TraceError) as caught:
        read_rank(path.with_name("y\x1b[2J.json"), engine="sglang")
    assert "\x1b" not in str(caught.value)


def test_distinct_names_kinds_and_waiting_events_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "MAX_NAMES", 10)
    monkeypatch.setattr(trace, "MAX_KINDS", 3)
    monkeypatch.setattr(trace, "MAX_LIVE", 100)

    def events() -> Iterator[Any]:
        for k in "ABCDE":
            yield _span(f"step[K{k}]", 0 if k == "A" else 10_000, 5_000)
        for i in range(500):
            yield _kernel(f"kernel_{i}", 10 + i, 1, 1000 + i)  # launches come later
        for i in range(500):
            yield _call("cudaLaunchKernel", 10 + i, 1000 + i)

    path = _write(tmp_path / "many-TP-0.json", list(events()))
    summary = read_profile([path], engine="sglang")
    assert [k.kind for k in summary.kinds] == ["KA", "KB", "KC"]
    rank = summary.ranks[0]
    # 400 kernels past the 100 kept waiting for their launch, then 400 launches past 100
    assert rank.dropped == 2 and rank.unmatched == 800
    ka = summary.kind("KA")
    assert ka is not None and ka.eager_launches == 500
    assert ka.gpu_busy_ms == pytest.approx(0.100)
    assert OTHER_KERNELS in {t.name for t in ka.top_kernels}
    assert any("800 launches or kernels past the reader's bound" in p for p in summary.problems)
    assert any("2 step spans past" in p for p in summary.problems)


# --- the verdict beside the engine's settings --------------------------------------------------


def _summary(tmp_path: Path, engine: str, steps: list[SimStep], name: str = "v-TP-0") -> Any:
    path = tmp_path / f"{name}.trace.json.gz"
    write_trace(path, engine=engine, rank=0, tp=1, steps=steps)
    return read_profile([path], engine=engine)


def test_eager_verify_reads_eager_beside_decode_in_graphs_with_the_captured_sizes(
    tmp_path: Path,
) -> None:
    steps = [SimStep("VERIFY", 4, 16, 29.3, False), SimStep("DECODE", 4, 4, 12.0, True)] * 5
    summary = _summary(tmp_path, "sglang", steps)
    verify, decode = summary.kind("VERIFY"), summary.kind("DECODE")
    assert verify.eager_launches == 600 and verify.graph_launches == 0 and verify.batch == 4
    assert decode.graph_launches == 1 and decode.eager_launches == 0
    assert verify.gpu_idle_ms > 0.3 * verify.wall_ms.mean
    settings = {"cuda_graph_max_bs": "160", "speculative_num_draft_tokens": "4"}
    words = verdict(summary, settings).split("; ")
    assert words[0] == (
        "VERIFY ran eager: 0 graph launches, 600 kernel launches a step, GPU idle"
        f" {verify.gpu_idle_ms:.1f} of {verify.wall_ms.mean:.1f} ms"
    )
    assert words[1].startswith("DECODE ran in CUDA graphs (100% of kernel time): 1 graph")
    assert words[2] == "verify cannot use the CUDA graphs decode uses"
    assert words[3] == (
        "the verify batch of 4 requests (4 x 4 = 16 tokens) is within the captured batch sizes"
        " (cuda_graph_max_bs 160)"
    )
    assert "try" not in verdict(summary, settings)  # nothing in the settings explains it


def test_the_verdict_says_what_to_try_only_where_a_setting_explains_it(tmp_path: Path) -> None:
    big = _summary(tmp_path, "sglang", [SimStep("VERIFY", 24, 96, 29.3, False)] * 3)
    words = verdict(big, {"cuda_graph_max_bs_decode": "16"})
    assert words.endswith(
        "the verify batch of 24 requests is past the largest captured batch size 16"
        " (cuda_graph_max_bs_decode): try --cuda-graph-max-bs 32"
    )
    assert verdict(big, {"disable_cuda_graph": "True", "cuda_graph_max_bs": "16"}).endswith(
        "the server runs with --disable-cuda-graph: try without it"
    )
    vllm = _summary(tmp_path, "vllm", [SimStep("VERIFY", 3, 15, 20.0, False)] * 3, "x_rank0.1")
    (kind,) = vllm.kinds
    assert kind.kind == "VERIFY k=4" and kind.tokens == 15
    assert verdict(vllm, {"max_cudagraph_capture_size": "8"}).endswith(
        "verify computes 15 tokens a step, past the largest captured size 8"
        " (max_cudagraph_capture_size): try --compilation-config"
        """ '{"max_cudagraph_capture_size": 16}'"""
    )
    assert verdict(vllm, {"cudagraph_capture_sizes": "[1, 2, 4, 8, 16, 24]"}).endswith(
        "verify's 15 tokens a step are within the captured sizes (cudagraph_capture_sizes 24)"
    )
    graphs = _summary(tmp_path, "sglang", [SimStep("VERIFY", 4, 16, 12.0, True)] * 3, "g-TP-0")
    words = verdict(graphs, {"cuda_graph_max_bs": "2"})
    assert words.startswith("VERIFY ran in CUDA graphs (100% of kernel time): 1 graph launches")
    assert "captured" not in words and "try" not in words


def test_the_simulator_writes_gzip_by_choice_and_a_slow_rank_waits_nobody(tmp_path: Path) -> None:
    steps = [SimStep("VERIFY", 4, 16, 12.0, True)] * 4
    plain = tmp_path / "p-TP-0.trace.json.gz"
    write_trace(plain, engine="sglang", rank=0, tp=1, steps=steps, gz=False)
    assert plain.read_bytes()[:1] == b"{"
    paths = []
    for rank in range(8):
        path = tmp_path / f"tp-TP-{rank}.trace.json"
        write_trace(
            path, engine="sglang", rank=rank, tp=8, steps=steps, slow_rank=3, slow_factor=1.25
        )
        paths.append(path)
    summary = read_profile(paths, engine="sglang")
    assert len(summary.ranks) == 8 and summary.slowest_rank == 3
    assert summary.spread == pytest.approx(0.25, abs=0.02)
    walls = [r.kinds[0].wall_ms.mean for r in summary.ranks]
    assert max(walls) - min(walls) < 0.01 * max(walls)  # the others wait inside the collective
    fast = summary.ranks[0]
    assert fast.collective_ms > summary.ranks[3].collective_ms
