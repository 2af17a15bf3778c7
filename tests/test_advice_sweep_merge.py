"""Live advice with a sweep beside it: measured points next to predicted ones, and the measured
best draft length in place of the model's where the sweep can rank a batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specwatch.bench.snapshot import load_snapshot
from specwatch.core.advice_sweep import measured_lines, merge_sweep
from specwatch.core.draft_advisor import PlainBaseline, advise
from specwatch.core.draft_sweep import Sweep, sweep
from tests.test_advise_cli import _run, record_windows
from tests.test_advise_sweep import write_snap
from tests.test_draft_advisor import VLLM, _window

WINDOWS = [_window(float(t)) for t in range(5)]
"""Batch 4, K=3, a 20 ms step against a 10 ms plain one: the model keeps k=3 (best k=2)."""
PLAIN = PlainBaseline({4: 0.010}, "test")


def _sweep(tmp_path: Path, cells: list[tuple[int, list[float], int, float]]) -> Sweep:
    snaps = []
    for k, tok_s, batch, clock in cells:
        name = f"k{k}-c{batch}.json"
        path = write_snap(tmp_path / name, k, tok_s, concurrency=batch, clock=clock)
        snaps.append((name, load_snapshot(path)))
    return sweep(snaps)


def test_measured_points_sit_beside_the_predicted_ones_and_replace_the_model(
    tmp_path: Path,
) -> None:
    advice = advise(WINDOWS, VLLM, PLAIN)
    assert advice.bins[0].advised_k == 3
    s = _sweep(
        tmp_path,
        [
            (0, [400.0, 401.0, 399.0], 4, 1980.0),
            (1, [560.0, 561.0, 559.0], 4, 1980.0),
            (3, [480.0, 481.0, 479.0], 4, 1980.0),
        ],
    )
    swept = merge_sweep(advice, s)
    points = {p.k: p for p in swept.points}
    assert set(points) == {0, 1, 3}
    # the live prediction at each measured (batch, k): the model's at k=1, observed at K=3
    assert points[1].predicted is not None and points[1].modelled is True
    assert points[1].predicted.value == pytest.approx(advice.bins[0].options[1].tok_s.value)
    assert points[3].modelled is False and points[1].measured.mean == pytest.approx(560.0)
    # the sweep ranks batch 4 (alike GPUs): its best replaces the model's, and the
    # recommendation is written again from it
    assert swept.advice.bins[0].advised_k == 1
    assert swept.changes == ("batch 4: measured best k=1 replaces the model's k=3",)
    assert swept.advice.recommendation is not None
    assert "num_speculative_tokens" in swept.advice.recommendation
    assert swept.advice.recommendation != advice.recommendation
    text = "\n".join(measured_lines(swept))
    assert "predicted (live)" in text and "k1-c4.json" in text and "560" in text


def test_a_batch_the_sweep_cannot_rank_keeps_the_model_and_says_why(tmp_path: Path) -> None:
    advice = advise(WINDOWS, VLLM, PLAIN)
    s = _sweep(
        tmp_path,
        [(1, [560.0, 561.0, 559.0], 4, 1980.0), (3, [480.0, 481.0, 479.0], 4, 1600.0)],
    )
    swept = merge_sweep(advice, s)
    assert swept.advice.bins[0].advised_k == 3
    assert swept.advice.recommendation == advice.recommendation
    (line,) = swept.changes
    assert line.startswith("batch 4: the sweep cannot rank it (") and "different clocks" in line
    assert line.endswith("the model stands")


def test_a_measurement_within_noise_of_the_models_choice_keeps_it(tmp_path: Path) -> None:
    advice = advise(WINDOWS, VLLM, PLAIN)
    s = _sweep(
        tmp_path,
        [(2, [500.0, 530.0, 470.0], 4, 1980.0), (3, [498.0, 528.0, 468.0], 4, 1980.0)],
    )
    swept = merge_sweep(advice, s)
    assert swept.advice.bins[0].advised_k == 3
    assert swept.changes == ("batch 4: the sweep agrees with the model's k=3 (measured best k=2)",)


def test_advise_sweep_option_prints_both_and_puts_them_in_the_json(tmp_path: Path) -> None:
    rec = record_windows(tmp_path / "spec.sqlite", VLLM, WINDOWS)
    a = write_snap(tmp_path / "k1.json", 1, [560.0, 561.0, 559.0], concurrency=4)
    b = write_snap(tmp_path / "k3.json", 3, [480.0, 481.0, 479.0], concurrency=4)
    argv = [str(rec), "--baseline-itl", "10", "--sweep", str(a), str(b)]
    code, out, err = _run(argv)
    assert code == 0, err
    assert "the sweep beside the live prediction, tok/s" in out
    assert "batch 4: measured best k=1 replaces the model's k=3" in out
    code, out, _ = _run([*argv, "--json"])
    doc = json.loads(out)
    assert [p["k"] for p in doc["sweep"]["points"]] == [1, 3]
    assert doc["sweep"]["points"][0]["measured"]["mean"] == pytest.approx(560.0)
    assert doc["advice"]["bins"][0]["advised_k"] == 1


def test_an_unreadable_sweep_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    rec = record_windows(tmp_path / "spec.sqlite", VLLM, WINDOWS)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, _, err = _run([str(rec), "--baseline-itl", "10", "--sweep", str(bad)])
    assert code == 2 and err.startswith("specwatch advise: ")
