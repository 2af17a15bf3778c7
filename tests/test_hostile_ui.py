"""The TUI against the hostile simulator over real sockets: inert escapes, bounded answers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.geometry import Region
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from specwatch.session import LiveSession
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.modals import TextModal
from specwatch.ui.settings import AppSettings
from tests.hostile import hostile_server


def _bad_chars(text: str) -> list[str]:
    """Characters that could act on a terminal: C0 and C1 controls, DEL, bidi overrides."""
    return [c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or 0x202A <= ord(c) <= 0x202E]


def _rendered(widget: Widget) -> str:
    w, h = widget.region.size
    if w <= 0 or h <= 0:
        return ""
    return "\n".join(s.text for s in widget.render_lines(Region(0, 0, w, h)))


def _screen_texts(screen: Screen[Any]) -> dict[str, str]:
    """Every visible widget's rendered lines, by widget description."""
    return {repr(w): _rendered(w) for w in screen.query("*") if w.region.area}


def _assert_inert(screen: Screen[Any]) -> str:
    texts = _screen_texts(screen)
    for name, text in texts.items():
        for line in text.split("\n"):
            assert not _bad_chars(line), f"{name}: {line!r}"
    return "\n".join(texts.values())


async def _wait(pilot: Pilot[int], cond: Callable[[], bool], timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not reached"
        await pilot.pause(0.05)


def _bench_ended(app: SpecwatchApp) -> Callable[[], bool]:
    def ended() -> bool:
        bench = app.model.bench
        return bench is not None and bench.phase in ("error", "interrupted", "finished")

    return ended


def _paused_is(app: SpecwatchApp, want: bool) -> Callable[[], bool]:
    return lambda: app.model.paused is want


def _app(url: str, tmp_path: Path) -> SpecwatchApp:
    session = LiveSession([parse_endpoint(url, env={})], timeout_s=2.0, metrics_interval_s=0.2)
    settings = AppSettings(watch_terminal=False, redraw_s=0.1, snapshot_dir=tmp_path)
    return SpecwatchApp(settings, session)


async def test_escapes_from_the_server_never_reach_a_rendered_widget(tmp_path: Path) -> None:
    with hostile_server("escape") as server:
        app = _app(server.url, tmp_path)
        async with app.run_test(size=(120, 36)) as pilot:
            await _wait(pilot, lambda: app.model.server is not None)
            assert app.model.server is not None and "\x1b" not in (app.model.server.model or "")
            app.redraw()
            await pilot.pause()
            shown = _assert_inert(app.screen)
            assert "\\x1b" in shown  # the model id is shown, made visible
            # The benchmark's streams answer HTTP 500 with escapes in the body and reason.
            await pilot.press("b")
            await _wait(pilot, _bench_ended(app), 30)
            await pilot.pause(0.2)
            app.redraw()
            await pilot.pause()
            after = "\n".join(_assert_inert(screen) for screen in app.screen_stack)
            # Shown, inert; the modal wraps to its content's width, so the body's escapes may
            # start a new line after "boom".
            assert "HTTP 500" in after and "boom" in after and "\\x1b]0;PWNED" in after
            await pilot.press("question_mark")
            await pilot.pause()
            _assert_inert(app.screen)
            app.pop_screen()
            app.action_sources()
            await pilot.pause()
            assert isinstance(app.screen, TextModal)
            _assert_inert(app.screen)


async def test_a_50mb_metrics_is_refused_and_the_app_stays_responsive(tmp_path: Path) -> None:
    with hostile_server("huge-metrics") as server:
        app = _app(server.url, tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await _wait(pilot, lambda: "answer too large" in app.model.connection, 20)
            app.redraw()
            await pilot.pause()
            shown = _assert_inert(app.screen)
            assert "answer too large" in shown
            # Keys are handled at once while the scrapes go on being refused.
            for want in (True, False, True):
                t = time.monotonic()
                await pilot.press("p")
                await _wait(pilot, _paused_is(app, want), 1.0)
                assert time.monotonic() - t < 1.0
            t = time.monotonic()
        assert time.monotonic() - t < 2.0  # leaving does not wait on the scrape
