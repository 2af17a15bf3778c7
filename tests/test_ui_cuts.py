"""Issue 40, item 8: what a narrow screen cuts last (the age of a held reading, a note, the
verdict's tok/s figures), the keys the footer names, and ``a`` saying why not once."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.style import Style
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget

from specwatch.core.draft_advisor import advice_lines, advise, flat_baseline
from specwatch.core.server import MetricsWindow, SpecConfig
from specwatch.ui.advice_view import advice_body
from specwatch.ui.app import MORE_KEYS, SpecwatchApp
from specwatch.ui.bench_glue import finished_notice
from specwatch.ui.modals import TextModal
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.speculation import SpeculationPane, speculation_text
from specwatch.ui.panes.verdict import VerdictLine, verdict_text
from specwatch.ui.panes.verify import VerifyPane, verify_text
from specwatch.ui.settings import AppSettings
from tests.scene import build_scene, scene_server, verdict_scene

LLAMA_NOTE = "llama.cpp counters move only when a request finishes"
TONES = {k: Style() for k in ("label", "value", "dim", "good", "bad", "text", "ok", "gpu")}
TONES["load"] = Style()


def held_scene() -> MonitorModel:
    """The scene, then 12 s of windows without a token rate or accept length and with
    llama.cpp's note (its counters move only when a request ends), under a code verdict."""
    model = build_scene(seconds=240, with_bench=False)
    for i in range(1, 13):
        model.add_window(MetricsWindow(t=240.0 + i, dt=1.0, notes={"counters": LLAMA_NOTE}))
    model.set_verdict(verdict_scene("code").state())
    return model


def _lines(widget: Widget) -> list[str]:
    """The widget's rendered lines, its top border (a titled pane's) left out."""
    w, h = widget.region.size
    lines = [s.text for s in widget.render_lines(Region(0, 0, w, h))]
    return lines[1:] if lines and lines[0].startswith("─") else lines


async def _settled(app: SpecwatchApp, pilot: Pilot[Any]) -> None:
    app.redraw()
    await pilot.pause()


def _app(model: MonitorModel) -> SpecwatchApp:
    return SpecwatchApp(AppSettings(watch_terminal=False, live_cpu=False), model=model)


async def test_at_120x40_the_held_ages_and_the_whole_note_stay() -> None:
    app = _app(held_scene())
    async with app.run_test(size=(120, 40)) as pilot:
        await _settled(app, pilot)
        spec = _lines(app.query_one(SpeculationPane))
        assert "held 12s" in spec[0] and "held 12s" in spec[1], spec
        note = " ".join(line.strip() for line in spec[3:] if line.strip())
        assert note == f"note: {LLAMA_NOTE}", spec
        assert not any("…" in line for line in spec), spec
        assert "held 12s" in _lines(app.query_one(VerifyPane))[0]
        verdict = _lines(app.query_one(VerdictLine))[0]
        assert "tok/s 720 vs 800 (−10.0%)" in verdict, verdict


async def test_at_80x24_the_regression_keeps_its_tok_s_and_the_ages_stay() -> None:
    app = _app(held_scene())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot)
        verdict = _lines(app.query_one(VerdictLine))[0]
        assert "not explained by GPU state" in verdict, verdict
        assert "tok/s 720 vs 800 (−10.0%)" in verdict, verdict
        spec = _lines(app.query_one(SpeculationPane))
        assert "held 12s" in spec[0] and "held 12s" in spec[1], spec
        assert "12s" in _lines(app.query_one(VerifyPane))[1]


def test_the_whole_verdict_wording_shows_where_it_fits_with_the_figures() -> None:
    state = verdict_scene("code").state()
    wide = verdict_text(state, TONES, 158).plain
    assert "look at code or configuration" in wide and "tok/s 720 vs 800" in wide, wide
    narrow = verdict_text(state, TONES, 78).plain
    assert "look at code" not in narrow and "tok/s 720 vs 800" in narrow, narrow


async def test_the_footer_names_r_a_m_s_o_from_100_columns() -> None:
    app = _app(build_scene(seconds=60))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settled(app, pilot)

        def listed() -> set[str]:
            return {
                b.binding.key
                for b in app.screen.active_bindings.values()
                if b.binding.show and b.enabled
            }

        keys = {key for key, _action, _words in MORE_KEYS}
        assert keys == set("ramso") and keys <= listed(), listed()
        assert {"p", "question_mark", "q"} <= listed()
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not keys & listed() and {"question_mark", "q"} <= listed(), listed()
        await pilot.press("m")  # the keys work at any width
        await pilot.pause()
        assert isinstance(app.screen, TextModal) and app.screen.title_text == "metric sources"
        await pilot.press("escape")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, TextModal) and app.screen.title_text == "metric sources"


def test_a_says_why_not_in_one_line() -> None:
    """Early on the default demo (SGLang, no per-position counters), the advisor has too few
    windows with an accept length: said once, not once as the advice and again as the table."""
    windows = [MetricsWindow(t=float(t), dt=1.0, requests_running=2.0) for t in range(1, 5)]
    body = advice_body(scene_server(), windows, 9.0, "simulated").splitlines()
    assert body[0] == "4 windows, the last 4 s"
    assert len(body) == 2 and body[1].startswith("no recommendation: "), body
    assert "withheld" not in body[1], body
    advice = advise(windows, scene_server(), flat_baseline(9.0, windows))
    assert advice_lines(advice) == body[1:]
    one = advice_body(scene_server(), windows[:1], 9.0, "simulated").splitlines()
    assert one[0] == "1 window, the last 1 s" and "1 windows" not in "\n".join(one), one


def _plain_model() -> MonitorModel:
    model = MonitorModel()
    info = dataclasses.replace(scene_server(), spec=SpecConfig(enabled=False, source="/slots"))
    model.set_ready(1.0, info)
    for i in range(2, 20):
        model.add_window(MetricsWindow(t=float(i), dt=1.0, gen_tok_s=80.0, step_latency_s=0.0121))
    return model


def test_on_a_plain_server_the_verify_pane_says_the_step_is_the_plain_step() -> None:
    lines = verify_text(_plain_model(), TONES, 40).plain.splitlines()
    assert lines[0] == "step 12.1 ms"
    assert lines[2] == "plain 12.1 ms/tok  the step above", lines
    assert "unknown" not in "\n".join(lines) and "no baseline" not in "\n".join(lines), lines
    assert "--baseline-itl 12.1" in lines[3]


def test_a_finished_benchmarks_notice_names_the_folder(tmp_path: Any) -> None:
    path = tmp_path / "snaps" / "specwatch-20261203T221400Z.json"
    body = "Run 1/2 ...\n  Overall: 812 tok/s\n"
    notice = finished_notice(body, path)
    assert notice == (
        f"Overall: 812 tok/s · saved {path.name} in {path.parent} · o: the whole result"
    )
    assert finished_notice("", None) == "done · o: the whole result"


def test_a_note_cut_by_the_panes_height_ends_in_an_ellipsis() -> None:
    model = held_scene()
    lines = speculation_text(model, TONES | {"trend": Style()}, 30, 4).plain.splitlines()
    assert len(lines) == 4 and lines[3].endswith("…") and len(lines[3]) <= 30, lines
    lines = speculation_text(model, TONES | {"trend": Style()}, 30, 6).plain.splitlines()
    assert " ".join(lines[3:]) == f"note: {LLAMA_NOTE}", lines
