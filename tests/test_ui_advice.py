"""The draft advisor's view in the TUI (``a``): the core's advice on the session's windows."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from specwatch.bench.snapshot import load_snapshot
from specwatch.core.draft_advisor import advice_lines, advise, flat_baseline
from specwatch.core.draft_sweep import sweep
from specwatch.core.server import LatencyBucket, MetricsWindow
from specwatch.ui.advice_view import NO_BASELINE, advice_body
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.help_text import KEYS
from specwatch.ui.modals import TextModal
from specwatch.ui.model import ADVICE_WINDOWS, MonitorModel
from specwatch.ui.settings import AppSettings
from tests.advisor_sim import held_batch_windows, info_of, true_step_s, vllm_config
from tests.test_advise_sweep import write_snap

CHAIN: dict[str, Any] = {"num_steps": 3, "num_draft_tokens": 3, "acceptance": (0.8, 0.6, 0.45)}
COST: dict[str, Any] = {"base_step_ms": 11.0, "draft_ms_per_token": 1.0, "plain_step_ms": 10.0}
CONFIG = vllm_config(**CHAIN, **COST)
PLAIN_MS = true_step_s(CONFIG, 2, 0) * 1000.0


def _windows() -> list[MetricsWindow]:
    return held_batch_windows(CONFIG, [2], windows_per_batch=6, window_s=1.0)


def _model(baseline_ms: float | None) -> MonitorModel:
    model = MonitorModel(baseline_ms, "--baseline-itl" if baseline_ms else "")
    model.server = info_of(CONFIG)
    for w in _windows():
        model.add_window(w)
    return model


def _app(model: MonitorModel) -> SpecwatchApp:
    return SpecwatchApp(AppSettings(watch_terminal=False, live_cpu=False), model=model)


async def test_the_a_key_opens_the_advice_on_the_sessions_windows() -> None:
    app = _app(_model(PLAIN_MS))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        assert app.screen.title_text == "draft advisor"
        body = app.screen.body
        windows = _windows()
        expected = advise(windows, info_of(CONFIG), flat_baseline(PLAIN_MS, windows))
        assert expected.recommendation == "keep num_speculative_tokens=3"
        assert advice_lines(expected)[0] in body.splitlines()
        assert "plain step from --baseline-itl" in body
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TextModal)


async def test_without_a_baseline_the_view_says_the_advice_is_withheld() -> None:
    app = _app(_model(None))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        lines = app.screen.body.splitlines()
        assert lines[1] == NO_BASELINE and lines[2].startswith("no recommendation")


def test_before_any_window_the_view_says_so_and_the_key_is_in_the_help() -> None:
    assert advice_body(None, _windows(), PLAIN_MS) == "no server detected yet"
    assert advice_body(info_of(CONFIG), (), PLAIN_MS) == "no /metrics window yet"
    assert any(key == "a" and "draft advisor" in what for key, what in KEYS)


def test_the_model_keeps_a_bounded_history_of_windows() -> None:
    model = MonitorModel()
    w = _windows()[0]
    for i in range(ADVICE_WINDOWS + 5):
        model.add_window(MetricsWindow(t=w.t + i, dt=1.0))
    assert len(model.windows) == ADVICE_WINDOWS and model.windows[0].t == w.t + 5


def test_the_history_keeps_what_the_advice_reads_and_the_panes_the_newest_window_whole() -> None:
    model = MonitorModel()
    bucket = LatencyBucket(0.5, 0.01, 0.02)
    full = [
        dataclasses.replace(
            w, latency_buckets={"step": (bucket,)}, latency_cdf={"ttft": ((0.5, 3.0), (1.0, 4.0))}
        )
        for w in _windows()
    ]
    for w in full:
        model.add_window(w)
    kept = tuple(model.windows)
    assert all((k.latency_buckets, k.latency_cdf) == ({}, {}) for k in kept)
    assert [dataclasses.replace(k, latency_buckets={}, latency_cdf={}) for k in full] == list(kept)
    body = advice_body(info_of(CONFIG), kept, PLAIN_MS)
    assert body == advice_body(info_of(CONFIG), tuple(full), PLAIN_MS)
    assert "k=" in body  # a recommendation, not a "not yet"
    assert model.window is full[-1] and model.window.latency_buckets["step"] == (bucket,)


async def test_with_a_sweep_the_view_shows_the_measured_points_beside_the_predicted(
    tmp_path: Path,
) -> None:
    # at batch 2 the sweep measured k=1 well above k=3: it replaces the model's k=3
    snaps = [
        (name, load_snapshot(write_snap(tmp_path / name, k, tok_s, concurrency=2)))
        for name, k, tok_s in (
            ("k1-c2.json", 1, [190.0, 191.0, 189.0]),
            ("k3-c2.json", 3, [150.0, 151.0, 149.0]),
        )
    ]
    settings = AppSettings(watch_terminal=False, live_cpu=False, sweep=sweep(snaps))
    app = SpecwatchApp(settings, model=_model(PLAIN_MS))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, TextModal)
        lines = app.screen.body.splitlines()
    assert lines[1] == (
        "recommendation (vllm): --speculative-config '{\"num_speculative_tokens\": 1}' (add "
        "your method and model keys; the server's command line was not readable)"
    )
    assert "the sweep beside the live prediction, tok/s" in lines
    (row,) = [line for line in lines if line.endswith("k1-c2.json")]
    assert row.split()[:2] == ["2", "1"] and "model" in row and "190" in row
    assert "batch 2: measured best k=1 replaces the model's k=3" in lines
