"""Windowed readings from hand-written /metrics expositions, per dialect and version."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from specwatch.core.server import Dialect, MetricsWindow, ServerInfo, SpecConfig, version_tuple
from specwatch.sources.dialects.llamacpp import REASON_METRICS as REASON_LLAMACPP_METRICS
from specwatch.sources.dialects.sglang import REASON_METRICS as REASON_SGLANG_METRICS
from specwatch.sources.watcher import MetricsWatcher, summed_counters
from tests.conftest import FakeServer, text_response

URL = "http://127.0.0.1:8000"


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _info(dialect: Dialect, version: str, spec: SpecConfig | None = None) -> ServerInfo:
    return ServerInfo(
        base_url=URL,
        dialect=dialect,
        version=version,
        model="m",
        spec=spec or SpecConfig(enabled=True),
        metrics_enabled=True,
    )


def _hist(name: str, labels: str, buckets: dict[str, float], total: float, count: float) -> str:
    sep = "," if labels else ""
    lines = [f"# TYPE {name} histogram"]
    for le, c in buckets.items():
        lines.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {c}')
    lines.append(f"{name}_sum{{{labels}}} {total}")
    lines.append(f"{name}_count{{{labels}}} {count}")
    return "\n".join(lines)


class Feed:
    """Serves /metrics texts in turn; the test moves the clock between scrapes."""

    def __init__(self, server: FakeServer) -> None:
        self.text = ""
        self.headers: dict[str, str] = {}
        self.status = 200
        server.routes["GET /metrics"] = self.respond

    def respond(self, request: httpx.Request) -> httpx.Response:
        return text_response(self.text, self.status, self.headers)


async def _two(
    server: FakeServer,
    info: ServerInfo,
    first: str,
    second: str,
    dt: float,
    headers: tuple[dict[str, str], dict[str, str]] = ({}, {}),
) -> tuple[MetricsWindow, MetricsWindow]:
    feed = Feed(server)
    clock = Clock()
    async with server.client() as client:
        watcher = MetricsWatcher(client, info, clock=clock)
        feed.text, feed.headers = first, headers[0]
        w1 = await watcher.scrape()
        clock.t += dt
        feed.text, feed.headers = second, headers[1]
        w2 = await watcher.scrape()
    return w1, w2


# --- SGLang ---------------------------------------------------------------------------------

SGL_SCHED = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"'
SGL_TOK = 'model_name="m",engine_type="unified"'


def sglang_0523(v: dict[str, float]) -> str:
    return "\n".join(
        [
            "# TYPE sglang:realtime_tokens_total counter",
            f'sglang:realtime_tokens_total{{{SGL_TOK},mode="decode"}} {v["decode"]}',
            f'sglang:realtime_tokens_total{{{SGL_TOK},mode="prefill_compute"}} {v["decode"] * 3}',
            "# TYPE sglang:cuda_graph_passes_total counter",
            f'sglang:cuda_graph_passes_total{{{SGL_SCHED},mode="decode_cuda_graph"}} '
            f"{v['passes'] - 5}",
            f'sglang:cuda_graph_passes_total{{{SGL_SCHED},mode="decode_none"}} 5',
            f'sglang:cuda_graph_passes_total{{{SGL_SCHED},mode="prefill_none"}} {v["passes"] * 7}',
            "# TYPE sglang:generation_tokens_total counter",
            f'sglang:generation_tokens_total{{{SGL_TOK},is_streaming="true"}} {v["gen"] - 40}',
            f'sglang:generation_tokens_total{{{SGL_TOK},is_streaming="false"}} 40',
            "# TYPE sglang:num_requests_total counter",
            f"sglang:num_requests_total{{{SGL_TOK}}} {v['requests']}",
            "# TYPE sglang:spec_verify_calls_total counter",
            f"sglang:spec_verify_calls_total{{{SGL_SCHED}}} {v['verify']}",
            "# TYPE sglang:num_running_reqs gauge",
            f"sglang:num_running_reqs{{{SGL_SCHED}}} {v['running']}",
            "# TYPE sglang:num_queue_reqs gauge",
            f"sglang:num_queue_reqs{{{SGL_SCHED}}} 0",
            "# TYPE sglang:spec_accept_length gauge",
            f"sglang:spec_accept_length{{{SGL_SCHED}}} 2.5",
            "# TYPE sglang:spec_accept_rate gauge",
            f"sglang:spec_accept_rate{{{SGL_SCHED}}} 0.5",
            "# TYPE sglang:gen_throughput gauge",
            f"sglang:gen_throughput{{{SGL_SCHED}}} 999",
            _hist(
                "sglang:inter_token_latency_seconds",
                SGL_TOK,
                {"0.002": 0, "0.005": v["itl_n"], "+Inf": v["itl_n"]},
                v["itl_sum"],
                v["itl_n"],
            ),
            _hist(
                "sglang:time_to_first_token_seconds",
                SGL_TOK,
                {"0.1": v["requests"], "+Inf": v["requests"]},
                v["requests"] * 0.05,
                v["requests"],
            ),
            "",
        ]
    )


SGL_SPEC = SpecConfig(enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=4, topk=1)


async def test_sglang_0523_windowed_from_counters(fake_server: FakeServer) -> None:
    a = dict(
        decode=1000, passes=300, gen=900, requests=10, verify=250, running=1, itl_n=900, itl_sum=3.0
    )
    b = dict(
        decode=1600,
        passes=500,
        gen=1540,
        requests=12,
        verify=450,
        running=1,
        itl_n=1500,
        itl_sum=4.8,
    )
    w1, w2 = await _two(
        fake_server, _info(Dialect.SGLANG, "0.5.23", SGL_SPEC), sglang_0523(a), sglang_0523(b), 2.0
    )
    assert w1.dt == 0.0 and w1.gen_tok_s is None and "window" in w1.notes
    # lifetime: (900 - 10) / 250
    assert w1.lifetime_accept_length == pytest.approx(890 / 250)
    assert w2.dt == 2.0 and not w2.restarted
    # decode tokens plus one first (prefill) token per TTFT observation
    assert w2.tokens == 602
    assert w2.gen_tok_s == pytest.approx(301.0)
    assert "realtime_tokens_total" in w2.sources["gen_tok_s"]
    assert "time_to_first_token_seconds_count" in w2.sources["gen_tok_s"]
    # (Δgen - Δrequests) / Δverify = (640 - 2) / 200
    assert w2.accept_length == pytest.approx(638 / 200)
    assert "spec_verify_calls_total" in w2.sources["accept_length"]
    assert w2.draft_acceptance_rate == pytest.approx((638 / 200 - 1) / 3)
    assert w2.itl_s == pytest.approx(1.8 / 600)
    # the pass time (issue 22 item 6: one method, not ITL × the finished requests' length)
    assert w2.step_latency_s == pytest.approx(2.0 / 200)
    assert "cuda_graph_passes_total" in w2.sources["step_latency_s"]
    assert w2.ttft_s == pytest.approx(0.05)
    assert w2.requests_running == 1 and w2.requests_waiting == 0
    assert w2.step_latency_p50_s is None and "per token" in w2.notes["step_latency_p50_s"]


async def test_sglang_0523_no_request_finished_holds_instead_of_the_gauge(
    fake_server: FakeServer,
) -> None:
    a = dict(
        decode=1000, passes=300, gen=900, requests=10, verify=250, running=1, itl_n=900, itl_sum=3.0
    )
    b = dict(a, decode=1300, passes=400)
    _, w2 = await _two(
        fake_server, _info(Dialect.SGLANG, "0.5.23", SGL_SPEC), sglang_0523(a), sglang_0523(b), 1.0
    )
    assert w2.gen_tok_s == pytest.approx(300.0)
    # the gauges (2.5, 0.5) are there, but this server's source is the counters: nothing to show
    assert w2.accept_length is None and "accept_length" not in w2.sources
    assert w2.notes["accept_length"].startswith("no verify step finished in this window")
    assert w2.draft_acceptance_rate is None
    assert "no verify step finished" in w2.notes["draft_acceptance_rate"]
    assert w2.lifetime_accept_length == pytest.approx(890 / 250)
    # busy at both ends: Δt / Δdecode passes (prefill passes excluded)
    assert w2.step_latency_s == pytest.approx(1.0 / 100)
    assert "cuda_graph_passes_total" in w2.sources["step_latency_s"]


async def test_sglang_idle_window_has_no_step_latency(fake_server: FakeServer) -> None:
    a = dict(
        decode=1000, passes=300, gen=900, requests=10, verify=250, running=0, itl_n=900, itl_sum=3.0
    )
    _, w2 = await _two(
        fake_server, _info(Dialect.SGLANG, "0.5.23", SGL_SPEC), sglang_0523(a), sglang_0523(a), 1.0
    )
    assert w2.gen_tok_s == 0.0
    assert w2.step_latency_s is None and "step_latency_s" in w2.notes


def sglang_046(v: dict[str, float]) -> str:
    labels = 'model_name="m"'
    return "\n".join(
        [
            "# TYPE sglang:gen_throughput gauge",
            f"sglang:gen_throughput{{{labels}}} {v['gen_tp']}",
            "# TYPE sglang:spec_accept_length gauge",
            f"sglang:spec_accept_length{{{labels}}} {v['accept']}",
            "# TYPE sglang:num_running_reqs gauge",
            f"sglang:num_running_reqs{{{labels}}} 2",
            "# TYPE sglang:num_queue_reqs gauge",
            f"sglang:num_queue_reqs{{{labels}}} 1",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{{{labels}}} {v['gen']}",
            _hist(
                "sglang:inter_token_latency_seconds",
                labels,
                {"0.01": v["itl_n"], "+Inf": v["itl_n"]},
                v["itl_sum"],
                v["itl_n"],
            ),
            _hist(
                "sglang:time_to_first_token_seconds",
                labels,
                {"0.1": v["n"], "+Inf": v["n"]},
                v["ttft_sum"],
                v["n"],
            ),
            "",
        ]
    )


async def test_sglang_046_uses_gauges_with_notes(fake_server: FakeServer) -> None:
    a = dict(gen_tp=250.0, accept=2.8, gen=100, itl_n=100, itl_sum=0.4, n=2, ttft_sum=0.1)
    b = dict(gen_tp=260.0, accept=2.8, gen=500, itl_n=500, itl_sum=2.0, n=4, ttft_sum=0.2)
    _, w = await _two(
        fake_server,
        _info(Dialect.SGLANG, "0.4.6.post5", SGL_SPEC),
        sglang_046(a),
        sglang_046(b),
        2.0,
    )
    assert w.gen_tok_s == 260.0 and "gen_throughput" in w.sources["gen_tok_s"]
    assert "no live token counter" in w.notes["gen_tok_s"]
    assert w.tokens is None and "< 0.5.9" in w.notes["tokens"]
    assert w.accept_length == 2.8 and "40" in w.notes["accept_length"]
    # the old rate gauge has another formula: drafts-only rate derived from the length
    assert w.draft_acceptance_rate == pytest.approx(1.8 / 3)
    # per-token ITL × accept length
    assert w.itl_s == pytest.approx(1.6 / 400)
    assert w.step_latency_s == pytest.approx(1.6 / 400 * 2.8)
    assert w.ttft_s == pytest.approx(0.05)
    assert w.lifetime_accept_length is None
    assert w.requests_running == 2 and w.requests_waiting == 1


def sglang_dp(decode0: float, decode1: float, running: int) -> str:
    lines = ["# TYPE sglang:realtime_tokens_total counter"]
    # tokenizer counter: one series; scheduler gauges: two DP ranks x two TP replicas
    lines.append(
        f'sglang:realtime_tokens_total{{model_name="m",mode="decode"}} {decode0 + decode1}'
    )
    lines.append("# TYPE sglang:num_running_reqs gauge")
    for dp in (0, 1):
        for tp in (0, 1):
            lines.append(f'sglang:num_running_reqs{{dp_rank="{dp}",tp_rank="{tp}"}} {running}')
    lines.append("# TYPE sglang:cuda_graph_passes_total counter")
    for dp, n in ((0, decode0), (1, decode1)):
        for tp in (0, 1):
            lines.append(
                f'sglang:cuda_graph_passes_total{{dp_rank="{dp}",tp_rank="{tp}",'
                f'mode="decode_cuda_graph"}} {n / 2}'
            )
    return "\n".join(lines) + "\n"


async def test_sglang_dp_ranks_summed_tp_replicas_once(fake_server: FakeServer) -> None:
    _, w = await _two(
        fake_server,
        _info(Dialect.SGLANG, "0.5.23", SGL_SPEC),
        sglang_dp(100, 100, 3),
        sglang_dp(400, 300, 3),
        1.0,
    )
    assert w.gen_tok_s == pytest.approx(500.0)
    assert w.requests_running == 6  # 2 DP ranks x 3, TP replicas once


# --- vLLM -----------------------------------------------------------------------------------


def vllm_text(
    v: dict[str, float], version: str, engines: int = 1, created: float = 1.7e9, positions: int = 3
) -> str:
    itl = (
        "vllm:time_per_output_token_seconds"
        if version_tuple(version) < (0, 11)
        else "vllm:inter_token_latency_seconds"
    )
    cache = (
        "vllm:gpu_cache_usage_perc"
        if version_tuple(version) < (0, 11)
        else "vllm:kv_cache_usage_perc"
    )
    lines: list[str] = []
    for e in range(engines):
        lab = f'engine="{e}",model_name="m"'
        share = 1.0 / engines
        lines += [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{lab}}} {v['running']}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{lab}}} 0",
            f"# TYPE {cache} gauge",
            f"{cache}{{{lab}}} 0.25",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{lab}}} {v['gen'] * share}",
            f"vllm:generation_tokens_created{{{lab}}} {created}",
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f"vllm:spec_decode_num_drafts_total{{{lab}}} {v['drafts'] * share}",
            f"vllm:spec_decode_num_drafts_created{{{lab}}} {created}",
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
            f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {v['drafts'] * positions * share}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
            f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {v['acc'] * share}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        for p in range(positions):
            lines.append(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{p}"}} '
                f"{v[f'pos{p}'] * share}"
            )
        lines.append(
            _hist(
                itl,
                lab,
                {
                    "0.01": v["itl_fast"] * share,
                    "0.025": v["itl_n"] * share,
                    "+Inf": v["itl_n"] * share,
                },
                v["itl_sum"] * share,
                v["itl_n"] * share,
            )
        )
    return "\n".join(lines) + "\n"


VA = dict(
    running=2,
    gen=1000,
    drafts=400,
    acc=600,
    pos0=300,
    pos1=200,
    pos2=100,
    itl_fast=0,
    itl_n=400,
    itl_sum=6.0,
)
VB = dict(
    running=2,
    gen=2000,
    drafts=700,
    acc=1350,
    pos0=540,
    pos1=440,
    pos2=370,
    itl_fast=0,
    itl_n=700,
    itl_sum=10.5,
)


@pytest.mark.parametrize("version", ["0.9.2", "0.11.0", "0.20.0", "0.33.0"])
@pytest.mark.parametrize("engines", [1, 2])
async def test_vllm_windowed_across_versions_and_dp(
    fake_server: FakeServer, version: str, engines: int
) -> None:
    w1, w = await _two(
        fake_server,
        _info(Dialect.VLLM, version),
        vllm_text(VA, version, engines),
        vllm_text(VB, version, engines),
        4.0,
    )
    assert w1.lifetime_accept_length == pytest.approx(1 + 600 / 400)
    assert w1.lifetime_acceptance_rate == pytest.approx(600 / 1200)
    assert w.gen_tok_s == pytest.approx(1000 / 4.0)
    assert w.tokens == pytest.approx(1000)
    assert w.accept_length == pytest.approx(1 + 750 / 300)
    assert w.draft_acceptance_rate == pytest.approx(750 / 900)
    assert w.per_position_acceptance == pytest.approx((240 / 300, 240 / 300, 270 / 300))
    assert w.step_latency_s == pytest.approx(4.5 / 300)
    # every observation in (0.01, 0.025]: median interpolates to the middle
    assert w.step_latency_p50_s == pytest.approx(0.0175)
    assert w.requests_running == 2 * engines
    expected_itl = (
        "time_per_output_token" if version_tuple(version) < (0, 11) else "inter_token_latency"
    )
    assert expected_itl in w.sources["step_latency_s"]
    assert not w.restarted


async def test_vllm_steps_without_a_draft_lower_tokens_per_step_not_accept_length(
    fake_server: FakeServer,
) -> None:
    # 300 drafted steps of 500 (an n-gram that found no match in 200): the accept length is
    # the drafted steps' own; tokens per step count every step the latency was paid for
    more = {**VB, "itl_n": VA["itl_n"] + 500, "itl_sum": VA["itl_sum"] + 7.5}
    _, w = await _two(
        fake_server,
        _info(Dialect.VLLM, "0.33.0"),
        vllm_text(VA, "0.33.0", 1),
        vllm_text(more, "0.33.0", 1),
        4.0,
    )
    assert w.accept_length == pytest.approx(1 + 750 / 300)
    assert w.decode_steps == 500 and w.spec_drafts == 300
    assert w.tokens_per_step == pytest.approx(1 + 750 / 500)
    assert w.step_tokens == w.tokens_per_step
    assert "decode steps" in w.sources["tokens_per_step"]
    # every step drafted: the two agree
    _, same = await _two(
        fake_server,
        _info(Dialect.VLLM, "0.33.0"),
        vllm_text(VA, "0.33.0", 1),
        vllm_text(VB, "0.33.0", 1),
        4.0,
    )
    assert same.tokens_per_step == pytest.approx(same.accept_length)


async def test_vllm_spec_off_notes(fake_server: FakeServer) -> None:
    text = (
        '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} 10\n'
    )
    _, w = await _two(
        fake_server,
        _info(Dialect.VLLM, "0.33.0", SpecConfig(enabled=False)),
        text,
        text.replace(" 10\n", " 30\n"),
        1.0,
    )
    assert w.gen_tok_s == 20.0
    assert w.accept_length is None and "off" in w.notes["accept_length"]
    assert w.tokens_per_step is None and w.step_tokens is None  # no steps counted here


async def test_vllm_disable_log_stats(fake_server: FakeServer) -> None:
    text = "# TYPE python_gc_objects_collected_total counter\npython_gc_objects_collected_total 5\n"
    _, w = await _two(fake_server, _info(Dialect.VLLM, "0.33.0"), text, text, 1.0)
    assert "--disable-log-stats" in w.notes["metrics"]
    assert w.gen_tok_s is None


# --- restarts -------------------------------------------------------------------------------


async def test_counter_decrease_is_a_restart(fake_server: FakeServer) -> None:
    feed = Feed(fake_server)
    clock = Clock()
    async with fake_server.client() as client:
        watcher = MetricsWatcher(client, _info(Dialect.VLLM, "0.33.0"), clock=clock)
        feed.text = vllm_text(VB, "0.33.0")
        await watcher.scrape()
        clock.t += 1
        feed.text = vllm_text(VA, "0.33.0", created=1.8e9)
        w = await watcher.scrape()
        assert w.restarted and w.dt == 0.0 and w.gen_tok_s is None
        assert "restart" in w.notes
        clock.t += 2
        feed.text = vllm_text(VB, "0.33.0", created=1.8e9)
        w3 = await watcher.scrape()
    assert not w3.restarted and w3.dt == 2.0
    assert w3.gen_tok_s == pytest.approx(500.0)


async def test_vllm_created_change_is_a_restart_even_if_counters_grew(
    fake_server: FakeServer,
) -> None:
    big = {k: (v * 10 if isinstance(v, (int, float)) else v) for k, v in VB.items()}
    _, w = await _two(
        fake_server,
        _info(Dialect.VLLM, "0.33.0"),
        vllm_text(VA, "0.33.0", created=1.7e9),
        vllm_text(big, "0.33.0", created=1.7e9 + 500),
        1.0,
    )
    assert w.restarted and w.gen_tok_s is None


# --- llama.cpp ------------------------------------------------------------------------------


def llamacpp_text(v: dict[str, float], spec_counters: bool = True) -> str:
    lines = [
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.",
        "# TYPE llamacpp:prompt_tokens_total counter",
        f"llamacpp:prompt_tokens_total {v['prompt']}",
        "# TYPE llamacpp:tokens_predicted_total counter",
        f"llamacpp:tokens_predicted_total {v['tokens']}",
        "# TYPE llamacpp:tokens_predicted_seconds_total counter",
        f"llamacpp:tokens_predicted_seconds_total {v['seconds']}",
        "# TYPE llamacpp:n_decode_total counter",
        f"llamacpp:n_decode_total {v['decodes']}",
        "# TYPE llamacpp:predicted_tokens_seconds gauge",
        "llamacpp:predicted_tokens_seconds 123.4",
        "# TYPE llamacpp:requests_processing gauge",
        f"llamacpp:requests_processing {v['busy']}",
        "# TYPE llamacpp:requests_deferred gauge",
        "llamacpp:requests_deferred 0",
    ]
    if spec_counters:
        lines += [
            "# TYPE llamacpp:spec_decode_num_draft_tokens_total counter",
            f"llamacpp:spec_decode_num_draft_tokens_total {v['draft_tokens']}",
            "# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter",
            f"llamacpp:spec_decode_num_accepted_tokens_total {v['acc']}",
            "# TYPE llamacpp:spec_decode_num_drafts_total counter",
            f"llamacpp:spec_decode_num_drafts_total {v['drafts']}",
            "# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter",
            f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} {v["p0"]}',
            f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="1"}} {v["p1"]}',
        ]
    return "\n".join(lines) + "\n"


LA = dict(
    prompt=10,
    tokens=512,
    seconds=0.5,
    decodes=300,
    busy=0,
    draft_tokens=900,
    acc=300,
    drafts=300,
    p0=200,
    p1=100,
)
LB = dict(
    prompt=20,
    tokens=1024,
    seconds=1.0,
    decodes=600,
    busy=0,
    draft_tokens=1800,
    acc=620,
    drafts=590,
    p0=410,
    p1=210,
)
LLAMA_SPEC = SpecConfig(enabled=True, algorithm="draft-simple", source="/slots")


async def test_llamacpp_new_build_after_a_request_finished(fake_server: FakeServer) -> None:
    hdr = {"Process-Start-Time-Unix": "1700000000"}
    w1, w = await _two(
        fake_server,
        _info(Dialect.LLAMACPP, "b6500-0c1e570", LLAMA_SPEC),
        llamacpp_text(LA),
        llamacpp_text(LB),
        2.0,
        (hdr, hdr),
    )
    assert w1.lifetime_accept_length == pytest.approx(2.0)
    assert w.tokens == 512 and w.gen_tok_s == pytest.approx(256.0)
    # no /slots here (404): the rate comes from the counter alone, and the note says why
    assert w.notes["counters"] == (
        "llama.cpp counters move only when a request finishes; "
        "no live rate: /slots answered HTTP 404 (started with --no-slots?)"
    )
    assert w.accept_length == pytest.approx(1 + 320 / 290)
    assert w.draft_acceptance_rate == pytest.approx(320 / 900)
    assert w.per_position_acceptance == pytest.approx((210 / 290, 110 / 290))
    # generation seconds over the finished request's steps: tokens − accepted − its free first
    assert w.decode_steps == 512 - 320 - 1
    assert w.step_latency_s == pytest.approx(0.5 / (512 - 320 - 1))
    assert "precision" not in w.notes
    assert not w.restarted


async def test_llamacpp_counters_past_a_million_are_said_to_be_rounded(
    fake_server: FakeServer,
) -> None:
    # llama-server's "%g"-style output: 6 significant digits, so 1234567 prints as 1.23457e+06
    big_a = dict(LA, tokens=1.23457e06, seconds=5000.0)
    big_b = dict(LB, tokens=1.23508e06, seconds=5001.0)
    _, w = await _two(
        fake_server,
        _info(Dialect.LLAMACPP, "b6500-0c1e570", LLAMA_SPEC),
        llamacpp_text(big_a),
        llamacpp_text(big_b),
        2.0,
    )
    assert w.step_latency_s is not None
    assert "6 significant digits (1.23508e+06)" in w.notes["precision"]
    assert w.notes["precision"].endswith("known to ±10 only")


async def test_llamacpp_mid_request_reports_nothing_moved(fake_server: FakeServer) -> None:
    busy = dict(LA, busy=1, decodes=450)
    _, w = await _two(
        fake_server,
        _info(Dialect.LLAMACPP, "b6500-0c1e570", LLAMA_SPEC),
        llamacpp_text(LA),
        llamacpp_text(busy),
        1.0,
    )
    assert w.gen_tok_s is None and "only when a request finishes" in w.notes["gen_tok_s"]
    assert w.accept_length is None and "no speculative request finished" in w.notes["accept_length"]
    assert w.requests_running == 1


async def test_llamacpp_old_build_without_spec_counters(fake_server: FakeServer) -> None:
    _, w = await _two(
        fake_server,
        _info(Dialect.LLAMACPP, "b5000-abc", LLAMA_SPEC),
        llamacpp_text(LA, spec_counters=False),
        llamacpp_text(LB, spec_counters=False),
        2.0,
    )
    assert w.gen_tok_s == pytest.approx(256.0)
    assert w.accept_length is None and "26389" in w.notes["accept_length"]


async def test_llamacpp_start_time_header_change_is_a_restart(fake_server: FakeServer) -> None:
    _, w = await _two(
        fake_server,
        _info(Dialect.LLAMACPP, "b6500-0c1e570", LLAMA_SPEC),
        llamacpp_text(LA),
        llamacpp_text(LB),
        2.0,
        ({"Process-Start-Time-Unix": "1700000000"}, {"Process-Start-Time-Unix": "1700000100"}),
    )
    assert w.restarted and w.dt == 0.0


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "status", "reason"),
    [
        (Dialect.SGLANG, 404, REASON_SGLANG_METRICS),
        (Dialect.LLAMACPP, 501, REASON_LLAMACPP_METRICS),
    ],
)
async def test_metrics_endpoint_missing_gives_the_reason(
    fake_server: FakeServer, dialect: Dialect, status: int, reason: str
) -> None:
    fake_server.routes["GET /metrics"] = text_response("nope", status)
    async with fake_server.client() as client:
        w = await MetricsWatcher(client, _info(dialect, "x")).scrape()
    assert w.notes["error"] == reason


async def test_metrics_off_known_at_detection_does_not_request(fake_server: FakeServer) -> None:
    info = ServerInfo(
        base_url=URL,
        dialect=Dialect.SGLANG,
        metrics_enabled=False,
        metrics_reason=REASON_SGLANG_METRICS,
    )
    async with fake_server.client() as client:
        w = await MetricsWatcher(client, info).scrape()
    assert w.notes["metrics"] == REASON_SGLANG_METRICS
    assert fake_server.requests == []


async def test_unreachable_and_garbage_never_raise(fake_server: FakeServer) -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    fake_server.routes["GET /metrics"] = boom
    async with fake_server.client() as client:
        watcher = MetricsWatcher(client, _info(Dialect.VLLM, "0.33.0"))
        w = await watcher.scrape()
        assert w.notes["error"] == f"cannot connect to {URL}/metrics: connection refused"
        fake_server.routes["GET /metrics"] = text_response("<html>\x00\xff garbage {{{")
        w = await watcher.scrape()
    assert "unparseable" in w.notes["parse"]
    assert w.notes["error"] == f"{URL}/metrics: the answer is not Prometheus text"


async def test_derivation_bug_becomes_a_note(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specwatch.sources.dialects.vllm import VllmDialect

    def broken(*args: Any) -> None:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(VllmDialect, "derive_window", broken)
    fake_server.routes["GET /metrics"] = text_response(vllm_text(VA, "0.33.0"))
    async with fake_server.client() as client:
        w = await MetricsWatcher(client, _info(Dialect.VLLM, "0.33.0")).scrape()
    assert "oops" in w.notes["error"]


async def test_last_counters_for_benchmark_deltas(fake_server: FakeServer) -> None:
    fake_server.routes["GET /metrics"] = text_response(vllm_text(VA, "0.33.0", engines=2))
    async with fake_server.client() as client:
        watcher = MetricsWatcher(client, _info(Dialect.VLLM, "0.33.0"))
        await watcher.scrape()
    c = watcher.last_counters
    assert c["vllm:generation_tokens_total"] == pytest.approx(1000)
    assert c['vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}'] == pytest.approx(
        300
    )
    assert c["vllm:inter_token_latency_seconds_count"] == pytest.approx(400)
    assert summed_counters(watcher.last_scrape) == c  # type: ignore[arg-type]
