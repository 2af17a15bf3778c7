"""Configuration health (issue 40 item 1) and KV capacity in tokens (item 2): each rule fires on
a window built for it and stays clear beside it; against the simulated vLLM and SGLang the
rules fire on a scenario built for each and reach ``probe --json`` and the probe's text."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from specwatch.commands.probe import render_text
from specwatch.core import config_health as H
from specwatch.core.server import Dialect, LatencyBucket, MetricsWindow, ServerInfo
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.probe import probe, probe_to_dict


def _info(max_len: int | None = 2048, **launch: Any) -> ServerInfo:
    return ServerInfo("http://x", Dialect.VLLM, max_model_len=max_len, launch_args=launch or None)


def _by_rule(info: ServerInfo | None, w: MetricsWindow) -> dict[str, H.HealthFinding]:
    return {f.rule: f for f in H.config_health(info, w)}


def test_truncation_reads_the_window_first_and_says_its_share() -> None:
    w = MetricsWindow(
        t=1.0,
        dt=1.0,
        finished_by_reason={"stop": 100.0, "length": 0.0},
        finished_in_window={"stop": 0.0, "length": 4.0},
    )
    cut = _by_rule(None, w)["truncation"]
    assert cut.level == "bad"
    assert cut.text() == "✖ 100% of requests truncated at the length cap (4 of 4 in the window)"
    quiet = MetricsWindow(t=1.0, dt=1.0, finished_by_reason={"stop": 97.0, "length": 3.0})
    assert _by_rule(None, quiet)["truncation"].level == "clear"
    some = MetricsWindow(t=1.0, dt=1.0, finished_by_reason={"stop": 90.0, "length": 10.0})
    assert _by_rule(None, some)["truncation"].level == "warn"
    assert _by_rule(None, MetricsWindow(t=1.0, dt=1.0))["truncation"].level == "unknown"
    # since start, a few requests are an idle server's probes and benchmarks, not its traffic
    few = MetricsWindow(t=1.0, dt=1.0, finished_by_reason={"length": 19.0})
    found = _by_rule(None, few)["truncation"]
    assert (found.level, found.line) == ("unknown", "19 of 20 requests finished since start")
    enough = MetricsWindow(t=1.0, dt=1.0, finished_by_reason={"length": 20.0})
    assert _by_rule(None, enough)["truncation"].level == "bad"


def test_requests_that_could_not_reach_the_context_stopped_at_their_own_max_tokens() -> None:
    cut = MetricsWindow(
        t=1.0,
        dt=1.0,
        finished_by_reason={"length": 24.0},
        finished_in_window={"length": 4.0},
        largest_context=LatencyBucket(1.0, 100.0, 210.0),  # prompt ≤ 10 + generated ≤ 200
    )
    found = _by_rule(_info(2048), cut)["truncation"]
    assert found.level == "clear" and not found.fires and found.short == ""
    assert found.line == (
        "100% of requests stopped at their own max_tokens (4 of 4 in the window); "
        "none came near the 2,048-token context"
    )
    # the largest request may have reached the context: any of those cut may be the server's
    for ctx, max_len in ((LatencyBucket(1.0, 1000.0, 2050.0), 2048), (None, 2048), (None, None)):
        w = replace(cut, largest_context=ctx)
        assert _by_rule(_info(max_len), w)["truncation"].level == "bad", (ctx, max_len)


def test_probe_leaves_its_own_request_out_of_the_rules() -> None:
    from specwatch.core.server import StreamResult
    from specwatch.sources.probe import health_window

    # one probe of an idle vLLM: its own request, cut at its own max_tokens, is all there is
    w = MetricsWindow(
        t=1.0,
        dt=0.7,
        finished_by_reason={"stop": 0.0, "length": 1.0},
        finished_in_window={"stop": 0.0, "length": 1.0},
    )
    stream = StreamResult(
        256, 8, 0.7, 0.03, 0.67, 366.0, 380.0, True, "usage", finish_reason="length"
    )
    assert _by_rule(None, w)["truncation"].level == "bad"
    own = health_window(w, stream)
    assert own is not None and own.finished_in_window == {"stop": 0.0, "length": 0.0}
    assert _by_rule(None, own)["truncation"].level == "unknown"
    # beside real traffic only its own one request goes
    busy = replace(w, finished_in_window={"stop": 6.0, "length": 4.0})
    kept = health_window(busy, stream)
    assert kept is not None and kept.finished_in_window == {"stop": 6.0, "length": 3.0}


def test_context_over_provisioned_needs_enough_requests_and_a_bound() -> None:
    ctx = LatencyBucket(1.0, 100.0, 250.0)
    w = MetricsWindow(t=1.0, dt=1.0, largest_context=ctx, finished_by_reason={"length": 30.0})
    found = _by_rule(_info(2048), w)["context"]
    assert found.level == "warn"
    assert found.line == "context over-provisioned: largest request ≤ 250 of 2,048 max-model-len"
    assert _by_rule(_info(800), w)["context"].level == "clear"
    few = MetricsWindow(t=1.0, dt=1.0, largest_context=ctx, finished_by_reason={"length": 3.0})
    assert _by_rule(_info(2048), few)["context"].level == "unknown"
    past = MetricsWindow(t=1.0, dt=1.0, largest_context=LatencyBucket(1.0, 5e3, float("inf")))
    assert _by_rule(_info(2048), past)["context"].level == "unknown"
    assert _by_rule(_info(None), w)["context"].level == "unknown"


def test_kv_pressure_preemption_and_capacity_in_tokens() -> None:
    w = MetricsWindow(t=1.0, dt=2.0, kv_cache_usage=0.95, kv_capacity_tokens=262144.0)
    assert H.kv_words(w) == "249.0k/262.1k tok"
    assert _by_rule(None, w)["kv_pressure"].level == "warn"
    pre = MetricsWindow(t=1.0, dt=2.0, kv_cache_usage=0.99, preemptions_per_s=1.5)
    found = _by_rule(None, pre)["kv_pressure"]
    assert found.level == "bad" and "3 preempted in the window" in found.line
    assert _by_rule(None, MetricsWindow(t=1.0, dt=1.0, kv_cache_usage=0.4))[
        "kv_pressure"
    ].level == ("clear")
    assert H.kv_words(MetricsWindow(t=1.0, dt=1.0, kv_cache_usage=0.4)) is None


def test_queue_backlog_and_prefix_caching() -> None:
    backlog = MetricsWindow(t=1.0, dt=1.0, requests_running=2.0, requests_waiting=6.0)
    assert _by_rule(None, backlog)["queue"].level == "warn"
    blip = MetricsWindow(t=1.0, dt=1.0, requests_running=8.0, requests_waiting=1.0)
    assert _by_rule(None, blip)["queue"].level == "clear"
    off = _by_rule(_info(enable_prefix_caching="False"), blip)["prefix_caching"]
    assert off.level == "warn" and "enable_prefix_caching=False" in off.line
    assert _by_rule(_info(enable_prefix_caching="True"), blip)["prefix_caching"].level == "clear"
    assert _by_rule(_info(disable_radix_cache=True), blip)["prefix_caching"].level == "warn"
    assert _by_rule(_info(), blip)["prefix_caching"].level == "unknown"


async def _passive_probe(dialect: str, finished: int = 0, **overrides: Any) -> dict[str, Any]:
    world = SimWorld(
        preset(
            dialect,
            warmup_requests=0,
            base_step_ms=1.0,
            prefill_ms=2.0,
            background_max_tokens=(16, 48),
            background_think_s=(0.0, 0.01),
            **overrides,
        )
    )
    with SimServer(world) as server:
        endpoint = parse_endpoint(server.url, env={})
        # the simulated users run with the world: wait for requests to finish
        for _ in range(100):
            if len(world.truth.requests()) >= finished:
                break
            await asyncio.sleep(0.1)
        result = await probe(endpoint, read_gpus=False, identify=None, passive_s=1.0)
    doc = probe_to_dict(result)
    doc["_text"] = render_text(result)
    return doc


def _levels(doc: dict[str, Any]) -> dict[str, str]:
    return {f["rule"]: f["level"] for f in doc["health"]}


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
async def test_the_simulator_fires_each_rule_on_its_scenario(dialect: str) -> None:
    healthy = await _passive_probe(dialect, background_concurrency=2)
    assert healthy["schema_version"] == 6
    assert healthy["metrics"]["kv_capacity_tokens"] == pytest.approx(500_000, rel=0.01)
    assert _levels(healthy)["queue"] == "clear" and _levels(healthy)["kv_pressure"] == "clear"
    # tight KV, one running slot, many users, prefix caching off: pressure, backlog, off
    squeezed = await _passive_probe(
        dialect,
        finished=H.CONTEXT_MIN_REQUESTS + 2,
        background_concurrency=12,
        max_running=2,
        kv_capacity_tokens=800,
        prefix_caching=False,
        background_prompt_tokens=(400, 500),
    )
    levels = _levels(squeezed)
    assert squeezed["metrics"]["kv_capacity_tokens"] == pytest.approx(800, rel=0.05)
    assert levels["queue"] == "warn", squeezed["health"]
    assert levels["kv_pressure"] in ("warn", "bad"), squeezed["health"]
    assert "health   ⚠ queue backlog" in squeezed["_text"]
    if dialect == "vllm":
        assert levels["prefix_caching"] == "warn"
        # the simulated users ask for at most 48 tokens, and vLLM counts "length" when cut;
        # no request comes near the context, so their own max_tokens cut them
        assert levels["truncation"] == "clear", squeezed["health"]
        assert "stopped at their own max_tokens" in squeezed["health"][0]["line"]
        assert levels["context"] == "warn", squeezed["health"]
        # a context a little longer than the prompts: the server cuts answers short
        short = await _passive_probe(
            dialect,
            finished=H.CONTEXT_MIN_REQUESTS + 2,
            background_concurrency=4,
            max_model_len=1040,
            background_prompt_tokens=(1000, 1030),
        )
        assert _levels(short)["truncation"] == "bad", short["health"]
        assert "truncated at the length cap" in short["health"][0]["line"]


def test_the_load_pane_shows_kv_tokens_and_the_rules_that_fire() -> None:
    from rich.style import Style

    from specwatch.ui.model import MonitorModel
    from specwatch.ui.panes.load import load_text

    model = MonitorModel()
    model.set_ready(0.0, _info(2048, enable_prefix_caching="False"))
    model.add_window(
        MetricsWindow(
            t=1.0,
            dt=1.0,
            requests_running=4.0,
            requests_waiting=0.0,
            kv_cache_usage=0.5,
            kv_capacity_tokens=4096.0,
            finished_by_reason={"length": 40.0},
            finished_in_window={"length": 4.0},
        )
    )
    styles = {k: Style() for k in ("label", "value", "dim", "warn")}
    text = load_text(model, styles).plain
    lines = text.splitlines()
    assert "kv 50% 2.0k/4.1k tok" in lines[0]
    assert lines[2].startswith("✖ 100% truncated  ⚠ prefix caching off"), text
    # a benchmark from the monitor: its own requests end at its --max-tokens, not the server's
    model.bench_event(1.5, "started", 0, 2, "", None)
    cut = MetricsWindow(
        t=3.0, dt=1.0, finished_by_reason={"length": 12.0}, finished_in_window={"length": 2.0}
    )
    model.add_window(cut)
    assert "truncated" not in load_text(model, styles).plain
    model.bench_event(3.5, "finished", 2, 2, "", None)
    model.add_window(replace(cut, t=4.0))  # finished during the window: still its own
    assert "truncated" not in load_text(model, styles).plain
    model.add_window(replace(cut, t=5.0))  # after it: traffic of the server's
    assert "✖ 100% truncated" in load_text(model, styles).plain
