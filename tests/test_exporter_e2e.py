"""End to end on real parts: the simulator's story served to the exporter, a real Prometheus
scraping it with ``specwatch alert-rules`` loaded, and a real Alertmanager delivering the alert
to a webhook in the test; every dashboard expression returns data from that Prometheus.

The story runs on a manual clock (as in tests/test_live_verdict.py), so the ~100 simulated
seconds take a few real ones; the rules' ``for`` is 1 s and Prometheus scrapes and evaluates
every 0.2 s.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from specwatch.commands.exporter import expressions, rules_text
from specwatch.core.outcomes import Outcome
from specwatch.exporter.serve import Exporter
from specwatch.session.events import ServerReady, VerdictChanged
from specwatch.session.verdict_state import WAITING, LiveVerdictState
from specwatch.sim.demo import demo_world
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.server import SimServer
from tests.alertmanager_fixture import ALERTMANAGER, WebhookReceiver, running_alertmanager
from tests.alertmanager_fixture import SKIP_REASON as NO_ALERTMANAGER
from tests.prometheus_fixture import PROMETHEUS, ScrapeTarget, running_prometheus
from tests.prometheus_fixture import SKIP_REASON as NO_PROMETHEUS
from tests.session_world import START_T, Collector, ManualSim, drive_until
from tests.sim_fixtures import ManualClock
from tests.test_live_verdict import _step

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason=NO_PROMETHEUS),
    pytest.mark.skipif(ALERTMANAGER is None, reason=NO_ALERTMANAGER),
    pytest.mark.slow,
]
JOB = "specwatch"
SCRAPE_S = 0.2
DEADLINE_S = 60.0
"""Real seconds for an alert to travel exporter → Prometheus → Alertmanager → webhook."""


def _query(prom_url: str, expr: str, over_s: float | None = None) -> list[object]:
    """An instant query, or with ``over_s`` a range query over that many seconds back (what a
    Grafana panel asks)."""
    if over_s is None:
        path, data = "/api/v1/query", {"query": expr}
    else:
        now = time.time()
        path = "/api/v1/query_range"
        data = {"query": expr, "start": str(now - over_s), "end": str(now), "step": "1"}
    body = httpx.post(prom_url + path, data=data, timeout=5).json()
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


def _concrete(expr: str, rate_interval: str = "10s") -> str:
    """A dashboard expression with Grafana's variables as a user would have them."""
    return (
        expr.replace("$server", ".*")
        .replace("$job", JOB)
        .replace("$__rate_interval", rate_interval)
    )


@pytest.mark.parametrize(
    ("scenario", "dialect", "outcome", "alert"),
    [
        # vLLM's sim exports per-position acceptance, which the dashboard has a panel for.
        ("drift", "vllm", Outcome.GPU, "SpecwatchTokSDownExplainedByGpu"),
        ("regression", "sglang", Outcome.CODE, "SpecwatchTokSDownNotExplained"),
    ],
)
async def test_the_story_reaches_the_webhook_through_prometheus_and_alertmanager(
    tmp_path: Path, scenario: str, dialect: str, outcome: Outcome, alert: str
) -> None:
    clock = ManualClock(START_T)
    world, script = demo_world(dialect, gpus=4, clock=clock, scenario=scenario, seed=3)
    assert script is not None
    server = SimServer(world)
    sim = ManualSim(world, server, clock, server.start())
    seen = Collector()
    session = sim.session(FakeNvml(world.gpus, clock=clock.now), metrics_interval_s=0.15)
    session.subscribe(seen)
    exporter = Exporter.of(session, plain_s=world.engine.config.plain_step_ms / 1000.0)
    http, port = exporter.serve("127.0.0.1", 0)
    rules = tmp_path / "specwatch.rules.yml"
    rules.write_text(rules_text(for_override="1s"))
    receiver = WebhookReceiver()
    hook = receiver.start()

    def state() -> LiveVerdictState:
        verdicts = seen.of(VerdictChanged)
        return verdicts[-1].state if verdicts else WAITING

    try:
        with (
            running_alertmanager(hook, tmp_path / "alertmanager") as am,
            running_prometheus(
                [ScrapeTarget(JOB, port, "exporter-node")],
                tmp_path / "prometheus",
                interval_s=SCRAPE_S,
                extra={
                    "rule_files": [str(rules)],
                    "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am]}]}]},
                },
            ) as prom,
        ):
            session.start()
            sim.advance(world.loaded_at - clock.now())
            await drive_until(None, lambda: bool(seen.of(ServerReady)), 20)
            while state().outcome is not outcome:
                assert clock.now() - script.change_at <= 60.0, state().judgement
                await _step(sim, seen)
            end = time.monotonic() + DEADLINE_S
            while not receiver.firing(alert):
                assert time.monotonic() < end, f"{alert} not delivered; got {receiver.alerts}"
                assert state().outcome is outcome, state().judgement
                await _step(sim, seen)
            (fired,) = receiver.firing(alert)[:1]
            assert fired["labels"]["server"] == sim.url
            assert fired["labels"]["model"] and fired["labels"]["dialect"] == dialect
            other = (
                "SpecwatchTokSDownNotExplained"
                if outcome is Outcome.GPU
                else "SpecwatchTokSDownExplainedByGpu"
            )
            assert receiver.firing(other) == []
            if scenario != "drift":
                return
            # Every dashboard panel has data while the story runs.
            for _ in range(10):  # a few more seconds of readings for the rate() windows
                await _step(sim, seen)
            empty = [e for e in expressions() if not _query(prom.url, _concrete(e), 60.0)]
            assert empty == [], empty
            # The goodput panel's shares are shares: both objectives, each in [0, 1].
            (goodput,) = [e for e in expressions() if "goodput_met" in e and '"low"' in e]
            shares = _query(prom.url, _concrete(goodput, rate_interval="60s"))
            assert {r["metric"]["objective"] for r in shares} == {"ttft", "tpot"}  # type: ignore[index]
            values = [float(r["value"][1]) for r in shares]  # type: ignore[index]
            assert all(0.0 <= v <= 1.0 for v in values if v == v) and any(v == v for v in values)
            # The server goes away: up is 0 and the "cannot reach" alert is delivered.
            server.stop()
            end = time.monotonic() + DEADLINE_S
            while not receiver.firing("SpecwatchServerUnreachable"):
                assert time.monotonic() < end, receiver.alerts
                await asyncio.sleep(0.1)
            # The verdict goes with the server: a scrape already in flight when it stopped may
            # still answer once, so wait (within the deadline) for the series to be gone.
            while _query(prom.url, "specwatch_verdict") != []:
                assert time.monotonic() < end, _query(prom.url, "specwatch_verdict")
                await asyncio.sleep(0.1)
    finally:
        await session.aclose()
        http.shutdown()
        http.server_close()
        server.stop()
        receiver.stop()
