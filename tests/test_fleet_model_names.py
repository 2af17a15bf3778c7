"""llama.cpp's model in a fleet read through Prometheus (issue 21 item 14): its metrics carry
no model label, so the fleet asks the server's own ``/v1/models`` (passive) where the target
answers, and says "not in metrics" where it does not, instead of a bare dash."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specwatch.commands.main import main
from specwatch.core.fleet import FleetRow, FleetServer
from specwatch.core.server import Dialect, MetricsWindow
from specwatch.session.fleet_probe import fleet_text
from specwatch.sources.prometheus.model_names import (
    FROM_SERVER,
    NOT_IN_METRICS,
    PENDING_MAX,
    ModelNames,
    model_of,
    target_address,
)
from specwatch.ui.fleet_pane import row_cells
from tests.fleet_world import sim_nodes
from tests.prometheus_fixture import PROMETHEUS, SKIP_REASON, running_prometheus

MODEL = "acme/Qwen2.5-7B-Instruct-Q4_K_M"


@pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON)
def test_the_prometheus_fleet_names_llama_cpp_from_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prometheus relabels each instance to ``node:port``: the server is asked where
    Prometheus scrapes it."""
    with sim_nodes(["vllm", "llamacpp"]) as nodes:
        llama = nodes[1]
        with running_prometheus([n.target for n in nodes], tmp_path) as prom:
            prom.wait(
                lambda: (
                    prom.samples("llamacpp:requests_processing") == 1
                    and prom.samples("vllm:num_requests_running") >= 1
                ),
                "both servers scraped",
                40,
            )
            assert main(["probe", "--prometheus", prom.url, "--json"]) == 0
            doc = json.loads(capsys.readouterr().out)
            by_dialect = {s["dialect"]: s for s in doc["servers"]}
            served = llama.world.config.model
            assert by_dialect["llamacpp"]["model"] == served, by_dialect["llamacpp"]
            assert by_dialect["llamacpp"]["model_note"] == FROM_SERVER
            assert by_dialect["vllm"]["model"] and by_dialect["vllm"]["model_note"] is None
    # Where the server does not answer, the line says why there is no model.
    unnamed = {**by_dialect["llamacpp"], "model": None, "model_note": NOT_IN_METRICS}
    text = fleet_text({**doc, "servers": [unnamed]})
    assert text.splitlines()[1].endswith(f"GPUs  {NOT_IN_METRICS}"), text


def _server(instance: str, model: str | None = None) -> FleetServer:
    return FleetServer(instance, "llama", Dialect.LLAMACPP, model, MetricsWindow(t=0.0, dt=1.0))


def test_each_server_is_asked_once_and_again_only_after_a_while() -> None:
    asked: list[str] = []
    now = [0.0]

    async def lookup(instance: str) -> str | None:
        asked.append(instance)
        if instance.startswith("down"):
            raise OSError("connection refused")
        return MODEL

    async def run() -> list[list[FleetServer]]:
        names = ModelNames(lookup, clock=lambda: now[0])
        fleet = [_server("up:8080"), _server("down:8080"), _server("named:1", "label-model")]
        where = {"up:8080": "http://10.0.0.1:8080"}  # relabelled: asked where it is scraped
        out = [await names.fill(fleet, where), await names.fill(fleet, where)]
        now[0] = 301.0
        out.append(await names.fill(fleet, where))
        await names.aclose()
        return out

    first, second, later = asyncio.run(run())
    assert asked == ["http://10.0.0.1:8080", "down:8080", "down:8080"]
    for servers in (first, second, later):
        up, down, named = servers
        assert (up.model, up.model_note) == (MODEL, FROM_SERVER)
        assert (down.model, down.model_note) == (None, NOT_IN_METRICS)
        assert (named.model, named.model_note) == ("label-model", None)
    cells = row_cells(FleetRow(first[1], (), None, None, None, False))
    assert (cells["model"].text, cells["model"].tone) == (NOT_IN_METRICS, "dim")
    assert row_cells(FleetRow(first[0], (), None, None, None, False))["model"].text == MODEL


def test_a_large_fleet_is_asked_a_bounded_number_at_a_time() -> None:
    asked: list[str] = []
    release = asyncio.Event()

    async def lookup(address: str) -> str | None:
        asked.append(address)
        await release.wait()
        return None

    async def run() -> tuple[int, int]:
        names = ModelNames(lookup)
        fleet = [_server(f"10.0.{i // 250}.{i % 250}:8080") for i in range(500)]
        filled = await names.fill(fleet)
        assert all(s.model_note == NOT_IN_METRICS for s in filled)
        started = names.pending
        await names.fill(fleet)  # the same servers still pending: none asked twice
        again = names.pending
        await names.aclose()
        return started, again

    started, again = asyncio.run(run())
    assert started == again == PENDING_MAX and len(set(asked)) == len(asked)


def test_model_of_reads_only_a_model_card() -> None:
    assert model_of({"data": [{"id": "m"}]}) == "m"
    assert model_of({"data": []}) is None
    assert model_of({"data": [{"id": "/models/q4_k_m.gguf"}]}) == "q4_k_m.gguf"
    assert "\x1b" not in (model_of({"data": [{"id": "\x1b[31mred\x1b[0m"}]}) or "\x1b")
    assert model_of(["m"]) is None
    assert model_of({"data": [{"id": 7}]}) is None


def test_target_address_keeps_scheme_host_and_port_only() -> None:
    assert target_address("http://10.0.0.1:8080/metrics") == "http://10.0.0.1:8080"
    assert target_address("https://user:pw@node-7:443/x/metrics") == "https://node-7:443"
    assert target_address("http://[::1]:9000/metrics") == "http://[::1]:9000"
    assert target_address("ftp://x/metrics") is None and target_address("http://:bad") is None
