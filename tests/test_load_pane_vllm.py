"""The load pane shows what vllmstat users look for: where a request's time went (queue,
prefill, decode), the request shape in tokens, finish reasons and preemptions (issue 21), read
from the simulated vLLM over HTTP, and held still between windows."""

from __future__ import annotations

import asyncio

from rich.style import Style

from specwatch.core.server import LatencyBucket, MetricsWindow
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.watch.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text, token_bucket_words
from tests.scene import scene_server

STYLES = {k: Style() for k in ("label", "value", "dim")}


WANTED = {"queue", "prefill", "decode", "prompt_tokens", "generation_tokens"}


async def _windows_of_simulated_vllm() -> tuple[MetricsWindow, set[str]]:
    """The last window and every bucket key seen, once each key has been (or 30 s passed)."""
    world = SimWorld(preset("vllm", background_concurrency=3, warmup_requests=0))
    with SimServer(world) as server:
        async with ServerClient(parse_endpoint(server.url, env={}), timeout_s=5.0) as client:
            info = await detect(client)
            watcher = MetricsWatcher(client, info)
            first = await watcher.scrape()
            # The simulated users' requests start and finish as the world runs: poll until
            # every histogram has moved in some window (a request observed start to end).
            deadline, seen = first.t + 30.0, set[str]()
            while True:
                await asyncio.sleep(0.2)
                w = await watcher.scrape()
                seen |= set(w.latency_buckets)
                if (seen >= WANTED and sum(w.finished_by_reason.values()) >= 2) or w.t > deadline:
                    return w, seen


def test_the_simulated_vllm_gives_shape_time_and_finish_reasons() -> None:
    w, seen = asyncio.run(_windows_of_simulated_vllm())
    assert seen >= WANTED, seen
    assert w.finished_by_reason.get("length", 0) >= 2
    assert w.preemptions_total == 0 and w.preemptions_per_s == 0
    assert w.sources["finished_by_reason"] == "vllm:request_success_total by finished_reason"


def _bucket(low: float, high: float) -> tuple[LatencyBucket, ...]:
    return (LatencyBucket(0.5, low, high), LatencyBucket(0.9, low, high))


def test_the_pane_shows_them_and_holds_them_with_their_age() -> None:
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.add_window(
        MetricsWindow(
            t=1.0,
            dt=1.0,
            requests_running=3,
            preemptions_total=2,
            finished_by_reason={"stop": 30.0, "length": 10.0},
            latency_buckets={
                "ttft": _bucket(0.05, 0.1),
                "queue": _bucket(0.0, 0.01),
                "prefill": _bucket(0.02, 0.04),
                "decode": _bucket(4.0, 6.0),
                "prompt_tokens": _bucket(256, 512),
                "generation_tokens": _bucket(1024, 2048),
            },
        )
    )
    text = load_text(model, STYLES).plain
    assert "preempted 2" in text and "done 40" in text and "stop 75%" in text
    assert "queue ≤ 10 ms" in text and "prefill 20–40 ms" in text and "decode 4–6 s" in text
    assert "prompt 256–512 tok" in text and "gen 1024–2048 tok" in text
    # Ten windows without a request starting or ending: the rows stay, saying their age.
    for t in range(2, 12):
        model.add_window(MetricsWindow(t=float(t), dt=1.0, requests_running=3))
    held = load_text(model, STYLES).plain
    assert "TTFT" in held and "10s ago" in held and "decode 4–6 s" in held


def test_token_buckets_read_as_tokens() -> None:
    assert token_bucket_words(LatencyBucket(0.5, 0.0, 128.0)) == "≤ 128"
    assert token_bucket_words(LatencyBucket(0.5, 8192.0, float("inf"))) == "> 8192"
    assert token_bucket_words(LatencyBucket(0.5, 131072.0, 262144.0)) == "131k–262k"
