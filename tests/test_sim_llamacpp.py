"""The simulated llama.cpp llama-server: props/slots, request-end counters, token bursts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from specwatch.sim.config import SimConfig
from specwatch.sim.presets import preset
from tests.sim_fixtures import ManualClock
from tests.sim_testing import FAST, in_thread, metric_names, metric_value, serving, sse_data

NEW = "b6500-0c1e570"
OLD = "b6100-25d5b0c"


def fast(version: str = NEW, **kw: Any) -> SimConfig:
    return preset("llamacpp", version, **{**FAST, **kw})


def test_identity_props_and_slots() -> None:
    with serving(fast()) as (_, server), httpx.Client(base_url=server.url) as c:
        assert c.get("/v1/models").json()["data"][0]["owned_by"] == "llamacpp"
        assert c.get("/health").json() == {"status": "ok"}
        props = c.get("/props").json()
        assert props["build_info"] == NEW
        assert props["endpoint_metrics"] is True
        assert props["total_slots"] == 4
        # /props does not reflect the speculative setup (llama-server leaves it out)
        assert props["default_generation_settings"]["params"]["speculative.types"] == "none"
        slots = c.get("/slots").json()
        assert len(slots) == 4
        assert all(s["speculative"] is True for s in slots)
        assert slots[0]["params"]["speculative.types"] == "draft-simple"
        assert not any(s["is_processing"] for s in slots)


def test_old_build_has_no_spec_counters_nor_types() -> None:
    with serving(fast(OLD)) as (_, server), httpx.Client(base_url=server.url) as c:
        slots = c.get("/slots").json()
        assert "speculative.types" not in slots[0]["params"]
        assert slots[0]["params"]["speculative.n_max"] == 3
        c.post("/completion", json={"prompt": "x", "n_predict": 20, "ignore_eos": True})
        names = metric_names(c.get("/metrics").text)
    assert "llamacpp:tokens_predicted_total" in names
    assert not any(n.startswith("llamacpp:spec_decode") for n in names)


def test_metrics_off_is_501() -> None:
    with serving(fast(metrics_enabled=False)) as (_, server):
        r = httpx.get(server.url + "/metrics")
        assert r.status_code == 501
        assert "--metrics" in r.json()["error"]["message"]
        assert httpx.get(server.url + "/props").json()["endpoint_metrics"] is False


def test_counters_move_only_when_the_request_ends() -> None:
    clock = ManualClock()
    with serving(preset("llamacpp", warmup_requests=0), clock) as (world, server):
        url = server.url
        body = {"prompt": "x" * 20, "n_predict": 300, "ignore_eos": True}
        fut = in_thread(lambda: httpx.post(url + "/completion", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(1.0)
        r = httpx.get(url + "/metrics")
        start = r.headers["Process-Start-Time-Unix"]
        mid = r.text
        assert metric_value(mid, "llamacpp:tokens_predicted_total") == 0.0
        assert metric_value(mid, "llamacpp:spec_decode_num_drafts_total") == 0.0
        assert metric_value(mid, "llamacpp:prompt_tokens_total") == 5.0  # flushed after prompt
        assert metric_value(mid, "llamacpp:requests_processing") == 1.0
        assert "llamacpp:spec_decode_num_accepted_tokens_per_pos_total" not in metric_names(mid)
        slots = httpx.get(url + "/slots").json()
        assert slots[0]["is_processing"] is True
        clock.set(60.0)
        out = fut.result(timeout=10).json()
        end = httpx.get(url + "/metrics")
        assert end.headers["Process-Start-Time-Unix"] == start
        truth = world.truth.requests()[0]
        assert metric_value(end.text, "llamacpp:tokens_predicted_total") == 300
        assert metric_value(end.text, "llamacpp:spec_decode_num_draft_tokens_total") == (
            truth.proposed_drafts
        )
        assert metric_value(end.text, "llamacpp:spec_decode_num_accepted_tokens_total") == (
            truth.accepted_drafts
        )
        # as a real llama-server, some steps drop their draft: fewer drafted steps than steps
        drafts = metric_value(end.text, "llamacpp:spec_decode_num_drafts_total")
        assert drafts == truth.drafted_steps and 0 < drafts < truth.steps
        assert truth.steps == 300 - 1 - truth.accepted_drafts  # each step one token + accepted
        assert (
            metric_value(end.text, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total")
            == truth.accepted_drafts
        )
        # the windowed gauge resets on every scrape
        predicted = metric_value(end.text, "llamacpp:predicted_tokens_seconds")
        assert predicted == pytest.approx(299 / sum(truth.step_latencies_s))
        again = httpx.get(url + "/metrics").text
        assert metric_value(again, "llamacpp:predicted_tokens_seconds") == 0.0
    timings = out["timings"]
    assert timings["predicted_n"] == 300
    assert timings["draft_n"] == truth.proposed_drafts
    assert timings["draft_n_accepted"] == truth.accepted_drafts
    assert timings["predicted_ms"] == pytest.approx(sum(truth.step_latencies_s) * 1000)
    steps = timings["predicted_n"] - 1 - timings["draft_n_accepted"]
    assert steps == truth.steps


def test_native_stream_is_one_token_per_event_in_bursts() -> None:
    clock = ManualClock()
    with serving(preset("llamacpp", warmup_requests=0), clock) as (world, server):
        url = server.url
        body = {
            "prompt": "hello",
            "n_predict": 40,
            "ignore_eos": True,
            "stream": True,
            "timings_per_token": True,
        }
        fut = in_thread(lambda: httpx.post(url + "/completion", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(30.0)
        events = sse_data(fut.result(timeout=10).text)
    truth = world.truth.requests()[0]
    tokens = events[:-1]
    assert len(tokens) == 40
    assert all(len(e["tokens"]) == 1 for e in tokens)
    assert [e["tokens_predicted"] for e in tokens] == list(range(1, 41))
    assert all("timings" in e for e in tokens)
    final = events[-1]
    assert final["stop"] is True and final["tokens_predicted"] == 40
    assert final["stop_type"] == "limit"
    assert final["timings"]["draft_n_accepted"] == truth.accepted_drafts
    assert "[DONE]" not in events  # the native endpoint ends without [DONE]
    # the tokens of one verify step arrive together (a burst): one distinct time per step
    times = {e["timings"]["predicted_ms"] for e in tokens}
    assert len(times) == truth.steps + 1
    assert "draft_n" not in tokens[0]["timings"]  # the prefill token had no draft


def test_llamacpp_oai_completions_final_usage_and_timings() -> None:
    body = {"prompt": "hi", "max_tokens": 25, "ignore_eos": True, "stream": True}
    with serving(fast()) as (world, server):
        events = sse_data(httpx.post(server.url + "/v1/completions", json=body).text)
    assert events[-1] == "[DONE]"
    final = events[-2]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"]["completion_tokens"] == 25
    assert final["timings"]["predicted_n"] == 25
    assert len(events) == 25 + 2  # one chunk per token, the final chunk, [DONE]
    assert world.truth.requests()[0].completion_tokens == 25


def test_loading_answers_503() -> None:
    clock = ManualClock()
    with serving(fast(load_time_s=30.0), clock) as (_, server):
        r = httpx.get(server.url + "/health")
        assert r.status_code == 503
        assert r.json()["error"]["message"] == "Loading model"
        assert httpx.get(server.url + "/v1/models").status_code == 503
        clock.set(30.0)
        assert httpx.get(server.url + "/health").status_code == 200


@pytest.mark.parametrize("version", [NEW, OLD])
def test_timings_rates_follow_the_build(version: str) -> None:
    body = {"prompt": "x", "n_predict": 50, "ignore_eos": True}
    with serving(fast(version)) as (_, server):
        t = httpx.post(server.url + "/completion", json=body).json()["timings"]
    n, ms = t["predicted_n"], t["predicted_ms"]
    assert n == 50 and ms > 0
    if version == NEW:  # "the first token is free"
        assert t["predicted_per_token_ms"] == pytest.approx(ms / (n - 1))
        assert t["predicted_per_second"] == pytest.approx((n - 1) / ms * 1000)
    else:
        assert t["predicted_per_token_ms"] == pytest.approx(ms / n)
        assert t["predicted_per_second"] == pytest.approx(n / ms * 1000)


def test_restart_resets_counters_changes_start_time_and_reloads_with_503() -> None:
    clock = ManualClock()
    with serving(fast(load_time_s=1.0), clock) as (world, server):
        clock.set(1.0)
        assert server.wait_listening(5)
        url = server.url
        body = {"prompt": "x", "n_predict": 5, "ignore_eos": True}
        fut = in_thread(lambda: httpx.post(url + "/completion", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(2.0)
        assert fut.result(timeout=10).json()["tokens_predicted"] == 5
        a = httpx.get(server.url + "/metrics")
        assert metric_value(a.text, "llamacpp:tokens_predicted_total") == 5.0
        clock.set(100.0)
        world.restart()
        assert httpx.get(server.url + "/health").status_code == 503
        clock.set(101.0)
        b = httpx.get(server.url + "/metrics")
        assert metric_value(b.text, "llamacpp:tokens_predicted_total") == 0.0
        start_a = int(a.headers["Process-Start-Time-Unix"])
        start_b = int(b.headers["Process-Start-Time-Unix"])
        assert start_b - start_a == 100
