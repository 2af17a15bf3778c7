"""Load time, restarts, injected faults and API keys on the simulated server."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.presets import preset
from tests.sim_fixtures import ManualClock, faults_of
from tests.sim_testing import FAST, in_thread, metric_value, serving, sse_data


def fast(dialect: str, **kw: Any) -> SimConfig:
    return preset(dialect, **{**FAST, **kw})


STREAM_BODY = {
    "prompt": "hello",
    "max_tokens": 200,
    "ignore_eos": True,
    "stream": True,
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
}


@pytest.mark.parametrize("dialect", ["sglang", "vllm", "openai"])
def test_connections_refused_until_loaded(dialect: str) -> None:
    clock = ManualClock()
    with serving(fast(dialect, load_time_s=5.0), clock) as (world, server):
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/v1/models")
        clock.set(4.9)
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/v1/models")
        clock.set(5.0)
        assert server.wait_listening(5)
        assert httpx.get(server.url + "/v1/models").status_code == 200
        assert world.loaded()


def test_restart_drops_streams_resets_counters_and_reloads() -> None:
    clock = ManualClock()
    with serving(fast("vllm", load_time_s=2.0), clock) as (world, server):
        clock.set(2.0)
        assert server.wait_listening(5)
        url = server.url
        body = {**STREAM_BODY, "max_tokens": 5000}

        def stream() -> list[str]:
            lines: list[str] = []
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=10) as r:
                for line in r.iter_lines():
                    lines.append(line)
            return lines

        fut = in_thread(stream)
        assert world.wait_submitted(1)
        clock.set(3.0)
        before = metric_value(httpx.get(url + "/metrics").text, "vllm:generation_tokens_total")
        assert before is not None and before > 0
        world.restart()
        with pytest.raises(httpx.HTTPError):
            fut.result(timeout=10)  # the stream broke without its [DONE]
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/metrics")  # reloading: refused again
        clock.set(5.0)
        assert server.wait_listening(5)
        after = metric_value(httpx.get(url + "/metrics").text, "vllm:generation_tokens_total")
        assert after == 0.0
        (aborted,) = world.truth.requests()
        assert aborted.finish_reason == "abort"


def test_drop_stream_after_n_chunks() -> None:
    with serving(fast("sglang", coalesce_chunks=False)) as (world, server):
        faults_of(world).drop_stream(after_chunks=3)
        lines: list[str] = []
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", server.url + "/v1/completions", json=STREAM_BODY) as r,
        ):
            for line in r.iter_lines():
                if line:
                    lines.append(line)
        assert len(lines) == 3
        assert all(line.startswith("data: {") for line in lines)
        # only the next stream was dropped
        ok = httpx.post(server.url + "/v1/completions", json=STREAM_BODY)
        assert sse_data(ok.text)[-1] == "[DONE]"
        assert [r.finish_reason for r in world.truth.requests()] == ["abort", "length"]


def test_hang_holds_requests_until_cleared() -> None:
    with serving(fast("vllm")) as (world, server):
        faults_of(world).hang()
        url = server.url
        fut = in_thread(lambda: httpx.get(url + "/metrics", timeout=10))
        assert faults_of(world).wait_hung(1)
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(url + "/version", timeout=0.2)
        assert not fut.done()
        faults_of(world).clear_hang()
        assert fut.result(timeout=10).status_code == 200
        assert httpx.get(url + "/version").status_code == 200


def test_garbage_lines_in_streams_and_metrics() -> None:
    with serving(fast("vllm")) as (world, server):
        faults_of(world).garbage_in_streams()
        r = httpx.post(server.url + "/v1/completions", json=STREAM_BODY)
        bad = [
            line
            for line in r.content.split(b"\n")
            if line and not line.startswith(b"data: {") and line != b"data: [DONE]"
        ]
        assert bad, "expected garbage lines in the stream"
        assert r.content.rstrip().endswith(b"data: [DONE]")
        faults_of(world).garbage_in_metrics()
        text = httpx.get(server.url + "/metrics").text
        assert "this is not prometheus text" in text
        with pytest.raises(ValueError):
            list(text_string_to_metric_families(text))
        clean = httpx.get(server.url + "/metrics").text
        assert list(text_string_to_metric_families(clean))


def test_5xx_on_the_next_n_requests() -> None:
    with serving(fast("sglang")) as (world, server):
        faults_of(world).fail_next(2, status=503)
        codes = [httpx.get(server.url + "/v1/models").status_code for _ in range(3)]
        assert codes == [503, 503, 200]
        faults_of(world).fail_next(1, status=500, path="/metrics")
        assert httpx.get(server.url + "/v1/models").status_code == 200
        assert httpx.get(server.url + "/metrics").status_code == 500


KEY_RULES: dict[str, tuple[list[str], list[str]]] = {
    # dialect: (paths that need the key, paths open without it)
    "vllm": (["/v1/models"], ["/metrics", "/version", "/health"]),
    "sglang": (["/v1/models", "/server_info"], ["/metrics", "/health"]),
    "llamacpp": (["/props", "/slots", "/metrics"], ["/health", "/v1/models"]),
    "openai": (["/v1/models"], []),
}


@pytest.mark.parametrize("dialect", sorted(KEY_RULES))
def test_api_key_rules(dialect: str) -> None:
    key = "sk-sim-test"
    needs, open_paths = KEY_RULES[dialect]
    cfg = fast(dialect, api_key=key, version="0.4.6.post5" if dialect == "sglang" else None)
    if dialect == "sglang":
        needs = ["/v1/models", "/get_server_info"]
    with serving(cfg) as (world, server), httpx.Client(base_url=server.url) as c:
        for path in needs:
            assert c.get(path).status_code == 401, path
            bad = c.get(path, headers={"Authorization": "Bearer wrong"})
            assert bad.status_code == 401, path
            good = c.get(path, headers={"Authorization": f"Bearer {key}"})
            assert good.status_code == 200, path
        for path in open_paths:
            assert c.get(path).status_code == 200, path
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
        assert r.status_code == 401
        assert key not in r.text
        assert world.truth.requests() == []
    assert Dialect(dialect) is cfg.dialect


def test_client_going_away_aborts_the_request() -> None:
    with serving(fast("vllm", base_step_ms=5.0)) as (world, server):
        body = {**STREAM_BODY, "max_tokens": 100_000}
        with httpx.stream("POST", server.url + "/v1/completions", json=body) as r:
            for _ in r.iter_lines():
                break
        # the server notices on its next write and aborts the request in the engine
        assert world.truth.wait_requests(1)
        assert world.truth.requests()[0].finish_reason == "abort"


def test_stop_cuts_streams_waiting_on_a_manual_clock_and_held_requests() -> None:
    clock = ManualClock()
    world_server = serving(fast("vllm"), clock)
    world, server = world_server.__enter__()
    url = server.url
    stream = in_thread(lambda: httpx.post(url + "/v1/completions", json=STREAM_BODY, timeout=30))
    assert world.wait_submitted(1)
    faults_of(world).hang()
    held = in_thread(lambda: httpx.get(url + "/metrics", timeout=30))
    assert faults_of(world).wait_hung(1)
    world_server.__exit__(None, None, None)
    with pytest.raises(httpx.HTTPError):
        stream.result(timeout=5)
    with pytest.raises(httpx.HTTPError):
        held.result(timeout=5)
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/models")
