"""SGLang's load pane has what its metrics give of vLLM's: the time finished requests waited in
the queue (``sglang:queue_time_seconds``, 0.5.4+) and, with ``--collect-tokens-histogram``, their
shape in tokens, read the same way (the bucket holding each quantile)."""

from __future__ import annotations

import asyncio

from rich.style import Style

from specwatch.core.server import LatencyBucket, MetricsWindow
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.detect import detect
from specwatch.sources.dialects.base import WindowBuilder
from specwatch.sources.dialects.sglang import derive_sglang
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.metrics.parse import parse_metrics
from specwatch.sources.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text
from tests.scene import scene_server
from tests.test_largest_context import INFO, _hist

STYLES = {k: Style() for k in ("label", "value", "dim")}


async def _queue_window() -> MetricsWindow | None:
    """The first window of the simulated SGLang in which a request finished (30 s at most)."""
    with SimServer(SimWorld(preset("sglang", background_concurrency=3))) as server:
        async with ServerClient(parse_endpoint(server.url, env={}), timeout_s=5.0) as client:
            watcher = MetricsWatcher(client, await detect(client))
            first = await watcher.scrape()
            while True:
                await asyncio.sleep(0.2)
                w = await watcher.scrape()
                if "queue" in w.latency_buckets:
                    return w
                if w.t > first.t + 30.0:
                    return None


def test_the_simulated_sglang_shows_its_queue_time() -> None:
    w = asyncio.run(_queue_window())
    assert w is not None, "no window with a finished request's queue time in 30 s"
    assert w.sources["latency_buckets.queue"].startswith("Δsglang:queue_time_seconds")
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.add_window(w)
    line = next(x for x in load_text(model, STYLES).plain.splitlines() if "queue" in x)
    assert (line.startswith("p50") and " ms" in line) or " s" in line, line


def test_its_token_histograms_give_the_request_shape() -> None:
    before = _hist("sglang:prompt_tokens_histogram", {"256": 2, "1024": 4, "+Inf": 4})
    after = _hist("sglang:prompt_tokens_histogram", {"256": 2, "1024": 14, "+Inf": 14})
    gen0 = _hist("sglang:generation_tokens_histogram", {"128": 4, "512": 4, "+Inf": 4})
    gen1 = _hist("sglang:generation_tokens_histogram", {"128": 5, "512": 14, "+Inf": 14})
    b = WindowBuilder()
    prev = parse_metrics(f"{before}\n{gen0}\n")
    derive_sglang(b, parse_metrics(f"{after}\n{gen1}\n"), prev, 1.0, INFO)
    buckets = b.values["latency_buckets"]
    # ten requests finished in the window, all with 256-1024 prompt and mostly 128-512 out
    assert buckets["prompt_tokens"][0] == LatencyBucket(0.5, 256.0, 1024.0)
    assert buckets["generation_tokens"][0] == LatencyBucket(0.5, 128.0, 512.0)
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.add_window(MetricsWindow(t=1.0, dt=1.0, latency_buckets=buckets))
    text = load_text(model, STYLES).plain
    assert "prompt 256–1024 tok" in text and "gen 128–512 tok" in text
