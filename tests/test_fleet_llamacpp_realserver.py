"""The fleet read through a real Prometheus scraping a real llama-server that speculates
(a tiny target with a draft model, K=4): its token rate, accept length and step time against
the server's own counters over the same traffic, read here by ``prometheus_client``'s parser.

llama.cpp's counters move only when a request ends, so the traffic is a burst of requests
between two quiet stretches, and the rate window holds all of it: over such a window every
figure is a ratio of the counters' increases, which the server's own counters give directly.

Skipped, with the reason shown, when the binary or Prometheus is absent.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.core.server import Dialect
from specwatch.sources.prometheus.api import PrometheusClient, prometheus_endpoint
from specwatch.sources.prometheus.fleet import PrometheusSource
from tests.prometheus_fixture import PROMETHEUS, SKIP_REASON, ScrapeTarget, running_prometheus
from tests.realserver import running_llama_server

pytestmark = [
    pytest.mark.realserver,
    pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON),
    pytest.mark.xdist_group("llama-server"),
]

L = "llamacpp:"
REQUESTS = 6
WINDOW_S = 30.0
QUIET_SAMPLES = 6


def _counters(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(L) and not s.labels
    }


def _generate(url: str) -> None:
    with httpx.Client(timeout=60) as client:
        for i in range(REQUESTS):
            body = {"prompt": f"request {i}: the quick brown fox", "n_predict": 96}
            client.post(url + "/completion", json=body).raise_for_status()


async def test_fleet_figures_of_a_real_llama_server_are_its_counters(tmp_path: Path) -> None:
    with running_llama_server("draft", env={"DRAFT_MAX": "4"}) as url:
        port = int(url.rsplit(":", 1)[1])
        target = ScrapeTarget("llamacpp", port, "node1")
        _generate(url)  # counters away from zero before the measured burst
        with running_prometheus([target], tmp_path) as prom:
            query = f'{L}tokens_predicted_total{{instance="{target.instance}"}}'

            def scraped(value: float) -> bool:
                body = httpx.get(prom.url + "/api/v1/query", params={"query": query}).json()
                result = body["data"]["result"]
                return bool(result) and float(result[0]["value"][1]) == value

            before = _counters(url)
            # rate() extrapolates each series by its own distance to zero when a window holds
            # few samples, which would skew the ratios: a quiet stretch of samples first
            quiet = f"count_over_time({query}[{WINDOW_S:g}s]) >= {QUIET_SAMPLES}"
            prom.wait(lambda: prom.samples(quiet) == 1, "a quiet stretch", 30)
            assert scraped(before[L + "tokens_predicted_total"])
            _generate(url)
            after = _counters(url)
            prom.wait(lambda: scraped(after[L + "tokens_predicted_total"]), "the burst scraped")
            client = PrometheusClient(prometheus_endpoint(prom.url), deadline_s=10)
            at = time.time()
            async with client:
                source = PrometheusSource(client, rate_window_s=WINDOW_S)
                reading = await source.refresh(at)
            counted = httpx.post(
                prom.url + "/api/v1/query",
                data={"query": f"count_over_time({query}[{WINDOW_S:g}s])", "time": at},
                timeout=5,
            ).json()["data"]["result"]
            samples = int(counted[0]["value"][1])
    assert reading.errors == ()
    (server,) = reading.servers
    w = server.window
    assert server.dialect is Dialect.LLAMACPP
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    tokens, seconds = d[L + "tokens_predicted_total"], d[L + "tokens_predicted_seconds_total"]
    accepted = d[L + "spec_decode_num_accepted_tokens_total"]
    drafts = d[L + "spec_decode_num_drafts_total"]
    assert tokens >= REQUESTS * 90 and drafts > 0, d
    assert w.accept_length == pytest.approx(1.0 + accepted / drafts, rel=1e-6)
    # each request's generation time over its steps: its tokens less the accepted drafts
    assert w.step_latency_s == pytest.approx(seconds / (tokens - accepted), rel=1e-6)
    assert "tokens_predicted_seconds_total" in w.sources["step_latency_s"]
    # the burst's tokens over the window Prometheus read: rate() extrapolates the sampled span
    # ((samples - 1) scrape intervals) by up to 1.1 intervals at each end, so a window that
    # Prometheus has not filled yet reads higher (21.16 against 576 tokens / 30 s in one run)
    most = tokens / WINDOW_S * (1 + 2.2 / (samples - 1))
    assert w.gen_tok_s is not None and 0.5 * tokens / WINDOW_S < w.gen_tok_s <= most, samples
