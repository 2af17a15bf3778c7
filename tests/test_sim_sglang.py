"""The simulated SGLang server: endpoints, metric names and update timing per version."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from specwatch.core.server import version_tuple
from specwatch.sim.config import SimConfig
from specwatch.sim.gpus import SimGpus
from specwatch.sim.presets import preset
from tests.sim_fixtures import ManualClock
from tests.sim_testing import (
    FAST,
    in_thread,
    metric_names,
    metric_value,
    serving,
    sse_data,
)

VERSIONS = ("0.4.6.post5", "0.4.10.post2", "0.5.4", "0.5.10", "0.5.16", "0.5.23")


def _at_least(version: str, floor: str) -> bool:
    return version_tuple(version) >= version_tuple(floor)


def fast(version: str, **kw: Any) -> SimConfig:
    return preset("sglang", version, **{**FAST, **kw})


@pytest.mark.parametrize("version", VERSIONS)
def test_identity_and_info_endpoints_per_version(version: str) -> None:
    with serving(fast(version)) as (world, server), httpx.Client(base_url=server.url) as c:
        card = c.get("/v1/models").json()["data"][0]
        assert card["owned_by"] == "sglang"
        assert card["id"] == world.config.model
        new_names = _at_least(version, "0.5.10")
        info_path = "/server_info" if new_names else "/get_server_info"
        info = c.get(info_path).json()
        assert info["version"] == version
        assert info["speculative_algorithm"] == "EAGLE3"
        assert info["speculative_num_steps"] == 3
        assert info["speculative_num_draft_tokens"] == 4
        assert info["tp_size"] == 1
        assert "--speculative-algorithm EAGLE3" in info["launch_command"]
        assert isinstance(info["internal_states"], list)
        assert c.get("/get_server_info").status_code == 200  # deprecated alias stays
        assert c.get("/server_info").status_code == (200 if new_names else 404)
        assert c.get("/model_info").status_code == (200 if new_names else 404)
        assert c.get("/get_model_info").json()["model_path"] == world.config.model
        assert c.get("/ready").status_code == (200 if version == "0.5.23" else 404)
        if _at_least(version, "0.5.16"):
            assert "cuda_graph_max_bs_decode" in info
        else:
            assert "disable_cuda_graph" in info


def test_health_is_a_generation_from_0_4_10_and_plain_before() -> None:
    with serving(fast("0.4.6.post5")) as (world, server):
        assert httpx.get(server.url + "/health").status_code == 200
        assert world.truth.health_generations == 0
        assert world.truth.steps() == []
    with serving(fast("0.4.10.post2")) as (world, server):
        assert httpx.get(server.url + "/health").status_code == 200
        assert world.truth.health_generations == 1
        assert len(world.truth.steps()) == 1  # the one-token prefill
        assert world.truth.requests() == []  # not a user request
    with serving(fast("0.5.23")) as (world, server):
        assert httpx.get(server.url + "/ready").status_code == 200
        assert httpx.get(server.url + "/model_info").status_code == 200
        assert world.truth.health_generations == 0
        httpx.get(server.url + "/health_generate")
        assert world.truth.health_generations == 1


def test_metrics_off_gives_404() -> None:
    with serving(fast("0.5.23", metrics_enabled=False)) as (_, server):
        r = httpx.get(server.url + "/metrics")
        assert r.status_code == 404
        assert "--enable-metrics" not in r.text  # FastAPI's plain 404 body
        assert r.json() == {"detail": "Not Found"}


EXPECTED_NAMES: dict[str, tuple[set[str], set[str]]] = {
    # version: (present, absent)
    "0.4.6.post5": (
        {"sglang:gen_throughput", "sglang:spec_accept_length", "sglang:generation_tokens_total",
         "sglang:inter_token_latency_seconds_count"},
        {"sglang:spec_accept_rate", "sglang:realtime_tokens_total",
         "sglang:cuda_graph_passes_total", "sglang:spec_verify_calls_total",
         "sglang:queue_time_seconds_count"},
    ),
    "0.5.4": (
        {"sglang:spec_accept_rate", "sglang:queue_time_seconds_count", "sglang:is_cuda_graph"},
        {"sglang:realtime_tokens_total", "sglang:spec_verify_calls_total"},
    ),
    "0.5.10": (
        {"sglang:realtime_tokens_total", "sglang:cuda_graph_passes_total"},
        {"sglang:spec_verify_calls_total", "sglang:spec_num_steps"},
    ),
    "0.5.16": (
        {"sglang:spec_verify_calls_total", "sglang:spec_num_steps",
         "sglang:spec_num_draft_tokens"},
        {"sglang:request_time_per_output_token_seconds_count"},
    ),
    "0.5.23": (
        {"sglang:request_time_per_output_token_seconds_count", "sglang:spec_verify_calls_total"},
        {"sglang:time_per_output_token_seconds_count"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("version", sorted(EXPECTED_NAMES))
def test_metric_names_per_version(version: str) -> None:
    present, absent = EXPECTED_NAMES[version]
    with serving(fast(version)) as (_, server):
        text = httpx.get(server.url + "/metrics").text
    names = metric_names(text)
    assert present <= names
    assert not (absent & names)
    assert not any(n.endswith("_created") for n in names)  # multiprocess registry


def test_labels_per_version() -> None:
    with serving(fast("0.4.6.post5")) as (_, server):
        text = httpx.get(server.url + "/metrics").text
    assert metric_value(text, "sglang:num_running_reqs", engine_type="unified") == 0.0
    assert metric_value(text, "sglang:num_running_reqs", tp_rank="0") is None
    with serving(fast("0.5.23")) as (_, server):
        text = httpx.get(server.url + "/metrics").text
    assert metric_value(text, "sglang:num_running_reqs", tp_rank="0", moe_ep_rank="0") == 0.0
    assert metric_value(text, "sglang:generation_tokens_total", is_streaming="true") == 0.0


SPEC_KEYS: dict[str, set[str]] = {
    "0.4.6.post5": {"spec_verify_ct"},
    "0.4.10.post2": {"spec_verify_ct"},
    "0.5.4": {"spec_verify_ct", "spec_accept_rate", "spec_accept_length"},
    "0.5.10": {"spec_verify_ct", "spec_accept_rate", "spec_accept_length",
               "spec_accept_token_num", "spec_draft_token_num", "spec_accept_histogram"},
    "0.5.16": {"spec_verify_ct", "spec_accept_rate", "spec_accept_length",
               "spec_num_correct_drafts", "spec_num_proposed_drafts",
               "spec_correct_drafts_histogram", "spec_accepted_drafts", "spec_proposed_drafts",
               "spec_accept_histogram"},
    "0.5.23": {"spec_verify_ct", "spec_accept_rate", "spec_accept_length",
               "spec_num_correct_drafts", "spec_num_proposed_drafts",
               "spec_correct_drafts_histogram"},
}  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_native_stream_meta_info_per_version(version: str) -> None:
    body = {
        "text": "Tell me about GPUs.",
        "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0},
        "stream": True,
    }
    with serving(fast(version, coalesce_chunks=False)) as (world, server):
        r = httpx.post(server.url + "/generate", json=body, timeout=10)
    events = sse_data(r.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 64
    assert counts[0] == 1  # the prefill token
    assert max(b - a for a, b in itertools.pairwise(counts)) > 1  # several per step
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 64}
    assert len(chunks[-1]["output_ids"]) == 64  # cumulative
    spec = {k for k in final if k.startswith("spec_")}
    assert spec == SPEC_KEYS[version]
    truth = world.truth.requests()[0]
    assert final["spec_verify_ct"] == truth.steps
    assert len(chunks) == truth.steps + 1
    if _at_least(version, "0.5.10"):
        assert final["spec_accept_length"] == pytest.approx(64 / truth.steps)
        assert final["spec_accept_rate"] == pytest.approx(
            truth.accepted_drafts / truth.proposed_drafts
        )
    if _at_least(version, "0.5.16"):
        assert final["spec_num_correct_drafts"] == truth.accepted_drafts
        assert final["spec_num_proposed_drafts"] == 3 * truth.steps
        assert sum(final["spec_correct_drafts_histogram"]) == truth.steps


def test_native_non_streaming_generate() -> None:
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 10, "ignore_eos": True}}
    with serving(fast("0.5.23")) as (_, server):
        out = httpx.post(server.url + "/generate", json=body).json()
    assert out["meta_info"]["completion_tokens"] == 10
    assert len(out["output_ids"]) == 10
    assert "spec_verify_ct" in out["meta_info"]


@pytest.mark.parametrize(("version", "continuous"), [("0.5.4", False), ("0.5.10", True)])
def test_openai_usage_options(version: str, continuous: bool) -> None:
    body = {
        "model": "sim/Llama-3.1-8B-Instruct",
        "prompt": "hello",
        "max_tokens": 30,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with serving(fast(version)) as (_, server):
        events = sse_data(httpx.post(server.url + "/v1/completions", json=body).text)
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 30
    content = events[:-2]
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    if continuous:
        assert all(c["usage"]["completion_tokens"] >= 1 for c in content)
        assert content[-1]["usage"]["completion_tokens"] == 30
    else:
        assert all(c["usage"] is None for c in content)
    text = "".join(c["choices"][0]["text"] for c in content)
    assert len(text.split()) == 30


def test_return_spec_tokens_details_on_0_5_23() -> None:
    body = {
        "prompt": "x",
        "max_tokens": 20,
        "ignore_eos": True,
        "stream": True,
        "return_spec_tokens_details": True,
        "stream_options": {"include_usage": True},
    }
    with serving(fast("0.5.23")) as (world, server):
        events = sse_data(httpx.post(server.url + "/v1/completions", json=body).text)
    details = events[-3]["sglext"]["spec_tokens_details"]
    assert details["spec_verify_ct"] == world.truth.requests()[0].steps


def test_chat_stream_starts_with_a_role_chunk() -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
    }
    with serving(fast("0.5.23")) as (_, server):
        events = sse_data(httpx.post(server.url + "/v1/chat/completions", json=body).text)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[0]["object"] == "chat.completion.chunk"
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[1:-1])
    assert len(text.split()) == 12


def full_boost() -> SimGpus:
    """GPUs that run at full boost (no power cap, cold): step latency = configured."""
    gpus = SimGpus(count=1)
    gpus.set_power_limit(100_000.0)
    return gpus


def _manual(version: str, **kw: Any) -> SimConfig:
    return preset("sglang", version, warmup_requests=0, **kw)


def test_generation_tokens_move_only_at_finish_realtime_tokens_per_step() -> None:
    clock = ManualClock()
    with serving(_manual("0.5.23"), clock) as (world, server):
        url = server.url
        body = {"text": "x", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}
        fut = in_thread(lambda: httpx.post(url + "/generate", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(0.5)
        mid = httpx.get(url + "/metrics").text
        assert metric_value(mid, "sglang:generation_tokens_total") == 0.0
        assert metric_value(mid, "sglang:spec_verify_calls_total") == 0.0
        w = world.truth.window(-1, 0.5)
        assert metric_value(mid, "sglang:realtime_tokens_total", mode="decode") == w.decode_tokens
        assert metric_value(mid, "sglang:cuda_graph_passes_total", mode="decode_cuda_graph") == (
            w.batch_steps
        )
        # fewer than 40 passes since the prefill: the count written then, the batch the
        # request had not joined yet (issue 22 item 7)
        assert w.batch_steps < 40
        assert metric_value(mid, "sglang:num_running_reqs") == 0.0
        clock.set(60.0)
        fut.result(timeout=10)
        end = httpx.get(url + "/metrics").text
        truth = world.truth.requests()[0]
        assert metric_value(end, "sglang:generation_tokens_total") == 400
        assert metric_value(end, "sglang:spec_verify_calls_total") == truth.steps
        assert metric_value(end, "sglang:num_requests_total") == 1
        # per-token ITL: one observation per token after the first, _sum = decode time
        assert metric_value(end, "sglang:inter_token_latency_seconds_count") == 399
        assert metric_value(end, "sglang:inter_token_latency_seconds_sum") == pytest.approx(
            sum(truth.step_latencies_s)
        )


@pytest.mark.parametrize("version", ["0.5.4", "0.5.10", "0.5.16", "0.5.23"])
def test_gauges_update_every_40_decode_steps_with_the_version_formula(version: str) -> None:
    clock = ManualClock()
    cfg = _manual(version)
    with serving(cfg, clock, full_boost()) as (world, server):
        url = server.url
        body = {"text": "x", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
        fut = in_thread(lambda: httpx.post(url + "/generate", json=body, timeout=10))
        assert world.wait_submitted(1)
        prefill_end = cfg.prefill_ms / 1000
        step = cfg.base_step_ms / 1000
        clock.set(prefill_end + 39.5 * step)
        before = httpx.get(url + "/metrics").text
        assert metric_value(before, "sglang:spec_accept_length") == 0.0
        assert metric_value(before, "sglang:gen_throughput") == 0.0
        clock.set(prefill_end + 40.5 * step)
        after = httpx.get(url + "/metrics").text
        steps = world.truth.steps()[1:41]
        assert all(s.decode_requests == 1 for s in steps)
        tokens = sum(s.decode_tokens for s in steps)
        correct = sum(s.accepted_drafts for s in steps)
        assert metric_value(after, "sglang:spec_accept_length") == pytest.approx(tokens / 40)
        want = {
            "0.5.4": tokens / 40 / 4,
            "0.5.10": tokens / (40 * 4),
            "0.5.16": (tokens - 40) / (40 * 3),
            "0.5.23": correct / (40 * 3),
        }[version]
        assert metric_value(after, "sglang:spec_accept_rate") == pytest.approx(want)
        assert metric_value(after, "sglang:gen_throughput") == pytest.approx(
            tokens / (steps[-1].t_end - cfg.load_time_s), rel=1e-6
        )
        info_path = "/server_info" if _at_least(version, "0.5.10") else "/get_server_info"
        state = httpx.get(url + info_path).json()["internal_states"][0]
        assert state["avg_spec_accept_length"] == pytest.approx(tokens / 40)
        clock.set(100.0)
        fut.result(timeout=10)
