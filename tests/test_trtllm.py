"""TensorRT-LLM (``trtllm-serve``): detection, figures equal to the twin's truth, version
shapes, and no specwatch command ever draining its JSON ``/metrics``."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.detect import detect
from specwatch.sources.dialects.base import WindowBuilder
from specwatch.sources.dialects.trtllm import DIALECT, derive_trtllm, trtllm_spec
from specwatch.sources.metrics.parse import parse_metrics
from specwatch.sources.watcher import MetricsWatcher
from tests.conftest import Sim, running_sim
from tests.session_world import Collector, drive_until, manual_sim

REPO = Path(__file__).resolve().parents[1]


def _finish(sim: Sim, n: int, max_tokens: int = 200) -> list[Any]:
    reqs = [sim.world.submit(64, max_tokens, True, endpoint="/v1/completions") for _ in range(n)]
    for _ in range(600):
        if all(r.done for r in reqs):
            break
        sim.advance(0.5)
    assert all(r.done for r in reqs)
    return reqs


async def _windows(sim: Sim, n: int) -> tuple[ServerInfo, Any]:
    client = sim.client()
    info = await detect(client)
    watcher = MetricsWatcher(client, info, clock=sim.clock.now)
    await watcher.scrape()
    await asyncio.to_thread(_finish, sim, n)
    sim.advance(0.5)
    return info, await watcher.scrape()


async def test_detection_and_figures_equal_the_twins_truth() -> None:
    with running_sim("trtllm") as sim:
        info, window = await _windows(sim, 4)
        hits = dict(sim.world.truth.endpoint_hits)
        done = sim.world.truth.requests()
    assert info.dialect is Dialect.TRTLLM and info.version == "1.3.0"
    assert info.metrics_enabled is True
    spec = info.spec
    assert (spec.enabled, spec.algorithm, spec.num_draft_tokens) == (True, "Eagle3", 3)
    assert spec.draft_model == "sim/draft" and "speculative_config_info" in spec.source
    assert len(done) == 4
    steps = sum(r.steps for r in done)
    accepted = sum(r.accepted_drafts for r in done)
    assert window.accept_length == pytest.approx(1 + accepted / steps, rel=1e-12)
    proposed = sum(r.proposed_drafts for r in done)
    assert window.draft_acceptance_rate == pytest.approx(accepted / proposed, rel=1e-12)
    per_pos = [sum(r.accepted_per_position[i] for r in done) / steps for i in range(3)]
    assert window.per_position_acceptance == pytest.approx(per_pos, rel=1e-12)
    decode_s = sum(r.t_end - r.t_start - r.ttft_s for r in done)
    assert window.step_latency_s == pytest.approx(decode_s / steps, rel=1e-9)
    assert window.step_latency_s == pytest.approx(
        sum(sum(r.step_latencies_s) for r in done) / steps, rel=1e-6
    )
    assert window.tokens == sum(r.completion_tokens for r in done)
    assert window.finished_by_reason == {"length": 4}
    assert "GET /metrics" not in hits and hits["GET /prometheus/metrics"] == 3


async def test_without_return_perf_metrics_it_says_which_option_and_never_drains() -> None:
    with running_sim("trtllm", metrics_enabled=False) as sim:
        client = sim.client()
        info = await detect(client)
        window = await MetricsWatcher(client, info, clock=sim.clock.now).scrape()
        hits = dict(sim.world.truth.endpoint_hits)
    assert info.metrics_enabled is False and "return_perf_metrics: true" in (
        info.metrics_reason or ""
    )
    assert "return_perf_metrics" in window.notes["metrics"]
    assert "GET /metrics" not in hits and hits["GET /prometheus/metrics"] == 1


async def test_the_generic_path_reads_a_json_metrics_once_and_stops() -> None:
    """A TensorRT-LLM behind a proxy renaming ``owned_by``, without ``/prometheus/metrics``."""
    with running_sim("trtllm", metrics_enabled=False) as sim:
        sim.world.truth.endpoint_hits.clear()
        client = sim.client()
        from specwatch.sources.dialects.openai import DIALECT as OPENAI

        info = await OPENAI.detect(client, None, None)
        watcher = MetricsWatcher(client, info, clock=sim.clock.now)
        notes = [(await watcher.scrape()).notes for _ in range(3)]
        hits = dict(sim.world.truth.endpoint_hits)
        # A watcher handed a detection that did not notice stops at the first JSON answer.
        vllm_like = ServerInfo(base_url=sim.url, dialect=Dialect.VLLM)
        blind = MetricsWatcher(client, vllm_like, clock=sim.clock.now)
        blind_notes = [(await blind.scrape()).notes for _ in range(3)]
        after = dict(sim.world.truth.endpoint_hits)
    assert info.metrics_enabled is False and "JSON, not Prometheus" in (info.metrics_reason or "")
    assert all("JSON" in n["metrics"] for n in notes)
    assert hits["GET /metrics"] == 1
    assert after["GET /metrics"] == 2
    assert all("JSON" in n["metrics"] for n in blind_notes)


# --- version shapes ----------------------------------------------------------------------------


def _pair(version: str, **overrides: Any) -> tuple[ServerInfo, MetricsWindow, Any]:
    with running_sim("trtllm", version, **overrides) as sim:

        async def go() -> tuple[ServerInfo, Any]:
            return await _windows(sim, 3)

        info, window = asyncio.run(go())
        truth = sim.world.truth.requests()
    return info, window, truth


def test_a_1_2_server_has_gauges_for_the_spec_series_and_says_no_window_figure() -> None:
    info, window, _ = _pair("1.2.0")
    assert info.dialect is Dialect.TRTLLM
    assert info.spec.enabled is None  # no config info on this version, no iteration yet
    assert window.accept_length is None
    assert "gauges of one iteration" in window.notes["accept_length"]
    assert "#12636" in window.notes["per_position"]
    assert window.tokens is not None and window.requests_running is not None


def test_a_1_1_server_unprefixed_and_without_spec_series() -> None:
    info, window, truth = _pair("1.1.0")
    assert info.spec.enabled is None
    assert window.accept_length is None
    assert "no speculative series" in window.notes["accept_length"]
    assert window.tokens == sum(r.completion_tokens for r in truth)
    assert "generation_tokens_total" in window.sources["tokens"]
    assert "trtllm_" not in window.sources["tokens"]


COUNTER_PAGE = """\
# TYPE trtllm_num_requests_running gauge
trtllm_num_requests_running{engine_type="pytorch",model_name="m",pid="10"} 2.0
trtllm_num_requests_running{engine_type="pytorch",model_name="m",pid="11"} 3.0
# TYPE trtllm_spec_decode_num_draft_tokens counter
trtllm_spec_decode_num_draft_tokens_total{engine_type="pytorch",model_name="m"} {dt}
# TYPE trtllm_spec_decode_num_accepted_tokens counter
trtllm_spec_decode_num_accepted_tokens_total{engine_type="pytorch",model_name="m"} {acc}
# TYPE trtllm_generation_tokens counter
trtllm_generation_tokens_total{engine_type="pytorch",model_name="m"} {gen}
"""


def _page(dt: int, acc: int, gen: int) -> str:
    return (
        COUNTER_PAGE.replace("{dt}", str(dt)).replace("{acc}", str(acc)).replace("{gen}", str(gen))
    )


def test_pid_labels_sum_and_iteration_counters_give_the_rate_without_per_position() -> None:
    prev, cur = parse_metrics(_page(100, 40, 500)), parse_metrics(_page(400, 190, 900))
    info = ServerInfo(base_url="http://x", dialect=Dialect.TRTLLM, spec=trtllm_spec(cur))
    b = WindowBuilder()
    derive_trtllm(b, cur, prev, 2.0, info)
    assert b.values["requests_running"] == 5.0
    assert b.values["draft_acceptance_rate"] == pytest.approx(150 / 300)
    assert "accept_length" not in b.values and "#12636" in b.notes["accept_length"]


def test_a_page_without_iteration_series_names_the_option() -> None:
    page = "# TYPE trtllm_generation_tokens counter\ntrtllm_generation_tokens_total 5.0\n"
    b = WindowBuilder()
    scrape = parse_metrics(page)
    derive_trtllm(b, scrape, None, 0.0, ServerInfo(base_url="x", dialect=Dialect.TRTLLM))
    assert "enable_iter_perf_stats: true" in b.notes["iteration"]


def test_bench_counters_give_the_accept_length() -> None:
    deltas = {'trtllm_spec_decode_drafted_tokens_total{token_position="0"}': 100.0}
    deltas["trtllm_spec_decode_accepted_tokens_total"] = 150.0
    assert DIALECT.accept_length_from_counters(deltas) == 2.5


# --- no command drains /metrics ----------------------------------------------------------------


@contextmanager
def _real_time() -> Iterator[tuple[SimWorld, str]]:
    world = SimWorld(
        preset("trtllm", warmup_requests=0, base_step_ms=2.0, prefill_ms=5.0,
               background_concurrency=2, gpu_count=1)
    )  # fmt: skip
    with SimServer(world) as server:
        yield world, server.url


def test_no_command_ever_gets_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specwatch.commands.bench import run_bench
    from specwatch.commands.main import main
    from tests.test_bench_sim import bench_args

    with _real_time() as (world, url):
        assert main(["probe", "--url", url, "--json", "--max-tokens", "8", "--no-gpu"]) == 0
        argv = ["--url", url, "-n", "1", "--warmup", "0", "--max-tokens", "8", "--no-gpu"]
        out, err = io.StringIO(), io.StringIO()
        status = run_bench(
            bench_args([*argv, "--out", str(tmp_path)]), argv=["specwatch", "bench", *argv],
            stdout=out, stderr=err,
        )  # fmt: skip
        assert status == 0, err.getvalue()
        done = subprocess.run(
            [sys.executable, "-m", "specwatch", "record", "--url", url, "--no-gpu",
             "--duration", "2s", "-o", str(tmp_path / "rec.sqlite")],
            env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        hits = dict(world.truth.endpoint_hits)
    capsys.readouterr()
    assert hits["GET /prometheus/metrics"] >= 3
    assert "GET /metrics" not in hits and "GET /perf_metrics" not in hits
    assert "GET /health_generate" not in hits


async def test_the_monitor_session_and_exporter_never_get_metrics() -> None:
    from specwatch.exporter.serve import Exporter
    from specwatch.session.events import ServerReady

    with manual_sim("trtllm") as sim:
        session = sim.session()
        seen = Collector()
        session.subscribe(seen)
        Exporter.of(session, plain_s=0.009)
        session.start()
        try:
            await drive_until(sim, lambda: bool(seen.of(ServerReady)), 20)
            for _ in range(20):
                sim.advance(0.5)
                await asyncio.sleep(0.05)
        finally:
            await session.aclose()
        hits = dict(sim.world.truth.endpoint_hits)
    assert hits.get("GET /prometheus/metrics", 0) >= 2
    assert "GET /metrics" not in hits


def test_speculation_off_is_read_from_the_config_info() -> None:
    info, window, truth = _pair("1.3.0", spec_algorithm=None)
    assert info.spec.enabled is False and "model_config_info" in info.spec.source
    assert window.step_latency_s is not None and window.tokens == sum(
        r.completion_tokens for r in truth
    )


def test_the_advisor_writes_tensorrt_llms_speculative_config() -> None:
    from specwatch.core.draft_syntax import engine_setting, engine_syntax
    from specwatch.core.server import SpecConfig

    info = ServerInfo(
        base_url="x",
        dialect=Dialect.TRTLLM,
        spec=SpecConfig(enabled=True, algorithm="Eagle3", num_draft_tokens=3),
    )
    s = engine_syntax(info, ["trtllm-serve", "m", "--config", "c.yaml"])
    text = engine_setting(Dialect.TRTLLM, 3, [(1, 2)], 1, s)
    assert text == "speculative_config: {decoding_type: Eagle3, max_draft_len: 2} (--config file)"
    unread = engine_setting(Dialect.TRTLLM, 3, [(1, 3)], 1)
    assert unread.startswith("keep speculative_config: {max_draft_len: 3}")
    assert "add your decoding_type" in unread


async def test_the_direct_fleet_reads_trtllm_names() -> None:
    from specwatch.sources.direct_fleet import DirectFleetSource
    from specwatch.sources.http.endpoint import parse_endpoint

    with running_sim("trtllm") as sim:
        fleet = DirectFleetSource([parse_endpoint(sim.url, env={})], clock=sim.clock.now)
        # the per-position counters appear with the first finished request
        await asyncio.to_thread(_finish, sim, 1)
        await fleet.refresh()
        before = len(sim.world.truth.requests())
        await asyncio.to_thread(_finish, sim, 3)
        sim.advance(0.5)
        reading = await fleet.refresh()
        done = sim.world.truth.requests()[before:]
        hits = dict(sim.world.truth.endpoint_hits)
    [server] = reading.servers
    assert server.dialect is Dialect.TRTLLM
    steps = sum(r.steps for r in done)
    accepted = sum(r.accepted_drafts for r in done)
    assert server.window.accept_length == pytest.approx(1 + accepted / steps, rel=1e-12)
    assert server.rates.verify_steps_per_s is not None and server.rates.verify_steps_per_s > 0
    assert "GET /metrics" not in hits


def test_the_prometheus_fleet_knows_trtllm_names() -> None:
    from specwatch.sources.prometheus.api import VectorSample
    from specwatch.sources.prometheus.queries import (
        FIELD_LABEL,
        derive_servers,
        server_gauges_query,
        server_rates_query,
    )

    assert "trtllm_num_requests_running" in server_gauges_query()
    assert 'trtllm_spec_decode_drafted_tokens_total{token_position="0"}' in server_rates_query(10)
    at = {"instance": "h:8000", "job": "trt"}
    gauges = [
        VectorSample({**at, "__name__": "trtllm_num_requests_running", "pid": str(p)}, 0.0, 2.0)
        for p in (1, 2)
    ]
    rates = [
        VectorSample({**at, FIELD_LABEL: f"trtllm:{k}"}, 0.0, v)
        for k, v in {"gen": 50.0, "acc": 30.0, "drafts": 20.0, "dtok": 60.0}.items()
    ]
    [server] = derive_servers(gauges, rates, 0.0, 10.0)
    assert server.dialect is Dialect.TRTLLM
    assert server.window.requests_running == 4.0
    assert server.window.accept_length == 2.5 and server.window.draft_acceptance_rate == 0.5


def test_only_a_body_that_parses_as_json_is_taken_for_trtllm_iteration_stats() -> None:
    from specwatch.sources.identity.server_queries import not_prometheus

    assert not_prometheus("/metrics", '[{"iter": 1, "numActiveRequests": 2}]') is not None
    assert not_prometheus("/metrics", '  {"iterations": []}') is not None
    # random bytes that happen to start with a bracket are garbage, not a JSON endpoint to skip
    assert not_prometheus("/metrics", "{\x8f\x01\xffnot json") is None
    assert not_prometheus("/metrics", "# TYPE vllm:x gauge\nvllm:x 1\n") is None
