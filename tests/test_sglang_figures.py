"""Issue 22 item 9: the figures SGLang gives that specwatch did not show.

Expositions and payloads are hand-written in the shape of the SGLang wheel each test names.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.style import Style

from specwatch.bench.aggregate import combine_streams
from specwatch.commands.advise import run_advise
from specwatch.commands.main import build_parser
from specwatch.core.acceptance import (
    acceptance_table,
    counts_from_histograms,
    drafts_histogram,
    refusal,
)
from specwatch.core.draft_advisor import PlainBaseline, advice_lines, advise
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo, SpecConfig, StreamResult
from specwatch.core.step_cost import plain_steps
from specwatch.record import Recorder
from specwatch.session import events as ev
from specwatch.sim.presets import preset
from specwatch.sources.detect import detect
from specwatch.sources.dialects.base import SIDE_EVERY_S, WindowBuilder
from specwatch.sources.dialects.sglang import DIALECT
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.metrics.parse import parse_metrics
from specwatch.sources.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.status import spec_summary
from specwatch.ui.panes.verify import verify_text
from tests.advisor_sim import held_batch_windows, info_of, plain_of, vllm_config
from tests.conftest import FakeServer, text_response
from tests.scene import scene_server
from tests.sim_fixtures import ManualClock
from tests.sim_testing import in_thread, metric_value, serving
from tests.test_advise_cli import record_windows
from tests.test_compare import synthetic_result
from tests.test_sim_sglang import full_boost

URL = "http://127.0.0.1:30000"


def sglang_info(version: str, ndt: int | None = 4, topk: int | None = 1) -> ServerInfo:
    spec = SpecConfig(
        enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=ndt, topk=topk
    )
    return ServerInfo(URL, Dialect.SGLANG, version=version, model="m", spec=spec)


# --- (b) per-request drafts acceptance where SGLang counts no accepted drafts ----------------

# 0.4.10.post2 tokenizer_manager.py: the final meta_info carries spec_verify_ct alone
FINAL_0_4_10: dict[str, Any] = {"spec_verify_ct": 4}
# 0.5.3 tokenizer_manager.py: spec_accept_rate over speculative_num_steps, prefill token included
FINAL_0_5_3: dict[str, Any] = {
    "spec_verify_ct": 4,
    "spec_accept_length": 10 / 4,
    "spec_accept_rate": (10 - 4) / (4 * 3),
}


@pytest.mark.parametrize(
    ("version", "final"), [("0.4.10.post2", FINAL_0_4_10), ("0.5.3", FINAL_0_5_3)]
)
def test_drafts_acceptance_from_verify_count(version: str, final: dict[str, Any]) -> None:
    # 10 tokens: 1 from prefill, 4 verify steps each with its bonus token, so 5 accepted
    # drafts out of 4 × (4 − 1) proposed
    notes: dict[str, str] = {}
    length, rate = DIALECT.spec_figures(sglang_info(version), dict(final), 10, notes)
    assert length == pytest.approx(10 / 4)
    assert rate == pytest.approx(5 / 12)
    assert "spec_verify_ct" in notes["draft_acceptance_rate"]


def test_drafts_acceptance_not_derived_for_a_tree() -> None:
    notes: dict[str, str] = {}
    _, rate = DIALECT.spec_figures(
        sglang_info("0.4.10.post2", ndt=8, topk=4), dict(FINAL_0_4_10), 10, notes
    )
    assert rate is None


# --- (d) speculative_eagle_topk in the header; a tree is refused by the advisor -------------

# 0.5.23 /server_info (http_server.py get_server_info: the flat server args)
SERVER_INFO_0_5_23_TREE: dict[str, Any] = {
    "model_path": "meta-llama/Llama-3.1-8B-Instruct",
    "served_model_name": "llama",
    "tp_size": 1,
    "dp_size": 1,
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 5,
    "speculative_eagle_topk": 4,
    "speculative_num_draft_tokens": 8,
    "enable_metrics": True,
    "internal_states": [{"avg_spec_accept_length": 3.4, "last_gen_throughput": 80.0}],
    "version": "0.5.23",
}


async def test_topk_is_read_shown_and_a_tree_refused(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": {
                "object": "list",
                "data": [{"id": "llama", "object": "model", "owned_by": "sglang"}],
            },
            "GET /ready": text_response("ok"),
            "GET /server_info": SERVER_INFO_0_5_23_TREE,
            "GET /metrics": text_response("# TYPE sglang:num_running_reqs gauge\n"),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.spec.topk == 4
    assert spec_summary(info.spec) == "EAGLE steps 5 topk 4 (tree) draft 8"
    assert "tree drafting (topk=4)" in (refusal(info.spec) or "")
    chain = SpecConfig(enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=4, topk=1)
    assert spec_summary(chain) == "EAGLE3 steps 3 topk 1 draft 4"


# --- (e) the share of verify passes run under CUDA graphs ------------------------------------


def _sched(rank: int, extra: str = "") -> str:
    # 0.5.23 scheduler labels, sorted as prometheus_client writes them (metrics_collector.py)
    return (
        f'dp_rank="{rank}",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",'
        f'tp_rank="{rank}"{extra}'
    )


def _passes_0_5_23(graphed: tuple[int, int], none: tuple[int, int]) -> str:
    lines = [
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        f"sglang:num_running_reqs{{{_sched(0)}}} 2.0",
        f"sglang:num_running_reqs{{{_sched(1)}}} 2.0",
        "# HELP sglang:cuda_graph_passes_total Number of forward passes by mode.",
        "# TYPE sglang:cuda_graph_passes_total counter",
    ]
    for rank in (0, 1):
        lines += [
            f'sglang:cuda_graph_passes_total{{{_sched(rank)},mode="decode_cuda_graph"}} '
            f"{float(graphed[rank])}",
            f'sglang:cuda_graph_passes_total{{{_sched(rank)},mode="decode_none"}} '
            f"{float(none[rank])}",
            f'sglang:cuda_graph_passes_total{{{_sched(rank)},mode="prefill_none"}} 3.0',
        ]
    return "\n".join(lines) + "\n"


def _derive(version: str, before: str | None, after: str, dt: float) -> WindowBuilder:
    b = WindowBuilder()
    DIALECT.derive_window(
        b,
        parse_metrics(after),
        None if before is None else parse_metrics(before),
        dt,
        sglang_info(version),
    )
    return b


def test_cuda_graph_share_from_passes_by_mode_0_5_23() -> None:
    # rank 0: 40 passes, all in graphs; rank 1: 30 in graphs, 10 without (a batch shape with
    # no captured graph)
    before = _passes_0_5_23((100, 100), (0, 5))
    after = _passes_0_5_23((140, 130), (0, 15))
    b = _derive("0.5.23", before, after, 1.16)
    assert b.values["cuda_graph_share"] == pytest.approx(70 / 80)
    assert 'mode="decode_none"' not in b.sources["cuda_graph_share"]
    # the pass time still counts every decode pass of a rank, in a graph or not
    assert b.values["step_latency_s"] == pytest.approx(1.16 / 40)


def test_cuda_graph_share_from_the_gauge_without_the_counter() -> None:
    # 0.5.4: is_cuda_graph per rank (the last decode batch), no cuda_graph_passes_total
    text = (
        "# HELP sglang:is_cuda_graph Whether the batch is using CUDA graph.\n"
        "# TYPE sglang:is_cuda_graph gauge\n"
        f"sglang:is_cuda_graph{{{_sched(0)}}} 1.0\n"
        f"sglang:is_cuda_graph{{{_sched(1)}}} 0.0\n"
    )
    b = _derive("0.5.4", text, text, 1.0)
    assert b.values["cuda_graph_share"] == pytest.approx(0.5)
    assert "is_cuda_graph" in b.sources["cuda_graph_share"]


@pytest.mark.parametrize(("cliffs", "share"), [((), 1.0), (((1, 3.0),), 0.0)])
def test_the_simulator_counts_passes_outside_graphs_at_a_cliff(
    cliffs: tuple[tuple[int, float], ...], share: float
) -> None:
    # a verify cliff is a batch shape with no captured graph: its passes are decode_none
    clock = ManualClock()
    cfg = preset("sglang", "0.5.23", warmup_requests=0, verify_cliffs=cliffs)
    with serving(cfg, clock) as (world, server):
        url = server.url
        body = {"text": "x", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}
        fut = in_thread(lambda: httpx.post(url + "/generate", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(0.3)
        before = httpx.get(url + "/metrics").text
        clock.set(0.6)
        after = httpx.get(url + "/metrics").text
        clock.set(60.0)
        fut.result(timeout=10)
    graphed = metric_value(after, "sglang:cuda_graph_passes_total", mode="decode_cuda_graph")
    assert graphed is not None and metric_value(after, "sglang:is_cuda_graph") == share
    b = _derive("0.5.23", before, after, 0.3)
    assert b.values["cuda_graph_share"] == share


def test_the_verify_pane_shows_the_cuda_graph_share() -> None:
    tones = {k: Style() for k in ("label", "value", "dim", "good", "bad")}
    model = MonitorModel(baseline_ms=12.0, baseline_source="--baseline-itl")
    model.set_ready(0.0, scene_server())
    model.add_window(MetricsWindow(t=1.0, dt=1.0, step_latency_s=0.029, cuda_graph_share=0.875))
    first = verify_text(model, tones).plain.splitlines()[0]
    assert "graphs 88%" in first
    assert " graphs 88%" in verify_text(model, tones, width=20).plain.splitlines()[0]
    # a narrow pane drops a full share (the usual case) rather than the percentiles
    model.add_window(MetricsWindow(t=2.0, dt=1.0, step_latency_s=0.029, cuda_graph_share=1.0))
    assert "graphs" not in verify_text(model, tones, width=20).plain.splitlines()[0]
    assert "graphs 100%" in verify_text(model, tones).plain.splitlines()[0]


def test_the_advisor_says_when_verify_ran_outside_graphs() -> None:
    windows = [
        MetricsWindow(t=float(t), dt=1.0, requests_running=2.0, cuda_graph_share=share)
        for t, share in ((1, 1.0), (2, 0.5))
    ]
    advice = advise(windows, sglang_info("0.5.23"), None)
    assert any("25% of verify passes ran outside CUDA graphs" in n for n in advice.notes)
    one = advise(windows[:1], sglang_info("0.5.23"), None)
    assert not any("CUDA graphs" in n for n in one.notes)


# --- (a) the lifetime accept length from /server_info where no counter gives it -------------

# 0.5.9 /server_info: two data-parallel ranks, each with its own lifetime figure
# (scheduler.py get_internal_state: spec_total_num_accept_tokens / spec_total_num_forward_ct)
SERVER_INFO_0_5_9: dict[str, Any] = {
    "model_path": "m",
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "dp_size": 2,
    "internal_states": [
        {"avg_spec_accept_length": 2.6, "last_gen_throughput": 80.0},
        {"avg_spec_accept_length": 3.0, "last_gen_throughput": 80.0},
    ],
    "version": "0.5.9",
}
# 0.5.9 /metrics: no spec_verify_calls_total (from 0.5.15.post1)
METRICS_0_5_9 = (
    "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.\n"
    "# TYPE sglang:spec_accept_length gauge\n"
    f"sglang:spec_accept_length{{{_sched(0)}}} 2.5\n"
    f"sglang:spec_accept_length{{{_sched(1)}}} 3.1\n"
)


async def test_lifetime_accept_length_from_server_info(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {"GET /server_info": SERVER_INFO_0_5_9, "GET /metrics": text_response(METRICS_0_5_9)}
    )
    info = replace(
        sglang_info("0.5.9"), spec=replace(sglang_info("0.5.9").spec, source="/server_info")
    )
    now = [100.0]
    async with fake_server.client() as client:
        watcher = MetricsWatcher(client, info, clock=lambda: now[0])
        first = await watcher.scrape()
        now[0] += 1.0
        second = await watcher.scrape()
        now[0] += SIDE_EVERY_S
        await watcher.scrape()
    for w in (first, second):
        assert w.lifetime_accept_length == pytest.approx(2.8)
        assert w.lifetime_acceptance_rate == pytest.approx(1.8 / 3)
        assert "avg_spec_accept_length" in w.sources["lifetime_accept_length"]
        assert "lifetime_accept_length" not in w.notes
    # read once per SIDE_EVERY_S, never an endpoint that runs the model
    assert fake_server.paths().count("/server_info") == 2
    assert not {"/health", "/health_generate", "/generate"} & set(fake_server.paths())


async def test_no_server_info_read_where_the_counter_exists(fake_server: FakeServer) -> None:
    metrics = METRICS_0_5_9 + (
        "# TYPE sglang:spec_verify_calls_total counter\n"
        'sglang:spec_verify_calls_total{model_name="m"} 10.0\n'
    )
    fake_server.routes.update(
        {"GET /server_info": SERVER_INFO_0_5_9, "GET /metrics": text_response(metrics)}
    )
    async with fake_server.client() as client:
        await MetricsWatcher(client, sglang_info("0.5.23")).scrape()
    assert "/server_info" not in fake_server.paths()


# --- (c) per-position acceptance from the per-request accepted-drafts histograms ------------

# 0.5.23 final meta_info (tokenizer_manager.py _calculate_spec_decoding_metrics): the verify
# steps of each request that accepted exactly j drafts, j = 0..num_draft_tokens − 1
FINALS_0_5_23: list[dict[str, Any]] = [
    {"spec_verify_ct": 15, "spec_correct_drafts_histogram": [2, 3, 4, 6]},
    {"spec_verify_ct": 10, "spec_correct_drafts_histogram": [1, 2, 3, 4]},
]


def test_histograms_become_chain_counts() -> None:
    counts = counts_from_histograms(
        h for f in FINALS_0_5_23 if (h := drafts_histogram(f)) is not None
    )
    assert counts is not None
    # exactly 0..3 drafts accepted: 3, 5, 7, 10 of 25 steps; position i accepted in Σ_{j>=i}
    assert counts.drafts == 25
    assert counts.accepted_per_pos == (22, 17, 10)
    table = acceptance_table(counts, sglang_info("0.5.23").spec, min_drafts=1)
    assert [e.value for e in table.p] == pytest.approx([22 / 25, 17 / 25, 10 / 25])
    # the 0.5.10 name
    assert drafts_histogram({"spec_accept_histogram": [1, 2]}) == (1.0, 2.0)


def _as_histogram(w: MetricsWindow) -> list[float]:
    per_pos = list(w.spec_accepted_per_pos or ())
    drafts = w.spec_drafts or 0.0
    return [drafts - per_pos[0]] + [
        a - b for a, b in zip(per_pos, [*per_pos[1:], 0.0], strict=True)
    ]


def test_advise_on_an_sglang_recording_with_a_benchmark_in_it(tmp_path: Path) -> None:
    # SGLang's windows carry no per-position counts; its benchmark's streams do, per request
    config = vllm_config(num_steps=3, num_draft_tokens=3, acceptance=(0.8, 0.6, 0.45))
    batches = [1, 4, 8]
    counted = held_batch_windows(config, batches, windows_per_batch=6, window_s=1.0)
    plain = held_batch_windows(plain_of(config), batches, windows_per_batch=3, window_s=0.5)
    info = sglang_info("0.5.23")  # num_draft_tokens 4: three drafts a step, K = 3
    windows = [
        replace(w, spec_drafts=None, spec_accepted_per_pos=None, decode_steps=None) for w in counted
    ]
    result = synthetic_result([80.0] * len(counted))
    runs = tuple(
        replace(r, server_stats={"spec_correct_drafts_histogram": _as_histogram(w)})
        for r, w in zip(result.runs, counted, strict=True)
    )
    path = record_windows(tmp_path / "sglang.sqlite", info, windows)
    rec = Recorder(
        path, [Endpoint("http://sim")], clock=lambda: windows[-1].t, wall_clock=lambda: 0.0
    )
    rec.start()
    rec(ev.BenchFinished("finished", replace(result, runs=runs), None, None))
    rec.stop()
    plain_file = record_windows(tmp_path / "plain.sqlite", info_of(plain_of(config)), plain)
    args = build_parser().parse_args(["advise", str(path), "--baseline", str(plain_file)])
    out = io.StringIO()
    code = run_advise(args, stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    assert code == 0, text
    without_drafts_hit = [replace(w, decode_steps=None) for w in counted]
    expected = advise(without_drafts_hit, info, PlainBaseline(plain_steps(plain), "x"))
    assert expected.recommendation is not None
    assert text.splitlines()[1] == advice_lines(expected)[0]
    assert "streamed requests' accepted-drafts histograms" in text
    # without the benchmark's histograms the same windows are advised from the accept length
    # alone, under the constant per-position model, and say so
    bare = advise(windows, info, PlainBaseline(plain_steps(plain), "x"))
    assert any("constant per-position acceptance" in n for n in bare.notes), bare.notes
    assert not any("constant per-position acceptance" in n for n in expected.notes)


# --- item 7: the running count lags a prefill until the next decode log tick -----------------


def test_the_simulator_holds_the_pre_prefill_batch_until_the_40_pass_tick() -> None:
    clock = ManualClock()
    cfg = preset("sglang", "0.5.23", warmup_requests=0, prefill_ms=12.0)
    step = cfg.base_step_ms / 1000
    body = {"text": "x", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}

    def running_at(url: str, t: float) -> float | None:
        clock.set(t)
        return metric_value(httpx.get(url + "/metrics").text, "sglang:num_running_reqs")

    with serving(cfg, clock, full_boost()) as (world, server):
        url = server.url
        first = in_thread(lambda: httpx.post(url + "/generate", json=body, timeout=10))
        assert world.wait_submitted(1)
        assert running_at(url, 0.012 + 39.5 * step) == 0.0  # written at its prefill: 0 before
        assert running_at(url, 0.012 + 40.5 * step) == 1.0  # the 40th pass's tick
        second = in_thread(lambda: httpx.post(url + "/generate", json=body, timeout=10))
        assert world.wait_submitted(2)
        assert running_at(url, clock.now() + 0.05) == 1.0  # the batch the new one had not joined
        prefills = [s for s in world.truth.steps() if s.prefill_requests]
        passes = [s for s in world.truth.steps() if s.decode_requests == 2]
        assert len(prefills) == 2 and 0 < len(passes) < 40
        # by the next tick (at most 40 passes later) both are counted
        assert running_at(url, clock.now() + 41 * (step + 2 * cfg.batch_step_ms / 1000)) == 2.0
        clock.set(1000.0)
        first.result(timeout=10)
        second.result(timeout=10)


def test_the_running_count_says_it_is_sampled_on_the_log_tick() -> None:
    text = _passes_0_5_23((10, 10), (0, 0))
    b = _derive("0.5.23", None, text, 0.0)
    assert b.values["requests_running"] == 4.0
    assert "sampled on SGLang's log ticks" in b.sources["requests_running"]
    assert "every --decode-log-interval decode passes" in b.sources["requests_running"]


def test_a_run_sums_the_histograms_of_its_streams() -> None:
    def stream(hist: list[int]) -> StreamResult:
        return StreamResult(
            completion_tokens=10,
            prompt_tokens=5,
            wall_s=1.0,
            ttft_s=0.1,
            decode_s=0.9,
            tok_s=10.0,
            decode_tok_s=10.0,
            counts_exact=True,
            count_source="meta_info.completion_tokens",
            server_stats={"spec_verify_ct": 5, "spec_correct_drafts_histogram": hist},
        )

    run = combine_streams(
        [stream([2, 3, 4, 6]), stream([1, 2, 3, 4])],
        index=1,
        warmup=False,
        prompt_index=0,
        t_start=0.0,
        t_end=1.0,
        wall_s=1.0,
    )
    assert drafts_histogram(run.server_stats) == (3.0, 5.0, 7.0, 10.0)
    assert run.server_stats["spec_verify_ct"] == 5  # the rest is the first stream's


def test_a_full_share_gives_way_to_the_percentiles_a_low_one_does_not() -> None:
    tones = {k: Style() for k in ("label", "value", "dim", "good", "bad")}
    model = MonitorModel(baseline_ms=12.0, baseline_source="--baseline-itl")
    model.set_ready(0.0, scene_server())
    for share in (1.0, 0.5):
        model.add_window(
            MetricsWindow(
                t=1.0 + share,
                dt=1.0,
                step_latency_s=0.029,
                step_latency_p50_s=0.028,
                cuda_graph_share=share,
            )
        )
        first = verify_text(model, tones).plain.splitlines()[0]
        at_graphs, at_p50 = first.index("graphs"), first.index("p50")
        assert (at_graphs > at_p50) if share == 1.0 else (at_graphs < at_p50), first
