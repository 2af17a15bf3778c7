"""llama.cpp's largest context is exact: ``llamacpp:n_tokens_max`` counts the longest sequence
a slot held (prompt + generated), read over HTTP from the simulated llama-server and shown
without a bound sign (issue 21, what vllmstat users look for)."""

from __future__ import annotations

import asyncio

import httpx
from rich.style import Style

from specwatch.core.server import MetricsWindow
from specwatch.sim.presets import preset
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text
from tests.scene import scene_server
from tests.sim_fixtures import ManualClock
from tests.sim_testing import in_thread, metric_value, serving

STYLES = {k: Style() for k in ("label", "value", "dim")}


async def _two_windows(url: str) -> tuple[MetricsWindow, MetricsWindow]:
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=5.0) as client:
        watcher = MetricsWatcher(client, await detect(client))
        return await watcher.scrape(), await watcher.scrape()


def test_the_largest_context_is_llama_servers_own_count() -> None:
    clock = ManualClock()
    with serving(preset("llamacpp", warmup_requests=0), clock) as (world, server):
        before = httpx.get(server.url + "/metrics").text
        assert metric_value(before, "llamacpp:n_tokens_max") == 0.0
        body = {"prompt": "x" * 20, "n_predict": 300, "ignore_eos": True}
        fut = in_thread(lambda: httpx.post(server.url + "/completion", json=body, timeout=10))
        assert world.wait_submitted(1)
        clock.set(60.0)
        fut.result(timeout=10)
        truth = world.truth.requests()[0]
        longest = truth.prompt_tokens + truth.completion_tokens
        first, second = asyncio.run(_two_windows(server.url))
    ctx = second.largest_context
    assert ctx is not None and ctx.low == ctx.high == longest, (ctx, longest)
    assert second.sources["largest_context"].startswith("llamacpp:n_tokens_max")
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.add_window(first)
    model.add_window(second)
    text = load_text(model, STYLES).plain
    assert f"max ctx {longest} tok" in text and "≤" not in text.split("max ctx")[1]
