"""Against a real llama.cpp ``llama-server`` with a draft model (CPU, tiny GGUF models).

Needs the binary built by ``../shared/tools/llama-server/build-llama-server.sh`` (cached in
``~/.cache/specwatch-realserver``; ``REALSERVER_HOME`` or ``LLAMA_SERVER_BIN`` point elsewhere).
``shared/`` is found as ``../shared`` next to the repository or through ``SPECWATCH_SHARED``.
Skipped, with the reason, when either is missing. Run just these with ``pytest -m realserver``.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from specwatch.cli import main
from specwatch.core.server import Dialect
from specwatch.sources.client import ServerClient
from specwatch.sources.detect import detect
from specwatch.sources.endpoint import parse_endpoint
from specwatch.sources.metrics import MetricsWatcher
from specwatch.sources.stream import stream_completion

pytestmark = pytest.mark.realserver

REPO = Path(__file__).resolve().parent.parent
PROMPT = "the quick brown fox"


def _shared() -> Path:
    env = os.environ.get("SPECWATCH_SHARED")
    return Path(env) if env else REPO.parent / "shared"


def _binary() -> Path:
    if os.environ.get("LLAMA_SERVER_BIN"):
        return Path(os.environ["LLAMA_SERVER_BIN"])
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    home = Path(os.environ.get("REALSERVER_HOME", cache / "specwatch-realserver"))
    return home / "bin" / "llama-server"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    script = _shared() / "tools" / "llama-server" / "start-llama-server.sh"
    if not script.is_file():
        pytest.skip(f"no {script} (set SPECWATCH_SHARED to the shared/ folder)")
    binary = _binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"no llama-server binary at {binary}: build it with "
            f"{script.parent / 'build-llama-server.sh'}"
        )
    port = _free_port()
    started = subprocess.run(
        ["bash", str(script), str(port), "draft"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "LLAMA_SERVER_BIN": str(binary)},
    )
    if started.returncode != 0:
        pytest.fail(f"llama-server did not start: {started.stderr.strip()[-600:]}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(script), "stop", str(port)], capture_output=True, timeout=30)


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
    assert r.step_latency_mean_s == pytest.approx(r.server_stats["step_latency_s"], rel=0.15)
    # the metrics window around this one request holds exactly its counters
    assert window.tokens == timings["predicted_n"]
    assert window.draft_acceptance_rate == pytest.approx(r.draft_acceptance_rate)
    assert window.per_position_acceptance is not None
    # /slots now names the speculative type that ran
    assert after.spec.algorithm is not None and "draft" in after.spec.algorithm


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
