"""``specwatch exporter``: the series it builds from session events, and the command itself."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.commands.arguments import parse_listen
from specwatch.commands.exporter import expressions, run_dashboard
from specwatch.core.goodput import Slo
from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.host import Competitor, HostSpan
from specwatch.core.judge import Figures as WindowFigures
from specwatch.core.judge import judge
from specwatch.core.outcomes import Outcome
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
from specwatch.exporter.families import SessionCollector
from specwatch.exporter.readings import LABEL_LIMIT, Readings
from specwatch.exporter.serve import Exporter
from specwatch.session import events as ev
from specwatch.session.verdict_state import LiveVerdictState, Reference
from specwatch.sources.http.endpoint import parse_endpoint
from tests.session_world import Collector, manual_sim

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-exporter-secret-0123456789"
URL = "http://127.0.0.1:8000"


def _scrape(
    readings: Readings, plain_s: float | None = None
) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(readings.view, plain_s))
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _verdict(outcome: Outcome) -> LiveVerdictState:
    ref = WindowFigures((800.0, 800.0), 1980.0, 1980.0, accept_length=3.0)
    cur = WindowFigures((740.0, 740.0), 1830.0, 1980.0, accept_length=2.9)
    return LiveVerdictState(
        "judged",
        reference=Reference("steady", "steady after warmup", ref, 0.0),
        current=cur,
        judgement=dataclasses.replace(judge(ref, cur), outcome=outcome),
    )


def _feed_ready(readings: Readings, model: str = "meta/llama") -> None:
    info = ServerInfo(URL, Dialect.SGLANG, model=model)
    readings(ev.ServerReady(1.0, info))
    window = MetricsWindow(
        t=2.0,
        dt=1.0,
        gen_tok_s=740.0,
        accept_length=2.5,
        draft_acceptance_rate=0.5,
        per_position_acceptance=(0.8, 0.5, 0.2),
        step_latency_s=0.025,
    )
    readings(ev.MetricsScraped(window))
    readings(ev.VerdictChanged(2.0, _verdict(Outcome.GPU)))


def test_every_series_of_a_judged_server_and_its_gpus() -> None:
    readings = Readings([parse_endpoint(URL, SECRET)], wall=lambda: 1.7e9)
    _feed_ready(readings)
    readings(
        ev.GpuInventoryChanged(
            GpuInventory(True, gpus=(GpuStatic(0, max_sm_clock_mhz=1980, power_limit_w=700.0),))
        )
    )
    sample = GpuSample(
        0,
        2.0,
        sm_clock_mhz=1830,
        temp_c=73,
        power_w=560.0,
        clock_event_reasons=0x20,
        util_gpu_pct=100,
        thermal_violation_ns=2_000_000_000,
        dram_active=0.8,
        tensor_active=0.15,
    )
    readings(ev.GpuTicked(GpuTick(2.0, 1.7e9, (sample,), 0.1)))
    got = _scrape(readings, plain_s=0.012)
    server = {"server": URL, "model": "meta/llama", "dialect": "sglang"}
    assert got["specwatch_server_up"] == [(server, 1.0)]
    causes = {labels["cause"]: v for labels, v in got["specwatch_verdict"]}
    assert causes["gpu_state"] == 1.0 and sum(causes.values()) == 1.0
    assert got["specwatch_tokens_per_second_ratio"][0][1] == 740.0 / 800.0
    assert abs(got["specwatch_clock_predicted_ratio"][0][1] - 1830.0 / 1980.0) < 1e-12
    assert got["specwatch_verify_step_seconds"][0][1] == 0.025
    assert got["specwatch_effective_token_seconds"][0][1] == 0.01
    assert abs(got["specwatch_break_even_accept_length"][0][1] - 0.025 / 0.012) < 1e-12
    assert abs(got["specwatch_speculative_gain_ratio"][0][1] - 1.2) < 1e-12
    assert got["specwatch_tokens_per_step"][0][1] == 2.5  # no steps counted: the accept length
    positions = {labels["position"]: v for labels, v in got["specwatch_position_acceptance_rate"]}
    assert positions == {"0": 0.8, "1": 0.5, "2": 0.2}
    assert got["specwatch_gpu_sm_clock_hertz"] == [({"node": "", "gpu": "0"}, 1830e6)]
    reasons = {labels["reason"]: v for labels, v in got["specwatch_gpu_clock_event_reason"]}
    assert reasons["SwThermalSlowdown"] == 1.0 and reasons["SwPowerCap"] == 0.0
    assert got["specwatch_gpu_straggler_clock_ratio"][0][1] == 1830 / 1980
    assert ({"node": "", "gpu": "0", "reason": "thermal"}, 2.0) in got[
        "specwatch_gpu_throttle_seconds"
    ]
    assert "specwatch_source_last_success_timestamp_seconds" in got
    assert got["specwatch_gpu_dram_active_ratio"] == [({"node": "", "gpu": "0"}, 0.8)]
    assert got["specwatch_gpu_tensor_active_ratio"] == [({"node": "", "gpu": "0"}, 0.15)]


def test_steps_that_drafted_nothing_lower_the_effective_token_time_not_the_accept_length() -> None:
    readings = Readings([parse_endpoint(URL)])
    readings(ev.ServerReady(1.0, ServerInfo(URL, Dialect.VLLM)))
    window = MetricsWindow(
        t=2.0, dt=1.0, accept_length=3.0, tokens_per_step=2.0, step_latency_s=0.03
    )
    readings(ev.MetricsScraped(window))
    got = _scrape(readings, plain_s=0.012)
    assert got["specwatch_accept_length"][0][1] == 3.0
    assert got["specwatch_tokens_per_step"][0][1] == 2.0
    assert got["specwatch_effective_token_seconds"][0][1] == 0.015
    assert abs(got["specwatch_speculative_gain_ratio"][0][1] - 0.8) < 1e-12


def test_the_hosts_cpu_is_exported_with_its_competitors_named_safely() -> None:
    readings = Readings([parse_endpoint(URL)])
    assert "specwatch_host_cpu_steal_ratio" not in _scrape(readings)
    span = HostSpan(
        duration_s=2.0,
        server_local=True,
        cores=4,
        load_per_core=1.5,
        run_queue=6.0,
        steal_ratio=0.1,
        server_cpu_cores=1.5,
        server_wait_ratio=0.4,
        competitors=(Competitor("hog\x1b[2J", 7, 2.0),),
    )
    readings(ev.HostSampled(3.0, span))
    got = _scrape(readings)
    assert got["specwatch_host_load_per_core"] == [({}, 1.5)]
    assert got["specwatch_host_run_queue_per_core"] == [({}, 1.5)]
    assert got["specwatch_host_cpu_steal_ratio"] == [({}, 0.1)]
    assert got["specwatch_server_cpu_cores"] == [({}, 1.5)]
    assert got["specwatch_server_cpu_wait_ratio"] == [({}, 0.4)]
    ((labels, cores),) = got["specwatch_host_competitor_cpu_cores"]
    assert cores == 2.0 and labels["pid"] == "7" and "\x1b" not in labels["process"]


def test_a_lost_server_is_up_zero_and_its_figures_are_dropped() -> None:
    readings = Readings([parse_endpoint(URL)])
    _feed_ready(readings)
    readings(ev.ServerLost(3.0, "connection refused"))
    readings(ev.VerdictChanged(3.5, _verdict(Outcome.CODE)))  # judged on readings from before
    got = _scrape(readings)
    assert [v for _, v in got["specwatch_server_up"]] == [0.0]
    assert got["specwatch_source_errors_total"][0][1] == 1.0
    for name in (
        "specwatch_verdict",
        "specwatch_tokens_per_second_ratio",
        "specwatch_accept_length",
    ):
        assert name not in got, name
    readings(ev.MetricsScraped(MetricsWindow(t=9.0, dt=1.0, gen_tok_s=10.0)))
    assert [v for _, v in _scrape(readings)["specwatch_server_up"]] == [1.0]


def test_a_server_without_counters_is_up_with_its_counters_gauge_at_zero() -> None:
    readings = Readings([parse_endpoint(URL)])
    assert "specwatch_server_counters" not in _scrape(readings)  # not detected yet
    off = ServerInfo(
        URL, Dialect.LLAMACPP, metrics_enabled=False, metrics_reason="without --metrics"
    )
    readings(ev.ServerReady(1.0, off))
    got = _scrape(readings)
    assert [v for _, v in got["specwatch_server_up"]] == [1.0]
    assert [v for _, v in got["specwatch_server_counters"]] == [0.0]
    readings(ev.ServerReady(9.0, ServerInfo(URL, Dialect.LLAMACPP)))  # restarted with them
    assert [v for _, v in _scrape(readings)["specwatch_server_counters"]] == [1.0]


def test_late_reads_are_counted_and_an_outage_is_not_one() -> None:
    readings = Readings([parse_endpoint(URL)], interval_s=1.0)
    _feed_ready(readings)
    assert _scrape(readings)["specwatch_late_reads_total"] == [({"server": URL}, 0.0)]
    readings(ev.MetricsScraped(MetricsWindow(t=12.0, dt=10.0, gen_tok_s=700.0)))  # read late
    readings(ev.MetricsScraped(MetricsWindow(t=13.0, dt=1.0, gen_tok_s=700.0)))
    assert _scrape(readings)["specwatch_late_reads_total"][0][1] == 1.0
    # lost, back 20 s later: the window across the outage is the server's, not a late read
    readings(ev.ServerLost(14.0, "connection refused"))
    readings(ev.ServerReady(34.0, ServerInfo(URL, Dialect.SGLANG)))
    readings(ev.MetricsScraped(MetricsWindow(t=35.0, dt=22.0, gen_tok_s=700.0)))
    assert _scrape(readings)["specwatch_late_reads_total"][0][1] == 1.0
    slow = Readings([parse_endpoint(URL)], interval_s=5.0)  # 10 s apart is on time at 5 s
    _feed_ready(slow)
    slow(ev.MetricsScraped(MetricsWindow(t=12.0, dt=10.0, gen_tok_s=700.0)))
    assert _scrape(slow)["specwatch_late_reads_total"][0][1] == 0.0


def test_gpus_not_read_as_asked_are_no_failed_read() -> None:
    off = GpuInventory(available=False, reason="GPUs not read (--no-gpu)")
    asked = Readings([parse_endpoint(URL)], gpus_off=True)
    asked(ev.GpuInventoryChanged(off))
    assert _scrape(asked)["specwatch_gpu_source_errors_total"][0][1] == 0.0
    lost = Readings([parse_endpoint(URL)])  # NVML missing where GPUs were to be read
    lost(ev.GpuInventoryChanged(dataclasses.replace(off, reason="NVML unavailable")))
    assert _scrape(lost)["specwatch_gpu_source_errors_total"][0][1] == 1.0
    from specwatch.session.gpu_source import NoGpus
    from specwatch.session.live import LiveSession

    session = LiveSession([parse_endpoint(URL)], NoGpus("GPUs not read (--no-gpu)"), 5.0)
    wired = Exporter.of(session).readings  # the session's interval and its GPUs left off
    assert (wired.gpus_off, wired.interval_s) == (True, 5.0)


def test_a_failed_gpu_tick_drops_the_gpu_figures() -> None:
    readings = Readings([parse_endpoint(URL)])
    sample = GpuSample(0, 2.0, sm_clock_mhz=1830, temp_c=60)
    readings(ev.GpuTicked(GpuTick(2.0, 1.7e9, (sample,), 0.1)))
    assert "specwatch_gpu_temperature_celsius" in _scrape(readings)
    readings(ev.GpuTicked(GpuTick(3.0, 1.7e9, (), 0.1, error="NVML: GPU is lost")))
    got = _scrape(readings)
    assert "specwatch_gpu_temperature_celsius" not in got
    assert got["specwatch_gpu_source_errors_total"][0][1] == 1.0


def test_labels_from_the_server_are_sanitised_and_bounded() -> None:
    readings = Readings([parse_endpoint(URL)])
    _feed_ready(readings, model="\x1b]0;pwned\x07" + "m" * 500)
    ((labels, _),) = _scrape(readings)["specwatch_server_up"]
    assert "\x1b" not in labels["model"] and len(labels["model"]) <= LABEL_LIMIT


def test_listen_defaults_to_loopback() -> None:
    assert parse_listen("9100") == ("127.0.0.1", 9100)
    assert parse_listen(":9100") == ("127.0.0.1", 9100)
    assert parse_listen("0.0.0.0:9100") == ("0.0.0.0", 9100)
    assert parse_listen("[::1]:9100") == ("::1", 9100)


def test_the_command_serves_metrics_and_ends_cleanly_on_sigterm(tmp_path: Path) -> None:
    from specwatch.record.reader import Reader

    recording = tmp_path / "live.sqlite"
    with manual_sim() as sim:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specwatch",
                "exporter",
                sim.url,
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "0.2",
                "--no-gpu",
                "--api-key",
                SECRET,
                "--record",
                str(recording),
            ],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()
            port = re.search(r"127\.0\.0\.1:(\d+)/metrics", first)
            assert port, first
            body = ""
            end = time.monotonic() + 30
            while "specwatch_server_up{" not in body or " 1.0" not in body:
                assert time.monotonic() < end, body
                time.sleep(0.1)  # polling the endpoint for a condition, with a deadline
                body = httpx.get(f"http://127.0.0.1:{port.group(1)}/metrics").text
            assert "process_cpu_seconds_total" in body
            assert SECRET not in body
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped (SIGTERM)" in err and SECRET not in first + err
    with Reader(recording) as reader:  # closed whole: it opens and holds the session's events
        assert reader.span() is not None and not reader.stopped
    assert SECRET.encode() not in recording.read_bytes()


@pytest.mark.parametrize("case", ["banner", "escape", "huge-metrics", "loading"])
async def test_a_hostile_server_shows_as_health_series_never_a_crash(case: str) -> None:
    from specwatch.session.live import LiveSession
    from tests.hostile import HOSTILE, hostile_server

    with hostile_server(case, trickle_s=0.05) as hostile:
        session = LiveSession([parse_endpoint(hostile.url)], None, 0.1, timeout_s=0.5)
        exporter = Exporter.of(session)
        seen = Collector()
        session.subscribe(seen)
        async with session:
            end = time.monotonic() + 20
            while True:
                got = _scrape(exporter.readings)
                waits = [w.state for w in seen.of(ev.ServerWaiting)]
                settled = (
                    got["specwatch_source_errors_total"][0][1] > 0
                    or "specwatch_generation_tokens_per_second" in got
                    or waits.count("loading") >= 2
                )
                if settled:
                    break
                assert time.monotonic() < end, got
                await asyncio.sleep(0.05)
        body = generate_latest(exporter.registry).decode()
    assert "\x1b" not in body and HOSTILE not in body
    up = got["specwatch_server_up"][0][1]
    if case == "loading":  # a server still loading is not up, and not failing either
        assert (up, got["specwatch_source_errors_total"][0][1]) == (0.0, 0.0)
    if up == 0.0:
        assert "specwatch_verdict" not in got and "specwatch_accept_length" not in got


def test_the_dashboard_command_prints_grafana_json() -> None:
    out = io.StringIO()
    assert run_dashboard(out=out) == 0
    board = json.loads(out.getvalue())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert exprs == expressions() and len(exprs) >= 12
    names = " ".join(exprs)
    for series in ("specwatch_gpu_temperature_celsius", "specwatch_gpu_clock_event_reason"):
        assert series in names  # speculation overlaid with clocks, temperatures, reasons


DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "templating", "panels"],
    "properties": {
        "templating": {
            "type": "object",
            "properties": {
                "list": {
                    "type": "array",
                    "items": {"type": "object", "required": ["name", "type", "query"]},
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "datasource", "gridPos", "targets"],
                "properties": {
                    "type": {"const": "timeseries"},
                    "datasource": {"const": {"type": "prometheus", "uid": "${datasource}"}},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                        },
                    },
                    "targets": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["refId", "expr", "legendFormat"],
                            "properties": {"expr": {"type": "string", "minLength": 1}},
                        },
                    },
                },
            },
        },
    },
}
"""What Grafana's import and the e2e test rely on in the shipped dashboard."""


def test_the_shipped_dashboard_is_valid_and_its_panels_apart() -> None:
    import jsonschema

    from specwatch.commands.exporter import DASHBOARD_FILE, package_file

    board = json.loads(package_file(DASHBOARD_FILE))
    jsonschema.validate(board, DASHBOARD_SCHEMA)
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [
        (p["gridPos"]["x"] + dx, p["gridPos"]["y"] + dy)
        for p in panels
        for dx in range(p["gridPos"]["w"])
        for dy in range(p["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells)), "two panels overlap"
    assert all(x < 24 for x, _ in cells)
    for panel in panels:
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs)


def test_exporter_help_stays_light() -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from specwatch.commands.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['exporter', '--help'])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m.split(".")[0] in ("prometheus_client", "httpx", "asyncio")] == []


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_finds_no_problem_in_the_exposition() -> None:
    readings = Readings([parse_endpoint(URL)])
    _feed_ready(readings)
    sample = GpuSample(0, 2.0, sm_clock_mhz=1830, temp_c=73, clock_event_reasons=0x4)
    readings(ev.GpuTicked(GpuTick(2.0, 1.7e9, (sample,), 0.1)))
    readings(ev.HostSampled(3.0, HostSpan(duration_s=2.0, cores=2, busy_ratio=0.5)))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(readings.view, 0.012))
    text = generate_latest(registry)
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, check=False
    )
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_goodput_counts_each_windows_requests_against_the_objectives() -> None:
    """Counters since the exporter started: exact at a bucket bound, the two shares around an
    objective between bounds; a restart's window and a window without requests add nothing,
    and a lost server keeps its counts."""
    readings = Readings([parse_endpoint(URL)], slo=Slo(ttft_s=1.0, tpot_s=0.03))
    readings(ev.ServerReady(1.0, ServerInfo(URL, Dialect.VLLM, model="m")))
    ttft = ((0.5, 6.0), (1.0, 9.0), (math.inf, 10.0))
    tpot = ((0.025, 3.0), (0.05, 8.0), (math.inf, 10.0))
    window = MetricsWindow(t=2.0, dt=1.0, latency_cdf={"ttft": ttft, "tpot": tpot})
    readings(ev.MetricsScraped(window))
    readings(ev.MetricsScraped(dataclasses.replace(window, t=3.0)))
    readings(ev.MetricsScraped(dataclasses.replace(window, t=4.0, restarted=True)))
    readings(ev.MetricsScraped(MetricsWindow(t=5.0, dt=1.0)))
    readings(ev.ServerLost(6.0, "connection refused"))
    got = _scrape(readings)
    timed = {lb["objective"]: v for lb, v in got["specwatch_goodput_requests_total"]}
    assert timed == {"ttft": 20.0, "tpot": 20.0}
    met = {
        (lb["objective"], lb["bound"]): v for lb, v in got["specwatch_goodput_met_requests_total"]
    }
    assert met == {
        ("ttft", "low"): 18.0,
        ("ttft", "high"): 18.0,
        ("tpot", "low"): 6.0,
        ("tpot", "high"): 16.0,
    }
    limits = {lb["objective"]: v for lb, v in got["specwatch_goodput_objective_seconds"]}
    assert limits == {"ttft": 1.0, "tpot": 0.03}
    assert got["specwatch_server_up"][0][1] == 0.0


def test_goodput_objectives_turned_off_export_no_counters() -> None:
    readings = Readings([parse_endpoint(URL)], slo=Slo(ttft_s=None, tpot_s=None))
    readings(ev.ServerReady(1.0, ServerInfo(URL, Dialect.VLLM)))
    got = _scrape(readings)
    assert "specwatch_goodput_requests_total" not in got
    assert "specwatch_goodput_objective_seconds" not in got


def test_two_models_of_one_router_are_two_servers() -> None:
    routed = [
        parse_endpoint("gpu:8080?model=a", env={}),
        parse_endpoint("gpu:8080?model=b", env={}),
    ]
    servers = [s.server for s in Readings(routed).view().servers]
    assert servers == ["http://gpu:8080?model=a", "http://gpu:8080?model=b"]
