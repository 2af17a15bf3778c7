"""Against a real llama.cpp ``llama-server`` with a draft model (CPU, tiny GGUF models).

Skipped, with the reason, when the binary or ``shared/`` is missing (see ``tests/realserver.py``).
Run just these with ``pytest -m realserver``.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.commands.main import main
from specwatch.core.server import Dialect
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.stream import stream_completion
from specwatch.sources.watcher import MetricsWatcher
from tests.realserver import built_commit, running_llama_server

# One llama-server at a time, as in a serial run: under pytest-xdist the realserver
# modules share one worker.
pytestmark = [pytest.mark.realserver, pytest.mark.xdist_group("llama-server")]

PROMPT = "the quick brown fox"


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    with running_llama_server() as url:
        yield url


def _client(url: str) -> ServerClient:
    return ServerClient(parse_endpoint(url, env={}), timeout_s=60)


async def test_detects_llamacpp_with_speculation_from_slots(llama_url: str) -> None:
    async with _client(llama_url) as client:
        props = (await client.get_json("/props"))["default_generation_settings"]["params"]
        info = await detect(client)
    assert info.dialect is Dialect.LLAMACPP
    assert info.version is not None and info.version.startswith("b")
    assert info.model == "tiny-target"
    assert info.metrics_enabled is True
    # the trap: /props says none while the draft model is loaded; /slots tells the truth
    assert props.get("speculative.types", "none") == "none"
    assert info.spec.enabled is True and info.spec.source == "/slots"


async def test_stream_counts_and_rates_equal_the_servers_timings(llama_url: str) -> None:
    async with _client(llama_url) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        await watcher.scrape()
        r = await stream_completion(client, info, PROMPT, 256)
        window = await watcher.scrape()
        after = await detect(client)
    assert r.error is None, r.error
    timings = r.server_stats["timings"]
    assert r.counts_exact
    assert r.completion_tokens == timings["predicted_n"] == 256
    assert len(r.chunks) == 256  # one event per token, counted from tokens_predicted
    assert [c.tokens for c in r.chunks] == list(range(1, 257))
    assert timings["draft_n"] > 0
    assert r.draft_acceptance_rate == timings["draft_n_accepted"] / timings["draft_n"]
    server_steps = timings["predicted_n"] - 1 - timings["draft_n_accepted"]
    assert r.server_stats["decode_steps"] == server_steps
    assert r.accept_length == pytest.approx(255 / server_steps)
    # steps: the server's count, placed at the longest gaps; their mean is the server's
    assert r.steps == server_steps
    assert r.step_latency_mean_s is not None
    # (within 15% on a quiet machine; a fresh-clone CI run, the suite's other workers on the
    # same two cores, read 2.56 against the server's 3.63 ms: chunks that arrive in bursts
    # shorten the longest gaps the steps are placed at)
    assert r.step_latency_mean_s == pytest.approx(r.server_stats["step_latency_s"], rel=0.35)
    # the metrics window around this one request holds exactly its counters
    assert window.tokens == timings["predicted_n"]
    assert window.draft_acceptance_rate == pytest.approx(r.draft_acceptance_rate)
    assert window.per_position_acceptance is not None
    # /slots now names the speculative type that ran
    assert after.spec.algorithm is not None and "draft" in after.spec.algorithm


async def test_a_connection_closed_after_a_streamed_answer_costs_no_request(
    llama_url: str,
) -> None:
    # llama-server closes the kept-alive connection after each streamed answer read to its end
    # (its stream provider ends with "no more", which cpp-httplib takes for a cancel), with no
    # "Connection: close": a request sent on it meanwhile is dropped unanswered (34 of 600 here
    # before the client sent such a request once more, on a fresh connection). The server's
    # own counter shows that none ran twice.
    requests, tokens = 200, 4
    payload = {"prompt": PROMPT, "n_predict": tokens, "stream": True, "ignore_eos": True}
    errors: list[str] = []
    async with _client(llama_url) as client:
        before = _counters(llama_url)["llamacpp:tokens_predicted_total"]
        for _ in range(requests):
            try:
                async with client.stream_post("/completion", payload) as response:
                    await response.aread()
            except ServerError as exc:
                errors.append(str(exc))
    after = _counters(llama_url)["llamacpp:tokens_predicted_total"]
    assert errors == []
    assert after - before == requests * tokens


def _counters(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }


async def test_the_window_counts_every_step_the_latency_was_paid_for(llama_url: str) -> None:
    # llama.cpp skips a draft it is not confident in: those steps yield one token and still
    # cost a step, so the tokens per step fall below the accept length of the drafted ones
    body = {"prompt": PROMPT, "n_predict": 256, "temperature": 0}
    async with _client(llama_url) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        await watcher.scrape()
        before = _counters(llama_url)
        timings = httpx.post(f"{llama_url}/completion", json=body, timeout=120).json()["timings"]
        after = _counters(llama_url)
        w = await watcher.scrape()
    d = {name: after[name] - before.get(name, 0.0) for name in after}
    drafts = d["llamacpp:spec_decode_num_drafts_total"]
    accepted = timings["draft_n_accepted"]
    assert w.tokens == timings["predicted_n"] == 256
    assert (
        w.spec_drafts == drafts and accepted == d["llamacpp:spec_decode_num_accepted_tokens_total"]
    )
    steps, length, per_step, step = (
        w.decode_steps,
        w.accept_length,
        w.tokens_per_step,
        w.step_latency_s,
    )
    assert steps is not None and length is not None and per_step is not None and step is not None
    # the steps: the server's own decode calls, less the prompt's one
    assert steps == d["llamacpp:n_decode_total"] - 1 == 256 - 1 - accepted
    assert 0 < drafts < steps, (drafts, steps)
    assert length == pytest.approx(1 + accepted / drafts)
    assert per_step == pytest.approx((256 - 1) / steps)
    assert per_step < length
    assert "tokens_per_step" in w.notes["request_end"]  # of the request that ended, whole
    assert step == pytest.approx(d["llamacpp:tokens_predicted_seconds_total"] / steps)
    # the effective time per token is the server's own, but for the first token
    assert step / per_step == pytest.approx(timings["predicted_ms"] / 1000 / (256 - 1), rel=1e-3)
    assert step / per_step == pytest.approx(timings["predicted_per_token_ms"] / 1000, rel=0.01)


async def test_the_prefix_cache_hit_rate_is_the_servers_reused_share(llama_url: str) -> None:
    # llama.cpp counts a prompt's tokens once: processed (prompt_tokens_total) or taken from
    # the slot's cache (prompt_tokens_cached_total); the same prompt twice reuses nearly all
    prompt = "The history of the harbour town begins with a ferry, two inns and a market " * 4
    body = {"prompt": prompt, "n_predict": 4, "temperature": 0, "cache_prompt": True}
    async with _client(llama_url) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        await watcher.scrape()
        before = _counters(llama_url)
        for _ in range(2):
            httpx.post(f"{llama_url}/completion", json=body, timeout=120).raise_for_status()
        after = _counters(llama_url)
        w = await watcher.scrape()
    d = {name: after[name] - before.get(name, 0.0) for name in after}
    cached = d["llamacpp:prompt_tokens_cached_total"]
    processed = d["llamacpp:prompt_tokens_total"]
    assert cached > processed > 0, d
    assert w.prefix_cache_hit_rate == pytest.approx(cached / (cached + processed), rel=1e-9)
    assert "prompt_tokens_cached_total" in w.sources["prefix_cache_hit_rate"]


async def test_the_servers_build_commit_is_recorded(llama_url: str) -> None:
    from specwatch.sources.identity.process import identify

    async with _client(llama_url) as client:
        info = await detect(client)
    identity = identify(llama_url, info)
    build = httpx.get(f"{llama_url}/props", timeout=30).json()["build_info"]
    # The server runs here as this user: its process is found, its build comes from /props.
    assert identity.pid is not None, identity.notes
    assert identity.executable is not None and identity.executable.endswith("llama-server")
    assert identity.build == build == info.version
    assert identity.commit == built_commit()
    assert build.endswith("-" + built_commit())


def test_probe_json_agrees(llama_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--url", llama_url, "--json", "--max-tokens", "128", "--timeout", "60"])
    doc = orjson.loads(capsys.readouterr().out)
    assert code == 0, doc.get("error")
    assert doc["server"]["dialect"] == "llamacpp"
    assert doc["server"]["speculative"]["enabled"] is True
    timings = doc["stream"]["server_stats"]["timings"]
    assert doc["stream"]["completion_tokens"] == timings["predicted_n"] == 128
    assert (
        doc["stream"]["draft_acceptance_rate"] == timings["draft_n_accepted"] / timings["draft_n"]
    )
    assert doc["stream"]["ttft_s"] > 0 and doc["stream"]["decode_tok_s"] > 0
    assert doc["metrics"]["tokens"] == 128
    assert isinstance(doc["gpus"], list) and (doc["gpus"] or doc["gpus_reason"])
    # and the version it reports is the one the server's /props gives
    build = httpx.get(f"{llama_url}/props", timeout=30).json()["build_info"]
    assert doc["server"]["version"] == build
    # server.process: the local llama-server, with the commit of the binary's build
    process = doc["server"]["process"]
    assert process is not None, doc["server"]["process_note"]
    assert process["build"] == build and build.endswith("-" + built_commit())
