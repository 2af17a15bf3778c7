"""A real llama-server router (``--models-preset``: a llama-server per model, started when a
request names it). The monitor watches a model already loaded, through the router, and never
makes it load one: it waits while none is, each read carries ``autoload=false``, and a model it
was asked for but is not loaded stays unloaded. The speculative setup comes from the command
line the router reports for the model, and the window's tokens are that model's own counter.
Skipped, with the reason, when the binary is missing (``tests/realserver.py``)."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.commands.advise import run_advise
from specwatch.commands.bench import run_bench
from specwatch.commands.main import build_parser
from specwatch.core.identity import ServerIdentity
from specwatch.core.launch_config import DRAFT_LENGTH, server_launch_config
from specwatch.session import events as ev
from specwatch.session.live import ServerPoller
from specwatch.sources.detect import detect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.code_origin import Deadline
from specwatch.sources.identity.process import identify, listening_sockets, socket_owners
from specwatch.sources.stream import stream_completion
from specwatch.sources.watcher import MetricsWatcher
from tests.realserver import running_llama_router
from tests.test_bench_sim import bench_args

pytestmark = [pytest.mark.realserver, pytest.mark.xdist_group("llama-server")]

PRESETS = """
[spec]
model = {models}/tiny-target.gguf
model-draft = {models}/tiny-draft.gguf
spec-type = draft-simple
spec-draft-n-max = 4
ctx-size = 2048
threads = 1
threads-draft = 1
metrics = 1

[plain]
model = {models}/tiny-target.gguf
ctx-size = 2048
threads = 1
metrics = 1
"""
REQUESTS, MAX_TOKENS = 3, 64


def _states(url: str) -> dict[str, str]:
    data = httpx.get(url + "/v1/models", timeout=10).json()["data"]
    return {card["id"]: card["status"]["value"] for card in data}


def _predicted(url: str, model: str) -> float:
    """The routed model's own ``tokens_predicted_total``, read without loading anything."""
    text = httpx.get(
        url + "/metrics", params={"model": model, "autoload": "false"}, timeout=10
    ).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llamacpp:tokens_predicted_total":
                return float(sample.value)
    raise AssertionError("no llamacpp:tokens_predicted_total")


def _complete(url: str, model: str, max_tokens: int) -> None:
    body = {"model": model, "prompt": "Once upon a time", "max_tokens": max_tokens}
    body["ignore_eos"] = True
    httpx.post(url + "/v1/completions", json=body, timeout=120).raise_for_status()


async def _watch(url: str) -> None:
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30.0) as client:
        with pytest.raises(ServerError) as none_loaded:
            await detect(client)
    assert none_loaded.value.loading, none_loaded.value
    assert "a llama-server router with none of its 2 models loaded" in str(none_loaded.value)
    assert _states(url) == {"spec": "unloaded", "plain": "unloaded"}

    await asyncio.to_thread(_complete, url, "spec", 8)  # a client loads it
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30.0) as client:
        info = await detect(client)
        assert info.model == "spec" and info.routed == "a llama-server router: watching spec"
        # /slots says a draft is loaded; the draft length is in the router's command line
        assert info.spec.enabled and info.spec.num_draft_tokens == 4, info.spec
        launch = server_launch_config(info)
        assert launch is not None and launch.value(DRAFT_LENGTH) == "4"
        watcher = MetricsWatcher(client, info)
        await watcher.scrape()
        before = await asyncio.to_thread(_predicted, url, "spec")
        for _ in range(REQUESTS):
            await asyncio.to_thread(_complete, url, "spec", MAX_TOKENS)
        after = await asyncio.to_thread(_predicted, url, "spec")
        window = await watcher.scrape()
        streamed = await stream_completion(client, info, "Once upon a time", 16)
    assert after - before == REQUESTS * MAX_TOKENS
    assert window.tokens == after - before and "error" not in window.notes, window.notes
    assert window.accept_length is not None and window.accept_length > 1.0
    assert streamed.error is None and streamed.completion_tokens == 16

    # asked for a model it has not loaded, it waits; the model stays unloaded
    async with ServerClient(parse_endpoint(url + "?model=plain", env={}), timeout_s=30) as c:
        with pytest.raises(ServerError) as unloaded:
            await detect(c)
    assert unloaded.value.loading
    assert "a llama-server router whose model 'plain' is not loaded" in str(unloaded.value)
    # a read routed to a model that is not loaded (one unloaded while watched) does not load it
    async with ServerClient(parse_endpoint(url, env={}), timeout_s=30) as c:
        c.route = "plain"
        refused = await c.get("/metrics", check=False)
    assert refused.status_code == 400 and "model is not loaded" in refused.text
    assert _states(url) == {"spec": "loaded", "plain": "unloaded"}


def test_a_router_is_watched_through_a_loaded_model_and_never_loads_one() -> None:
    with running_llama_router(PRESETS) as url:
        asyncio.run(_watch(url))


async def _until(
    seen: list[ev.SessionEvent], found: Callable[[ev.SessionEvent], bool], start: int = 0
) -> None:
    """Wait (30 s at most) for an event from ``seen[start]`` on that ``found`` accepts; the
    poller emits on this loop."""
    async with asyncio.timeout(30):
        while not any(found(event) for event in seen[start:]):
            start = len(seen)
            await asyncio.sleep(0.05)


def _unload(url: str, model: str) -> None:
    httpx.post(url + "/models/unload", json={"model": model}, timeout=60).raise_for_status()


async def _watch_through_unload(
    url: str,
) -> tuple[list[ev.SessionEvent], ServerIdentity, dict[str, int]]:
    seen: list[ev.SessionEvent] = []
    poller = ServerPoller(parse_endpoint(url, env={}), seen.append, interval_s=0.2)
    await asyncio.to_thread(_complete, url, "spec", 8)
    task = asyncio.create_task(poller.run())
    try:
        await _until(seen, lambda e: isinstance(e, ev.ServerReady))
        await asyncio.to_thread(_complete, url, "plain", 8)  # another model is loaded too
        ready = next(e for e in seen if isinstance(e, ev.ServerReady))
        identity = await asyncio.to_thread(identify, url, ready.info)
        servers = {model: _server_of(url, model) for model in ("spec", "plain")}
        unloaded = len(seen)
        await asyncio.to_thread(_unload, url, "spec")
        await _until(seen, lambda e: isinstance(e, ev.ServerWaiting), unloaded)
        # waiting, the watched model is not loaded by the watch, nor another one watched
        assert _states(url) == {"spec": "unloaded", "plain": "loaded"}
        reloaded = len(seen)
        await asyncio.to_thread(_complete, url, "spec", 8)  # a client loads it again
        await _until(seen, lambda e: isinstance(e, ev.ServerReady), reloaded)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return seen, identity, servers


def _server_of(url: str, model: str) -> int:
    """The pid of the llama-server the router started for ``model`` (on its ``--port``)."""
    card = next(
        c for c in httpx.get(url + "/v1/models", timeout=10).json()["data"] if c["id"] == model
    )
    args = card["status"]["args"]
    port = int(args[args.index("--port") + 1])
    owners = socket_owners({inode for inode, _ in listening_sockets(port)}, Deadline(5.0))
    assert len(owners) == 1, owners
    return owners[0]


def test_a_model_unloaded_while_watched_is_waited_for_not_swapped_for_another() -> None:
    with running_llama_router(PRESETS) as url:
        seen, identity, servers = asyncio.run(_watch_through_unload(url))
    # the host's figures count the router and the watched model's server as the server: the
    # other model's server is other work, its CPU a competitor's
    assert identity.pid is not None and identity.pid not in servers.values()
    assert servers["spec"] in identity.pids and servers["plain"] not in identity.pids
    readies = [e.info.model for e in seen if isinstance(e, ev.ServerReady)]
    assert readies == ["spec", "spec"]
    notes = [e.window.notes.get("error", "") for e in seen if isinstance(e, ev.MetricsScraped)]
    unloaded = "the router has unloaded spec: waiting for it (a request naming it loads it"
    assert any(note.startswith(unloaded) for note in notes), notes
    lost = [e.reason for e in seen if isinstance(e, ev.ServerLost)]
    assert len(lost) == 1 and "a llama-server router whose model 'spec' is not loaded" in lost[0]
    waiting = [e.detail for e in seen if isinstance(e, ev.ServerWaiting)]
    assert any("'spec' is not loaded" in detail for detail in waiting), waiting


def _advise(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["advise", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = run_advise(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _bench(url: str, out: Path) -> tuple[str, dict[str, Any]]:
    argv = ["--url", url, "-n", "1", "--warmup", "0", "--max-tokens", "8", "--no-gpu"]
    argv += ["--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run_bench(
        bench_args(argv), argv=["specwatch", "bench", *argv], stdout=stdout, stderr=stderr
    )
    assert status == 0, stderr.getvalue()
    (path,) = out.iterdir()
    return stdout.getvalue() + stderr.getvalue(), orjson.loads(path.read_bytes())


def test_advice_and_a_benchmark_on_a_router_name_the_model_they_read(tmp_path: Path) -> None:
    with running_llama_router(PRESETS) as url:
        _complete(url, "plain", 8)
        _complete(url, "spec", 8)
        said, snapshot = _bench(url, tmp_path)
        assert "a llama-server router: watching plain (also loaded: spec;" in said, said
        assert snapshot["server"]["model"] == "plain", snapshot["server"]
        # no model named: the first loaded is advised on, and said to be; it does not speculate
        code, out, err = _advise(url, "--seconds", "0.6", "--interval", "0.2")
        assert "a llama-server router: watching plain (also loaded: spec;" in err, err
        assert out.startswith(f"{url}?model=plain: "), out
        assert "speculative decoding is off on this server" in out, (code, out)
        # the speculating model, under load: the draft length's flag comes from the command
        # line the router reports for it, not from the router's own
        stop = threading.Event()

        def load() -> None:  # long requests: one runs at nearly every scrape (batch 1)
            while not stop.is_set():
                _complete(url, "spec", 512)

        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        try:
            code, out, err = _advise(
                url + "?model=spec", "--seconds", "6", "--interval", "0.5", "--baseline-itl", "50"
            )
        finally:
            stop.set()
            worker.join(timeout=60)
    assert code == 0, (out, err)
    assert "--spec-draft-n-max 4" in out and "syntax: read from the server's command line" in out
