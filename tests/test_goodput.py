"""Goodput against --slo-ttft / --slo-tpot and the session figures (issue 40, items 3-4): from
the server's histograms (exact at a bound, a range between two), from a benchmark's own
requests (exact, both objectives at once), live in the load pane with a reset key, in
snapshots, ``compare`` and ``probe --json``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.style import Style

from specwatch.commands.main import main
from specwatch.core.goodput import (
    DEFAULT_SLO,
    Slo,
    add_cdfs,
    cdf_share,
    histogram_goodput,
    request_goodput,
    slo_from_ms,
    tpot_of,
)
from specwatch.core.server import MetricsWindow
from specwatch.core.session_figures import SessionTotals
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.load import load_text
from tests.scene import scene_server

INF = math.inf
STYLES = {k: Style() for k in ("label", "value", "dim", "warn")}
# vLLM's TTFT bounds around 1 s; 10 requests
TTFT = ((0.25, 6.0), (0.5, 8.0), (0.75, 8.0), (1.0, 9.0), (2.5, 10.0), (INF, 10.0))


def test_a_share_is_exact_at_a_bound_and_a_range_between_two() -> None:
    at = cdf_share(TTFT, 1.0)
    assert at is not None and at.low == at.high == 0.9 and at.words() == "90.0%"
    between = cdf_share(TTFT, 2.0)  # between 1.0 (9) and 2.5 (10)
    assert between is not None and (between.low, between.high) == (0.9, 1.0)
    assert between.words() == "90.0–100.0%"
    below = cdf_share(TTFT, 0.1)
    assert below is not None and (below.low, below.high) == (0.0, 0.6)
    assert cdf_share(((1.0, 0.0), (INF, 0.0)), 1.0) is None
    assert cdf_share((), 1.0) is None
    over = cdf_share(((1.0, 3.0), (INF, 4.0)), 50.0)  # past the last finite bound: unknown
    assert over is not None and (over.low, over.high) == (0.75, 1.0)


def test_windows_add_bound_by_bound() -> None:
    a = ((0.5, 1.0), (1.0, 2.0), (INF, 2.0))
    b = ((0.25, 1.0), (1.0, 3.0), (INF, 4.0))
    assert add_cdfs(a, b) == ((0.25, 1.0), (0.5, 2.0), (1.0, 5.0), (INF, 6.0))
    assert add_cdfs((), b) == b


def test_request_goodput_counts_both_objectives_at_once() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.05)
    got = request_goodput([(0.5, 0.04), (1.5, 0.04), (0.5, 0.06), (0.9, None), (None, 0.01)], slo)
    assert (got.requests, got.met_ttft, got.met_tpot, got.met_both) == (3, 2, 2, 1)
    assert got.words() == ("33.3% of 3 requests met TTFT≤1s · TPOT≤50ms (TTFT 66.7%, TPOT 66.7%)")
    # with the TPOT objective off, a one-token request counts
    ttft_only = request_goodput([(0.9, None), (1.1, 0.2)], Slo(1.0, None))
    assert (ttft_only.requests, ttft_only.met_both) == (2, 1)
    assert tpot_of(11, 1.0) == pytest.approx(0.1) and tpot_of(1, 1.0) is None


def test_slo_from_the_command_line() -> None:
    assert slo_from_ms(None, None) == DEFAULT_SLO == Slo(1.0, 0.05)
    assert slo_from_ms(250, 0) == Slo(0.25, None)
    assert Slo(0.25, None).words() == "TTFT≤250ms"
    good = histogram_goodput({"ttft": TTFT}, Slo(1.0, 0.05))
    assert good.words() == "TTFT≤1s 90.0% · TPOT≤50ms no requests"
    doc = good.to_json()
    assert doc["ttft"] == {"low": 0.9, "high": 0.9, "requests": 10.0} and doc["tpot"] is None


def _window(t: float, **kw: Any) -> MetricsWindow:
    return MetricsWindow(t=t, dt=1.0, **kw)


def test_session_totals_split_busy_from_idle_and_sum_requests_and_tokens() -> None:
    s = SessionTotals()
    s.add(MetricsWindow(t=0.0, dt=0.0))  # the first scrape: no interval
    for t in range(1, 4):
        s.add(_window(float(t), requests_running=2.0, tokens=100.0, finished_in_window={"stop": 1}))
    s.add(_window(4.0, requests_running=0.0, tokens=0.0))
    s.add(_window(5.0))  # tells neither
    s.add(_window(6.0, requests_running=1.0, tokens=50.0, restarted=True))  # across a restart
    got = s.summary(DEFAULT_SLO, now=6.0)
    assert (got.busy_s, got.idle_s, got.unknown_s) == (3.0, 1.0, 1.0)
    assert got.requests == 3 and got.tokens == 300
    assert got.active == 0.75 and got.tokens_per_request == 100 and got.busy_tok_s == 100
    assert got.words() == (
        "active 75.0% · (3s busy / 1s idle) · 3 reqs · 100 gen tok/req · 100.0 tok/s busy"
    )
    s.reset(6.0)
    again = s.summary(DEFAULT_SLO, now=6.0)
    assert again.since == 6.0 and again.requests is None and again.active is None


def test_the_load_pane_shows_goodput_and_the_session_and_z_resets_them() -> None:
    model = MonitorModel()
    model.set_ready(0.0, scene_server())
    model.slo = Slo(1.0, 0.05)
    tpot = ((0.025, 4.0), (0.05, 9.0), (0.075, 10.0), (INF, 10.0))
    model.add_window(MetricsWindow(t=0.0, dt=0.0))
    for t in (1.0, 2.0):
        model.add_window(
            _window(
                t,
                requests_running=4.0,
                tokens=400.0,
                requests_per_s=5.0,
                latency_cdf={"ttft": TTFT, "tpot": tpot},
            )
        )
    text = load_text(model, STYLES).plain
    assert "goodput TTFT≤1s 90.0%  TPOT≤50ms 90.0%" in text, text
    assert "session 2s  active 100.0%  (2s busy / 0s idle)  10 reqs  80 gen tok/req" in text
    model.reset_session()
    model.add_window(_window(3.0, requests_running=0.0, tokens=0.0))
    after = load_text(model, STYLES).plain
    assert "goodput" not in after  # no request since the reset
    assert "session 1s  active 0.0%  (0s busy / 1s idle)" in after, after


async def test_z_resets_the_session_in_the_app() -> None:
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.settings import AppSettings

    settings = AppSettings(watch_terminal=False, live_cpu=False, slo=Slo(0.5, None))
    app = SpecwatchApp(settings=settings)
    assert app.model.slo == Slo(0.5, None)
    async with app.run_test() as pilot:
        app.model.add_window(MetricsWindow(t=1.0, dt=0.0))
        app.model.add_window(_window(2.0, requests_running=1.0, tokens=10.0))
        assert app.model.session_summary().busy_s == 1.0
        await pilot.press("z")
        await pilot.pause()
        assert app.model.session_summary().busy_s == 0.0


def test_bench_goodput_in_the_report_the_snapshot_and_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["bench", "--demo", "cold", "-n", "2", "--warmup", "1", "--max-tokens", "64"]
    out = ["--out", str(tmp_path)]
    assert main([*common, *out, "--label", "a"]) == 0
    report = capsys.readouterr().out
    assert "Goodput: 100.0% of 2 requests met TTFT≤1s · TPOT≤50ms" in report, report
    # No token comes within a microsecond of the last: every request fails that objective.
    assert main([*common, *out, "--label", "b", "--slo-tpot", "0.001"]) == 0
    assert "Goodput: 0.0% of 2 requests met TTFT≤1s · TPOT≤0.001ms" in capsys.readouterr().out
    a, b = (next(tmp_path.glob(f"*-{x}.json")) for x in "ab")
    doc = orjson.loads(b.read_bytes())
    assert doc["schema_version"] == 5 and doc["config"]["slo_tpot_s"] == 1e-6
    run = doc["runs"][-1]
    assert len(run["stream_ttft_s"]) == len(run["stream_tpot_s"]) == 1
    assert run["stream_tpot_s"][0] > 1e-6 and run["stream_ttft_s"][0] > 0
    main(["compare", str(a), str(b)])
    rows = capsys.readouterr().out
    assert "goodput (each side's SLO)" in rows and "100.0%" in rows and "0.0%" in rows, rows


def test_probe_json_carries_goodput_of_its_window(capsys: pytest.CaptureFixture[str]) -> None:
    from specwatch.sim.presets import preset
    from specwatch.sim.server import SimServer
    from specwatch.sim.world import SimWorld

    with SimServer(SimWorld(preset("vllm", warmup_requests=0))) as server:
        status = main(["probe", "--url", server.url, "--json", "--no-gpu", "--max-tokens", "16"])
        doc = orjson.loads(capsys.readouterr().out)
        main(["probe", "--url", server.url, "--no-gpu", "--max-tokens", "16", "--slo-ttft", "0"])
        text = capsys.readouterr().out
    assert status == 0
    good = doc["goodput"]
    assert good["slo_ttft_s"] == 1.0 and good["slo_tpot_s"] == 0.05
    cdf = doc["metrics"]["latency_cdf"]["ttft"]
    assert good["ttft"]["requests"] == cdf[-1][1] >= 1  # the probe's own request at least
    assert "goodput  TPOT≤50ms" in text and "TTFT≤" not in text.split("goodput")[1], text
