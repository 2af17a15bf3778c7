"""The generic OpenAI-compatible dialect: only models and completions, final usage only."""

from __future__ import annotations

import httpx

from specwatch.sim.presets import preset
from tests.sim_testing import serving, sse_data


def test_generic_server_exposes_only_the_openai_surface() -> None:
    cfg = preset("openai", base_step_ms=1.0, prefill_ms=2.0, warmup_requests=0)
    with serving(cfg) as (world, server), httpx.Client(base_url=server.url) as c:
        card = c.get("/v1/models").json()["data"][0]
        assert card["owned_by"] not in ("sglang", "vllm", "llamacpp")
        for path in ("/metrics", "/version", "/server_info", "/props", "/health"):
            assert c.get(path).status_code == 404, path
        body = {
            "prompt": "hello",
            "max_tokens": 40,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        events = sse_data(c.post("/v1/completions", json=body).text)
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"] == []
    final_usage = events[-2]["usage"]["completion_tokens"]
    assert all("usage" not in e for e in events[:-2])  # no continuous usage here
    truth = world.truth.requests()[0]
    assert final_usage == truth.completion_tokens
    text = "".join(e["choices"][0]["text"] for e in events[:-2])
    assert len(text.split()) == truth.completion_tokens


def test_generic_server_ignores_ignore_eos_but_is_seeded() -> None:
    cfg = preset("openai", base_step_ms=0.5, prefill_ms=1.0, eos_per_token=0.05, seed=3)
    lengths = []
    for _ in range(2):
        with serving(cfg) as (_world, server):
            body = {"prompt": "x", "max_tokens": 500, "ignore_eos": True}
            out = httpx.post(server.url + "/v1/completions", json=body).json()
            lengths.append(out["usage"]["completion_tokens"])
            assert out["choices"][0]["finish_reason"] == "stop"
    assert lengths[0] == lengths[1] < 500
