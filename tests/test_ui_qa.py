"""What a user over SSH must always be able to read: the verdict, why a number is missing,
whether numbers are stale, and labels that agree with the axis (found by driving the app)."""

from __future__ import annotations

import dataclasses

from rich.style import Style

from specwatch.ui.app import SpecwatchApp
from specwatch.ui.help_text import help_renderable
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.speculation import SpeculationPane
from specwatch.ui.panes.token_rate import Reading, TokenRateGraph
from specwatch.ui.panes.verify import VerifyPane, verify_text
from specwatch.ui.settings import AppSettings
from tests.scene import build_scene, scene_server
from tests.test_ui_render import render_text

TONES = {k: Style() for k in ("label", "value", "dim", "good", "bad")}


def test_verdict_survives_a_short_verify_pane() -> None:
    model = build_scene(seconds=60)
    full = verify_text(model, TONES).plain.splitlines()
    assert len(full) == 4 and full[2].startswith("plain")
    short = verify_text(model, TONES, width=28, height=3).plain.splitlines()
    assert len(short) == 3 and short[-1].startswith("speculation ")
    assert all(len(line) <= 28 for line in short[1:2]), short


def test_verify_pane_says_why_without_metrics() -> None:
    model = MonitorModel()
    info = dataclasses.replace(
        scene_server(), metrics_enabled=False, metrics_reason="this server has no /metrics"
    )
    model.set_ready(1.0, info)
    assert "no /metrics" in verify_text(model, TONES).plain
    assert "waiting" in verify_text(MonitorModel(), TONES).plain


def test_missing_step_latency_is_named_not_dashed() -> None:
    model = build_scene(seconds=60)
    assert model.window is not None
    model.window = dataclasses.replace(model.window, step_latency_s=None)
    model.steady["step_latency_s"].clear()  # a server that never reported one
    first = verify_text(model, TONES).plain.splitlines()[0]
    assert first.startswith("step not reported") and "– ms" not in first
    assert "no verdict: the server reports no step latency" in verify_text(model, TONES).plain


def test_axis_top_covers_the_printed_current_rate() -> None:
    cw = TokenRateGraph.chart_width(60)
    g = TokenRateGraph(
        [400.0] * cw, [], [], [], 5, "5m", current=(Reading(723.7), Reading(None), Reading(None))
    )
    text = render_text(g, 60)
    assert text[0].split()[0] == "800" and "723.7" in text[1]


def test_help_legend_says_harmless_once() -> None:
    text = "\n".join(render_text(help_renderable(), 100))
    assert "harmless (harmless)" not in text
    assert "idle" in text and "pwrcap" in text and "short: W" in text


async def test_panes_say_stale_while_the_server_is_away() -> None:
    model = build_scene(seconds=60)
    settings = AppSettings(watch_terminal=False, live_cpu=False)
    app = SpecwatchApp(settings, model=model)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        spec, verify = app.query_one(SpeculationPane), app.query_one(VerifyPane)
        assert spec.border_title == "Speculation"
        model.set_lost(model.now + 1, "connection refused")
        app.redraw()
        await pilot.pause()
        assert spec.border_title == "Speculation · stale"
        assert verify.border_title == "Verify latency · 10 s mean · stale"
        model.set_ready(model.now + 1, scene_server())
        app.redraw()
        await pilot.pause()
        assert verify.border_title == "Verify latency · 10 s mean"


def test_compare_headers_keep_what_tells_snapshots_apart() -> None:
    from specwatch.bench.report import short_names as _short_names

    a, b = _short_names("specwatch-20261129T210500Z.json", "specwatch-20261129T210608Z.json")
    assert (a, b) == ("20261129T210500Z", "20261129T210608Z")
    assert _short_names("base.json", "base.json") == ("base.json", "base.json")
    # Issue 21 item 18: a range's header keeps its sign ("60s/-35s" read as a time after start).
    assert _short_names("r.sqlite@-60s/-35s", "r.sqlite@-25s/-0s") == ("-60s/-35s", "-25s/-0s")


async def test_token_rate_title_says_when_there_is_no_metrics() -> None:
    from specwatch.ui.panes.token_rate import TokenRatePane

    model = MonitorModel()
    app = SpecwatchApp(AppSettings(watch_terminal=False, live_cpu=False), model=model)
    async with app.run_test(size=(80, 24)) as pilot:
        info = dataclasses.replace(scene_server(), metrics_enabled=False)
        model.set_ready(1.0, info)
        app.redraw()
        await pilot.pause()
        assert "no /metrics" in str(app.query_one(TokenRatePane).border_title)


def test_load_pane_and_verdict_say_why_a_server_without_metrics_has_none() -> None:
    from specwatch.session import events as ev
    from specwatch.session.live_verdict import LiveVerdict
    from specwatch.ui.panes.load import load_text

    reason = "llama-server was started without --metrics"
    info = dataclasses.replace(scene_server(), metrics_enabled=False, metrics_reason=reason)
    model = MonitorModel()
    assert load_text(model, TONES).plain == "waiting for /metrics…"
    model.set_ready(1.0, info)
    assert load_text(model, TONES).plain == reason
    verdict = LiveVerdict()
    verdict.feed(ev.ServerReady(1.0, info))
    assert verdict.state().detail == f"none — {reason}"
    verdict.feed(ev.ServerReady(9.0, scene_server()))  # restarted with its counters on
    assert verdict.state().detail == "reading the server's first metrics"


def test_the_status_line_fills_the_speculative_setup_from_the_command_line() -> None:
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.server import Dialect, ServerInfo, SpecConfig
    from specwatch.ui.panes.status import status_parts

    # a fresh llama-server: /slots says it drafts, names no type before a request, no n_max
    info = ServerInfo("http://x:8080", Dialect.LLAMACPP, spec=SpecConfig(True, source="/slots"))
    model = MonitorModel()
    model.set_ready(1.0, info)
    assert (2, "speculative", "text") in status_parts(model)
    argv = ("llama-server", "-m", "t.gguf", "-md", "d.gguf", "--spec-draft-n-max", "1")
    model.set_identity(ServerIdentity(pid=42, cmdline=(*argv, "--spec-type", "draft-simple")))
    assert (2, "draft-simple draft 1", "text") in status_parts(model)
    model.set_ready(2.0, info)  # restarted: the new process's arguments are not known yet
    assert (2, "speculative", "text") in status_parts(model)
    model.set_identity(ServerIdentity(pid=43, cmdline=("llama-server", "-m", "t.gguf")))
    assert (2, "speculative", "text") in status_parts(model)  # no argument names it
