"""``probe`` names the code the server runs: ``server.process`` in JSON, a ``code`` line in text."""

from __future__ import annotations

import os
import time

import orjson

from specwatch.commands.probe import render_text
from specwatch.core.identity import ServerIdentity
from specwatch.core.server import ServerInfo
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.probe import probe, probe_to_dict
from tests.test_probe import real_time_sim


async def test_probe_records_the_local_server_process() -> None:
    # The simulator runs in this process: the process listening on its port is this one.
    with real_time_sim("llamacpp") as (world, url):
        result = await probe(parse_endpoint(url, env={}), max_tokens=8, read_gpus=False)
    doc = probe_to_dict(result)
    process = doc["server"]["process"]
    assert process is not None and doc["server"]["process_note"] is None
    assert process["pid"] == os.getpid() and os.getpid() in process["pids"]
    # llama-server's own build id (from /props), as a real one on this machine would give
    assert process["build"] == world.config.version
    assert orjson.loads(orjson.dumps(doc)) == doc
    code = [line for line in render_text(result).splitlines() if line.startswith("  code ")]
    assert len(code) == 1 and f"(process {os.getpid()})" in code[0]


async def test_probe_says_why_the_process_is_unknown() -> None:
    def remote(base_url: str, info: ServerInfo) -> ServerIdentity:
        return ServerIdentity(notes=("remote server: \x1b]0;x\x07 not read",))

    with real_time_sim("vllm") as (_world, url):
        result = await probe(
            parse_endpoint(url, env={}), max_tokens=4, read_gpus=False, identify=remote
        )
        skipped = await probe(
            parse_endpoint(url, env={}), max_tokens=4, read_gpus=False, identify=None
        )
    server = probe_to_dict(result)["server"]
    assert server["process"] is None and "remote server" in server["process_note"]
    text = render_text(result)
    assert "  code     not read (remote server: \\x1b]0;x\\x07 not read)" in text
    assert "\x1b" not in text
    assert probe_to_dict(skipped)["server"]["process"] is None
    assert probe_to_dict(skipped)["server"]["process_note"] == "not read"
    assert "  code     not read" in render_text(skipped)


def _hog_gil(seconds: float) -> None:
    # sum() over a range is one C call: it keeps the GIL until it ends, like the C-heavy parts
    # of reading a process's identity do on a small machine
    n = 1_000_000
    start = time.perf_counter()
    sum(range(n))
    once = max(time.perf_counter() - start, 1e-4)
    sum(range(int(n * seconds / once)))


async def test_identity_is_read_after_the_stream_so_ttft_is_the_servers() -> None:
    # issue 22 item 4: identity work started just before the stream landed inside its TTFT
    finished_when_called: list[int] = []

    with real_time_sim("sglang") as (world, url):

        def slow(base_url: str, info: ServerInfo) -> ServerIdentity:
            finished_when_called.append(len(world.truth.requests()))
            _hog_gil(0.15)
            return ServerIdentity(notes=("remote server",))

        result = await probe(
            parse_endpoint(url, env={}), max_tokens=8, read_gpus=False, identify=slow
        )
    stream = result.stream
    assert stream is not None and stream.ttft_s is not None
    # the stream's request had finished before the identity work began: none of it (150 ms
    # holding the GIL here) is inside the measured TTFT
    assert finished_when_called == [1]
    assert probe_to_dict(result)["server"]["process_note"] == "remote server"
