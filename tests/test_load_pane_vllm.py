"""The load pane shows what vllmstat users look for: where a request's time went (queue,
prefill, decode), the request shape in tokens, finish reasons and preemptions, running and
waiting peaks, the largest context (issue 21), read from the simulated vLLM over HTTP, and held
still between windows."""

from __future__ import annotations

import asyncio

from rich.style import Style

from specwatch.core.server import LatencyBucket, MetricsWindow
from specwatch.sim.engine import SimRequest
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.watcher import MetricsWatcher
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import context_words, load_text, token_bucket_words
from tests.scene import scene_server

STYLES = {k: Style() for k in ("label", "value", "dim")}


WANTED = {"queue", "prefill", "decode", "prompt_tokens", "generation_tokens"}


async def _windows_of_simulated_vllm(
    contexts: list[int] | None = None,
) -> tuple[MetricsWindow, set[str], list[MetricsWindow]]:
    """The last window, every bucket key seen and every window, once each key has been (or
    30 s passed); ``contexts`` gets each finished request's prompt + generated tokens."""
    world = SimWorld(preset("vllm", background_concurrency=3, warmup_requests=0))
    if contexts is not None:
        telemetry = world.telemetry
        finish = telemetry.on_finish

        def seen_finish(req: SimRequest, t: float) -> None:
            contexts.append(req.prompt_tokens + req.generated)
            finish(req, t)

        telemetry.on_finish = seen_finish  # type: ignore[method-assign]
    with SimServer(world) as server:
        async with ServerClient(parse_endpoint(server.url, env={}), timeout_s=5.0) as client:
            info = await detect(client)
            watcher = MetricsWatcher(client, info)
            first = await watcher.scrape()
            # The simulated users' requests start and finish as the world runs: poll until
            # every histogram has moved in some window (a request observed start to end).
            deadline, seen, windows = first.t + 30.0, set[str](), [first]
            while True:
                await asyncio.sleep(0.2)
                w = await watcher.scrape()
                windows.append(w)
                seen |= set(w.latency_buckets)
                if (seen >= WANTED and sum(w.finished_by_reason.values()) >= 2) or w.t > deadline:
                    return w, seen, windows


def test_the_simulated_vllm_gives_shape_time_and_finish_reasons() -> None:
    w, seen, _ = asyncio.run(_windows_of_simulated_vllm())
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


def test_peaks_and_the_largest_context_from_the_simulated_vllm() -> None:
    """Running and waiting peaks over the graph's window, and the largest context as the
    server's token histograms bound it: at least what the largest finished request used."""
    contexts: list[int] = []
    w, _, windows = asyncio.run(_windows_of_simulated_vllm(contexts))
    ctx = w.largest_context
    assert ctx is not None and contexts, (w.sources, contexts)
    assert ctx.low < max(contexts) <= ctx.high < float("inf")
    assert "a bound" in w.sources["largest_context"]
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    for window in windows:
        model.add_window(window)
    running = [x.requests_running for x in windows[1:] if x.requests_running is not None]
    assert running and model.peak(model.running) == max(running)
    text = load_text(model, STYLES).plain
    assert f"running {w.requests_running:.0f} max {max(running):.0f}  waiting" in text, text
    assert f"max ctx ≤ {ctx.high:.0f} tok" in text


def test_peaks_cover_the_graph_window_and_never_cut_a_number() -> None:
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.graph_window = "1m"
    for t, running, waiting in ((1, 3, 0), (2, 9, 4), (3, 5, 1)):
        model.add_window(
            MetricsWindow(
                t=float(t),
                dt=1.0,
                requests_running=running,
                requests_waiting=waiting,
                kv_cache_usage=0.5,
                largest_context=LatencyBucket(1.0, 1024.0, 3072.0),
            )
        )
    text = load_text(model, STYLES).plain
    assert "running 5 max 9  waiting 1 max 4  kv 50%" in text
    assert "max ctx ≤ 3072 tok" in text
    model.add_window(MetricsWindow(t=62.5, dt=1.0, requests_running=2, requests_waiting=0))
    assert "running 2 max 5  waiting 0 max 1" in load_text(model, STYLES).plain
    # Narrower: whole figures go (the peaks before kv), none is cut inside.
    for width in range(12, 60):
        first = load_text(model, STYLES, width).plain.splitlines()[0]
        assert first.startswith("running 2"), (width, first)
        assert not first.endswith(("max", "max ", "…")), (width, first)
        assert len(first) <= width or first == "running 2", (width, first)


def test_context_words() -> None:
    assert context_words(LatencyBucket(1.0, 4711.0, 4711.0)) == "4711"
    assert context_words(LatencyBucket(1.0, 1024.0, 3072.0)) == "≤ 3072"
    assert context_words(LatencyBucket(1.0, 8192.0, float("inf"))) == "> 8192"


def test_an_unbounded_largest_context_survives_a_recording() -> None:
    """Past the last bucket the bound is ``> N``; a recording stores the infinite top as null,
    and the replayed window is still taken and drawn."""
    from specwatch.record.codec import decode, encode
    from specwatch.session.events import MetricsScraped

    w = MetricsWindow(t=1.0, dt=1.0, largest_context=LatencyBucket(1.0, 8192.0, float("inf")))
    kind, payload, packed = encode(MetricsScraped(window=w))
    replayed = decode(kind, payload, packed)
    assert isinstance(replayed, MetricsScraped)
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.add_window(replayed.window)
    assert "max ctx > 8192 tok" in load_text(model, STYLES).plain
