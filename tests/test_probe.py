"""``specwatch probe`` against the simulator: the report, the JSON, the exit status."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest

from specwatch.commands.main import main
from specwatch.commands.probe import render_text
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.probe import (
    EXIT_STREAM_FAILED,
    EXIT_UNREACHABLE,
    ProbeResult,
    probe,
    probe_to_dict,
)
from tests.sim_fixtures import faults_of
from tests.unavailable_nvml import unavailable_nvml


@contextmanager
def real_time_sim(dialect: str, **overrides: Any) -> Iterator[tuple[SimWorld, str]]:
    """A simulator on the real clock (the probe measures wall time), fast and warm."""
    world = SimWorld(
        preset(dialect, warmup_requests=0, base_step_ms=2.0, prefill_ms=5.0, **overrides)
    )
    with SimServer(world) as server:
        yield world, server.url


def _dead_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("dialect", ["sglang", "vllm", "llamacpp"])
async def test_probe_json_fields(dialect: str) -> None:
    with real_time_sim(dialect) as (world, url):
        result = await probe(
            parse_endpoint(url, env={}), max_tokens=48, nvml=FakeNvml(SimGpus(count=2))
        )
        truth = world.truth.requests()[-1]
    doc = probe_to_dict(result)
    assert result.exit_code == 0 and doc["ok"] is True and doc["error"] is None
    server = doc["server"]
    assert server["dialect"] == dialect
    assert server["version"] == world.config.version
    assert server["model"] == world.config.model
    assert server["speculative"]["enabled"] is True
    stream = doc["stream"]
    assert stream["completion_tokens"] == truth.completion_tokens == 48
    assert stream["ttft_s"] > 0 and stream["decode_tok_s"] > 0
    assert stream["draft_acceptance_rate"] is None or 0 <= stream["draft_acceptance_rate"] <= 1
    if dialect in ("sglang", "llamacpp"):
        assert stream["draft_acceptance_rate"] == pytest.approx(
            truth.accepted_drafts / truth.proposed_drafts
        )
    else:
        # vLLM reports no per-request rate by default; with the number of draft tokens known
        # (from /metrics position labels) it is (accept length - 1) / k from the stream's steps
        k = server["speculative"]["num_draft_tokens"]
        assert k is not None
        raw = (stream["accept_length"] - 1) / k
        if raw <= 1:
            assert stream["draft_acceptance_rate"] == pytest.approx(raw)
            assert f"{k} draft tokens" in stream["notes"]["draft_acceptance_rate"]
        else:  # a loaded machine: the client fell behind and saw steps merged
            assert stream["draft_acceptance_rate"] is None
            assert "merged" in stream["notes"]["draft_acceptance_rate"]
    assert stream["accept_length"] is not None
    assert [g["index"] for g in doc["gpus"]] == [0, 1] and doc["gpus_reason"] is None
    assert doc["gpus"][0]["sm_clock_mhz"] > 0
    metrics = doc["metrics"]
    assert metrics["dt"] > 0 and metrics["tokens"] == 48
    # This host's CPU over the stream (the simulated server is no process of its own).
    host = doc["host"]
    assert host["cores"] == os.cpu_count() and host["duration_s"] > 0
    assert 0 <= host["busy_ratio"] <= 1 and host["server_local"] is False
    assert {"dram_active", "tensor_active"} <= set(doc["gpus"][0])
    # the JSON round-trips through orjson (no dataclasses, enums or NaN left)
    assert orjson.loads(orjson.dumps(doc)) == doc
    text = render_text(result)
    assert f"{dialect} {world.config.version}" in text and "48 tokens" in text


def test_the_window_line_names_tokens_per_step_only_where_steps_drafted_nothing() -> None:
    info = ServerInfo("http://h:1", Dialect.LLAMACPP)
    drafted = MetricsWindow(t=2.0, dt=1.0, accept_length=2.6, tokens_per_step=2.43)
    every = MetricsWindow(t=2.0, dt=1.0, accept_length=2.6, tokens_per_step=2.6)
    lines = [
        next(
            line
            for line in render_text(
                ProbeResult(info.base_url, info, None, w, None, None)
            ).splitlines()
            if line.startswith("  window")
        )
        for w in (drafted, every)
    ]
    assert "accept length 2.60 (2.43 a step, drafted or not)" in lines[0], lines
    assert "accept length 2.60 · acceptance" in lines[1], lines


async def test_probe_without_nvml_says_why() -> None:
    with real_time_sim("vllm") as (_world, url):
        result = await probe(parse_endpoint(url, env={}), max_tokens=8, nvml=unavailable_nvml())
    doc = probe_to_dict(result)
    assert doc["gpus"] == []
    assert "NVML" in doc["gpus_reason"]
    assert "gpus     none: NVML" in render_text(result)


async def test_probe_unreachable_exit_status_and_json() -> None:
    result = await probe(parse_endpoint(_dead_url(), env={}), nvml=unavailable_nvml())
    assert result.exit_code == EXIT_UNREACHABLE
    doc = probe_to_dict(result)
    assert doc["ok"] is False and "connection refused" in doc["error"]
    assert doc["server"]["dialect"] is None and doc["stream"]["completion_tokens"] is None
    assert doc["stream"]["reasons"]["ttft_s"] == doc["error"]


async def test_probe_stream_failure_exit_status() -> None:
    with real_time_sim("sglang") as (world, url):
        faults_of(world).fail_next(status=500, path="/generate")
        result = await probe(parse_endpoint(url, env={}), max_tokens=8, read_gpus=False)
    assert result.exit_code == EXIT_STREAM_FAILED
    assert "HTTP 500" in probe_to_dict(result)["error"]


def test_cli_probe_json(capsys: pytest.CaptureFixture[str]) -> None:
    with real_time_sim("llamacpp") as (_world, url):
        code = main(["probe", "--url", url, "--json", "--max-tokens", "24", "--timeout", "10"])
    out = capsys.readouterr().out
    doc = orjson.loads(out)
    assert code == 0
    assert doc["server"]["dialect"] == "llamacpp"
    assert doc["stream"]["completion_tokens"] == 24
    assert isinstance(doc["gpus"], list)
    assert doc["gpus"] or doc["gpus_reason"]
    # One short window: the live verdict says it has too little to judge, and why.
    verdict = doc["verdict"]
    assert verdict["outcome"] is None and verdict["wording"] is None
    assert verdict["phase"] in ("warmup", "reference")
    assert verdict["reason"].startswith("not enough data yet: ")
    assert "a probe reads one" in verdict["reason"] and "30 s" in verdict["needs"]


def test_cli_probe_json_unreachable_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--url", _dead_url(), "--json", "--timeout", "2"])
    verdict = orjson.loads(capsys.readouterr().out)["verdict"]
    assert code == EXIT_UNREACHABLE
    assert verdict["phase"] == "waiting" and verdict["outcome"] is None
    assert verdict["reason"] == "not enough data yet: the server could not be probed (unreachable)"


def test_verdict_json_of_a_judged_state_names_the_outcome() -> None:
    from specwatch.session.live_verdict import LiveVerdict
    from specwatch.session.verdict_report import verdict_json
    from tests.test_live_verdict import MAX, _feed, _steady

    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 30, 700.0, round(MAX * 0.9))
    doc = verdict_json(v.state())
    assert doc["phase"] == "judged" and doc["outcome"] == "GPU"
    assert doc["wording"] == "explained by GPU state" and doc["needs"] is None
    assert doc["reference"]["kind"] == "steady" and doc["current"]["clock_deficit"] < -0.05
    assert orjson.loads(orjson.dumps(doc)) == doc


def test_cli_probe_unreachable_is_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--url", _dead_url(), "--timeout", "2"])
    captured = capsys.readouterr()
    assert code == EXIT_UNREACHABLE
    assert "connection refused" in captured.err
    assert "unreachable" in captured.out


def test_cli_probe_bad_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--url", "ftp://x:1"]) == 2
    assert "unsupported scheme" in capsys.readouterr().err


def test_cli_probe_never_prints_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    with real_time_sim("vllm", api_key="sk-probe-secret") as (_world, url):
        code = main(
            ["probe", "--url", url, "--api-key", "sk-probe-secret", "--json", "--max-tokens", "8"]
        )
        bad = main(["probe", "--url", url, "--api-key", "sk-wrong-secret", "--max-tokens", "8"])
    captured = capsys.readouterr()
    # vLLM's /metrics are open: the server is read, its stream refused
    assert code == 0 and bad == EXIT_STREAM_FAILED
    assert "  key      metrics only: API key missing or wrong" in captured.out
    assert "  stream   failed: API key missing or wrong" in captured.out
    assert "/v1/completions: HTTP 401" in captured.out
    for secret in ("sk-probe-secret", "sk-wrong-secret"):
        assert secret not in captured.out and secret not in captured.err


def test_cli_probe_passive_sends_no_model_work(capsys: pytest.CaptureFixture[str]) -> None:
    """``probe --passive`` reads the server's own figures over its window and sends nothing that
    makes the server generate: the simulator's endpoint log has no completion in it."""
    with real_time_sim("vllm", background_concurrency=2) as (world, url):
        # The default window (1 s): the simulated users arrive within the first second.
        code = main(["probe", "--url", url, "--json", "--passive", "--no-gpu"])
        hits = dict(world.truth.endpoint_hits)
    doc = orjson.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] is True and doc["passive"] is True
    assert not [path for path in hits if "completions" in path or "generate" in path], hits
    assert doc["stream"]["completion_tokens"] is None
    assert doc["stream"]["reasons"]["completion_tokens"] == "passive probe: no request sent"
    window = doc["metrics"]
    assert 0.9 < window["dt"] < 5.0
    assert window["gen_tok_s"] > 0  # the background users' tokens, counted by the server


def test_probe_passive_text_says_none_was_sent(capsys: pytest.CaptureFixture[str]) -> None:
    with real_time_sim("sglang") as (_world, url):
        code = main(["probe", "--url", url, "--passive", "0.2", "--no-gpu"])
    out = capsys.readouterr().out
    assert code == 0
    assert "stream   none sent (--passive)" in out
    assert "window" in out
