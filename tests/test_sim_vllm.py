"""The simulated vLLM server: endpoints, metric names per version, per-step counters, DP."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from specwatch.sim.config import SimConfig
from specwatch.sim.gpus import SimGpus
from specwatch.sim.presets import preset
from tests.sim_fixtures import ManualClock
from tests.sim_testing import (
    FAST,
    in_thread,
    metric_names,
    metric_samples,
    metric_value,
    serving,
    sse_data,
)


def fast(version: str = "0.33.0", **kw: Any) -> SimConfig:
    return preset("vllm", version, **{**FAST, **kw})


def test_identity_endpoints() -> None:
    with serving(fast("0.20.0")) as (world, server), httpx.Client(base_url=server.url) as c:
        card = c.get("/v1/models").json()["data"][0]
        assert card["owned_by"] == "vllm"
        assert card["max_model_len"] == world.config.max_model_len
        assert c.get("/version").json() == {"version": "0.20.0"}
        assert c.get("/health").status_code == 200
        assert c.get("/server_info").status_code == 404  # dev mode off
        assert c.get("/load").json() == {"server_load": 0}
    assert world.truth.steps() == []  # nothing above made the model work


NAMES = {
    "0.9.2": (
        {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc",
         "vllm:time_per_output_token_seconds_count"},
        {"vllm:inter_token_latency_seconds_count"},
    ),
    "0.11.0": (
        {"vllm:kv_cache_usage_perc", "vllm:time_per_output_token_seconds_count",
         "vllm:inter_token_latency_seconds_count"},
        {"vllm:gpu_cache_usage_perc"},
    ),
    "0.20.0": (
        {"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds_count"},
        {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_count"},
    ),
    "0.33.0": (
        {"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds_count"},
        {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_count"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("version", sorted(NAMES))
def test_metric_names_per_version(version: str) -> None:
    present, absent = NAMES[version]
    with serving(fast(version)) as (_, server):
        text = httpx.get(server.url + "/metrics").text
    names = metric_names(text)
    common = {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:generation_tokens_total",
        "vllm:generation_tokens_created",
        "vllm:prompt_tokens_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
    }
    assert common | present <= names
    assert not (absent & names)
    labels = [lab for n, lab, _ in metric_samples(text) if n == "vllm:generation_tokens_total"]
    assert labels == [{"engine": "0", "model_name": "sim/Llama-3.1-8B-Instruct"}]
    positions = {
        lab["position"]
        for n, lab, _ in metric_samples(text)
        if n == "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    }
    assert positions == {"0", "1", "2"}  # = num_speculative_tokens


def test_no_speculation_means_no_spec_decode_series() -> None:
    with serving(fast(spec_algorithm=None)) as (_, server):
        names = metric_names(httpx.get(server.url + "/metrics").text)
    assert not any(n.startswith("vllm:spec_decode") for n in names)


def test_counters_move_every_step_and_match_truth() -> None:
    clock = ManualClock()
    gpus = SimGpus(count=1)
    with serving(preset("vllm", warmup_requests=0), clock, gpus) as (world, server):
        url = server.url
        body = {"prompt": "x" * 40, "max_tokens": 600, "ignore_eos": True}
        fut = in_thread(lambda: httpx.post(url + "/v1/completions", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(1.0)
        a = httpx.get(url + "/metrics").text
        clock.set(2.0)
        b = httpx.get(url + "/metrics").text
        w = world.truth.window(1.0, 2.0)

        def delta(name: str) -> float:
            va, vb = metric_value(a, name), metric_value(b, name)
            assert va is not None and vb is not None
            return vb - va

        assert delta("vllm:generation_tokens_total") == w.tokens
        assert delta("vllm:spec_decode_num_drafts_total") == w.drafted_steps
        assert delta("vllm:spec_decode_num_accepted_tokens_total") == w.accepted_drafts
        assert delta("vllm:spec_decode_num_draft_tokens_total") == w.proposed_drafts
        # one ITL observation per request-step, value = the step interval
        assert delta("vllm:inter_token_latency_seconds_count") == w.request_steps
        assert delta("vllm:inter_token_latency_seconds_sum") / w.request_steps == pytest.approx(
            w.request_step_latency_s
        )
        acc_len = 1 + delta("vllm:spec_decode_num_accepted_tokens_total") / delta(
            "vllm:spec_decode_num_drafts_total"
        )
        assert acc_len == pytest.approx(w.accept_length)
        assert metric_value(b, "vllm:num_requests_running") == 1.0
        clock.set(100.0)
        out = fut.result(timeout=10).json()
        assert out["usage"]["completion_tokens"] == 600
        end = httpx.get(url + "/metrics").text
        assert metric_value(end, "vllm:request_success_total", finished_reason="length") == 1.0
        assert metric_value(end, "vllm:generation_tokens_total") == 600


def test_data_parallel_engines_have_one_series_each() -> None:
    with serving(fast(dp_engines=2)) as (world, server):
        for _ in range(4):
            httpx.post(
                server.url + "/v1/completions",
                json={"prompt": "p", "max_tokens": 20, "ignore_eos": True},
            )
        text = httpx.get(server.url + "/metrics").text
    per_engine = {
        lab["engine"]: v
        for n, lab, v in metric_samples(text)
        if n == "vllm:generation_tokens_total"
    }
    assert set(per_engine) == {"0", "1"}
    assert per_engine["0"] > 0 and per_engine["1"] > 0
    assert sum(per_engine.values()) == 80
    accepted = metric_value(text, "vllm:spec_decode_num_accepted_tokens_total")
    assert accepted == sum(r.accepted_drafts for r in world.truth.requests())


def test_stream_with_continuous_usage_has_several_tokens_per_chunk() -> None:
    body = {
        "model": "sim/Llama-3.1-8B-Instruct",
        "prompt": "hello",
        "max_tokens": 100,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with serving(fast(coalesce_chunks=False)) as (world, server):
        events = sse_data(httpx.post(server.url + "/v1/completions", json=body).text)
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 100
    counts = [e["usage"]["completion_tokens"] for e in events[:-2]]
    assert counts[-1] == 100
    truth = world.truth.requests()[0]
    assert len(counts) == truth.steps + 1  # one chunk per engine step
    assert max(b - a for a, b in itertools.pairwise(counts)) > 1
    assert events[-3]["choices"][0]["finish_reason"] == "length"


def test_unknown_model_is_404() -> None:
    with serving(fast()) as (_, server):
        r = httpx.post(server.url + "/v1/completions", json={"model": "nope", "prompt": "x"})
    assert r.status_code == 404
    assert "does not exist" in r.json()["message"]


def test_created_samples_change_on_restart() -> None:
    clock = ManualClock()
    with serving(fast(), clock) as (world, server):
        a = metric_value(httpx.get(server.url + "/metrics").text, "vllm:generation_tokens_created")
        clock.set(10.0)
        world.restart()
        assert server.wait_listening(5)
        b = metric_value(httpx.get(server.url + "/metrics").text, "vllm:generation_tokens_created")
    assert a is not None and b is not None and b == a + 10.0


def test_a_lagging_consumer_gets_merged_chunks_with_exact_counts() -> None:
    clock = ManualClock()
    with serving(preset("vllm", warmup_requests=0), clock) as (world, server):
        url = server.url
        body = {
            "prompt": "x",
            "max_tokens": 300,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        fut = in_thread(lambda: httpx.post(url + "/v1/completions", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(60.0)  # the whole generation happens before the handler looks again
        events = sse_data(fut.result(timeout=10).text)
    content = [e for e in events[:-1] if e["choices"]]
    truth = world.truth.requests()[0]
    assert len(content) < truth.steps + 1
    assert content[-1]["usage"]["completion_tokens"] == 300
    text = "".join(e["choices"][0]["text"] for e in content)
    assert len(text.split()) == 300


@pytest.mark.parametrize(("version", "present"), [("0.20.0", False), ("0.33.0", True)])
def test_per_request_spec_metrics_on_the_final_usage_chunk(version: str, present: bool) -> None:
    body = {
        "prompt": "x",
        "max_tokens": 50,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with serving(fast(version, per_request_metrics="detailed")) as (world, server):
        events = sse_data(httpx.post(server.url + "/v1/completions", json=body).text)
    final = events[-2]
    assert ("metrics" in final) is present
    if present:
        spec = final["metrics"]["speculative_decoding"]
        truth = world.truth.requests()[0]
        assert spec["num_spec_steps"] == truth.steps
        assert spec["num_accepted_draft_tokens"] == truth.accepted_drafts
        assert spec["mean_acceptance_length"] == pytest.approx(
            1 + truth.accepted_drafts / truth.steps
        )
        assert sum(spec["per_step_accepted"]) == truth.accepted_drafts
        assert spec["num_spec_tokens"] == 3


def test_disable_log_stats_leaves_metrics_without_vllm_series() -> None:
    with serving(fast(metrics_enabled=False)) as (_, server):
        r = httpx.get(server.url + "/metrics")
    assert r.status_code == 200
    assert not any(n.startswith("vllm:") for n in metric_names(r.text))


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b""])
def test_malformed_bodies_are_400_and_the_server_lives_on(body: bytes) -> None:
    with serving(fast()) as (world, server):
        r = httpx.post(
            server.url + "/v1/completions",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 400
        assert httpx.get(server.url + "/version").status_code == 200
    assert world.submitted == 0
