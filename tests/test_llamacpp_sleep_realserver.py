"""A real ``llama-server`` started with ``--sleep-idle-seconds``: it frees its model after that
long without work and reloads it for the next request. The monitor must not be that work.

llama-server counts a ``/slots`` read as activity and wakes a sleeping server for one, while
``/metrics`` does neither (``server_queue``: only metrics tasks leave the idle timer alone). A
watch that read ``/slots`` at every scrape kept the server awake for ever. Now an idle server is
left to sleep, detection does not wake it, and a request's tokens are still counted exactly;
so is a router's model that sleeps (a preset's ``sleep-idle-seconds``), read through the router.
Skipped, with the reason, when the binary or ``shared/`` is missing (``tests/realserver.py``).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.watcher import MetricsWatcher
from tests.realserver import running_llama_router, running_llama_server

pytestmark = [pytest.mark.realserver, pytest.mark.xdist_group("llama-server")]

IDLE_S = 2
DEADLINE_S = 20.0
"""How long the server may take to fall asleep under the watch (it did in IDLE_S + 1 s)."""
MAX_TOKENS = 64


ROUTED = {"model": "spec", "autoload": "false"}
"""A router's reads of its model ``spec``, which never load it."""


def _asleep(url: str, routed: bool) -> bool:
    props = httpx.get(url + "/props", params=ROUTED if routed else None, timeout=10).json()
    return props.get("is_sleeping") is True


def _predicted(url: str, routed: bool) -> float:
    text = httpx.get(url + "/metrics", params=ROUTED if routed else None, timeout=10).text
    for line in text.splitlines():
        if line.startswith("llamacpp:tokens_predicted_total "):
            return float(line.split()[1])
    raise AssertionError("no llamacpp:tokens_predicted_total")


async def _watch_until_asleep(watcher: MetricsWatcher, url: str, routed: bool) -> int:
    """Scrape every 0.25 s until the server sleeps; the scrapes it took."""
    start, scrapes = time.monotonic(), 0
    while not await asyncio.to_thread(_asleep, url, routed):
        assert time.monotonic() - start < DEADLINE_S, "the server never slept under the watch"
        await watcher.scrape()
        scrapes += 1
        await asyncio.sleep(0.25)
    return scrapes


async def _run(url: str, routed: bool = False) -> None:
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30.0) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        await watcher.scrape()
        assert await _watch_until_asleep(watcher, url, routed) > IDLE_S * 4 // 2
        # a monitor started (or reconnecting) now does not wake it
        again = await detect(client)
        assert await asyncio.to_thread(_asleep, url, routed)
        if not routed:  # a router says the setup in the command line it reports
            assert again.notes["speculative"].startswith("unknown while the server sleeps")
        watcher = MetricsWatcher(client, again)
        await watcher.scrape()
        await watcher.scrape()
        assert await asyncio.to_thread(_asleep, url, routed)
        # a request wakes it; its tokens are counted as the server counts them
        before = await asyncio.to_thread(_predicted, url, routed)
        body = {"prompt": "Once upon a time", "max_tokens": MAX_TOKENS, "ignore_eos": True}
        if routed:
            body["model"] = "spec"
        request = asyncio.create_task(
            asyncio.to_thread(httpx.post, url + "/v1/completions", json=body, timeout=120)
        )
        tokens = 0.0
        while not request.done():
            tokens += (await watcher.scrape()).tokens or 0.0
            await asyncio.sleep(0.1)
        (await request).raise_for_status()
        tokens += (await watcher.scrape()).tokens or 0.0
        assert tokens == await asyncio.to_thread(_predicted, url, routed) - before == MAX_TOKENS
        await _watch_until_asleep(watcher, url, routed)


def test_the_watch_lets_an_idle_llama_server_sleep() -> None:
    with running_llama_server("draft", args=("--sleep-idle-seconds", str(IDLE_S))) as url:
        asyncio.run(_run(url))


SLEEPING_PRESET = f"""
[spec]
model = {{models}}/tiny-target.gguf
model-draft = {{models}}/tiny-draft.gguf
spec-type = draft-simple
spec-draft-n-max = 4
ctx-size = 2048
threads = 1
metrics = 1
sleep-idle-seconds = {IDLE_S}
"""


def test_the_watch_lets_a_routers_idle_model_sleep() -> None:
    # a router forwards the reads to the model's own server: the same rule keeps it asleep
    with running_llama_router(SLEEPING_PRESET) as url:
        body = {"model": "spec", "prompt": "Once upon a time", "max_tokens": 8}
        httpx.post(url + "/v1/completions", json=body, timeout=120).raise_for_status()
        asyncio.run(_run(url, routed=True))
