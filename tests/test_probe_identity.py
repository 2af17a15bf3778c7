"""``probe`` names the code the server runs: ``server.process`` in JSON, a ``code`` line in text."""

from __future__ import annotations

import os

import orjson

from specwatch.commands.probe_text import render_text
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
