"""The fleet joined by host as a user sets it up (issue 21 item 14): three simulated nodes on
127.0.0.2/.3/.4, each exporter on its server's host and all saying ``Hostname="sim-node"``,
probed directly (``probe --url A --url B --url C --dcgm A:P ...``); a llama.cpp server among
them, and model names longer than 24 characters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from specwatch.commands.main import main
from specwatch.core.fleet import target_of
from specwatch.sim.dcgm_exporter import SimDcgmExporter
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld

MODEL = "acme-research/Llama-3.1-70B-Instruct-speculative"


@contextmanager
def three_nodes() -> Iterator[list[tuple[str, str]]]:
    """``(server URL, exporter host:port)`` of each node; the exporter on the server's host."""
    with ExitStack() as stack:
        nodes = []
        for i, dialect in zip((2, 3, 4), ("vllm", "sglang", "llamacpp"), strict=True):
            host = f"127.0.0.{i}"
            config = preset(
                dialect, background_concurrency=2, seed=i, gpu_count=2, model=f"{MODEL}-{i}"
            )
            world = SimWorld(config)
            server = SimServer(world, host=host)
            url = server.start()
            stack.callback(server.stop)
            exporter = SimDcgmExporter(world.gpus, world.now, host=host)  # Hostname="sim-node"
            exporter.start()
            stack.callback(exporter.stop)
            nodes.append((url, target_of(exporter.url)))
        yield nodes


def test_every_server_joins_the_gpus_of_the_exporter_on_its_host(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with three_nodes() as nodes:
        argv = ["probe"]
        for url, _exporter in nodes:
            argv += ["--url", url]
        for _url, exporter in nodes:
            argv += ["--dcgm", exporter]
        assert main([*argv, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        by_instance = {s["instance"]: s for s in doc["servers"]}
        for i, (url, _exporter) in zip((2, 3, 4), nodes, strict=True):
            server = by_instance[target_of(url)]
            assert len(server["gpus"]) == 2 and server["joined_by"] == "host", server
            assert server["model"] == f"{MODEL}-{i}"  # llama.cpp's too
        assert main(argv) == 0
        text = capsys.readouterr().out
    for i in (2, 3, 4):
        assert f"{MODEL}-{i}" in text, text  # whole, not cut at 24 characters
    assert "0 GPUs" not in text
