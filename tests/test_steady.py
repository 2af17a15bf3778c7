"""The steady-state gate: slopes and thresholds, and story (d): a benchmark started on cold GPUs
without --steady is flagged in its snapshot and by compare; --steady waits (within its limit)."""

from __future__ import annotations

import io
from pathlib import Path

from specwatch.bench.snapshot import read_snapshot
from specwatch.commands.main import build_parser
from specwatch.core.compare import compare
from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.core.snapshot_records import Snapshot
from specwatch.core.steady import (
    TEMP_SLOPE_C_S,
    first_steady,
    is_steady,
    steady_note,
    window_slopes,
)


def _ticks(temps: list[float], dt: float = 1.0, sm: int = 1980) -> list[GpuTick]:
    return [
        GpuTick(
            t=k * dt,
            wall_time=0.0,
            samples=(GpuSample(0, k * dt, sm_clock_mhz=sm, mem_clock_mhz=2619, temp_c=round(v)),),
            cost_ms=0.0,
        )
        for k, v in enumerate(temps)
    ]


def test_flat_readings_over_a_covered_window_are_steady() -> None:
    ticks = _ticks([60.0] * 12)
    slopes = window_slopes(ticks, 11.0)
    assert slopes is not None and slopes.under and is_steady(slopes) is True
    assert first_steady(ticks, 0.0) == 8.0  # the first tick with 80% of the window covered


def test_heating_is_not_steady_however_short_the_readings() -> None:
    ticks = _ticks([35.0, 38.0, 41.0, 44.0], dt=0.5)
    slopes = window_slopes(ticks, 1.5)
    assert slopes is not None and slopes.temp_c_s is not None
    assert slopes.temp_c_s > TEMP_SLOPE_C_S and is_steady(slopes) is False
    assert first_steady(ticks, 0.0) is None


def test_flat_but_short_is_unknown() -> None:
    assert is_steady(window_slopes(_ticks([60.0] * 3), 2.0)) is None
    assert is_steady(None) is None


def _bench(tmp_path: Path, *extra: str) -> tuple[Path, str]:
    out = tmp_path / "snaps"
    before = set(out.glob("*.json")) if out.exists() else set()
    argv = ["bench", "-n", "3", "--max-tokens", "256", "--out", str(out), "--gpu-interval", "0.2"]
    argv += ["--demo-step-factor", "0.3", *extra]
    from specwatch.commands.bench import run_bench

    stdout = io.StringIO()
    code = run_bench(build_parser().parse_args(argv), argv=argv, stdout=stdout, stderr=stdout)
    assert code == 0, stdout.getvalue()
    (new,) = set(out.glob("*.json")) - before
    return new, stdout.getvalue()


def test_story_d_cold_gpus_without_steady_are_flagged(tmp_path: Path) -> None:
    hot_path, _ = _bench(tmp_path, "--demo", "hot", "--steady", "--steady-window", "1")
    cold_path, text = _bench(tmp_path, "--demo", "warming", "--steady-window", "2")
    assert "Clocks unlocked: boost follows temperature" in text
    assert "GPU steady state:" in text
    hot = Snapshot.from_dict(read_snapshot(hot_path))
    cold = Snapshot.from_dict(read_snapshot(cold_path))
    assert hot.steady is not None and hot.steady.reached is True and hot.steady.waited
    assert cold.steady is not None and cold.steady.reached is False
    assert cold.steady.drift_temp_c is not None and cold.steady.drift_temp_c > 1
    c = compare(hot, cold)
    assert any(n.startswith("B was measured before the GPUs were steady") for n in c.notes)
    assert steady_note("A", hot.steady) is None


def test_steady_waits_then_gives_up_at_its_limit(tmp_path: Path) -> None:
    path, text = _bench(
        tmp_path, "--demo", "warming", "--steady", "--steady-window", "30", "--steady-limit", "1"
    )
    assert "GPU steady state: NOT reached within 1 s; measuring anyway" in text
    snap = Snapshot.from_dict(read_snapshot(path))
    assert snap.steady is not None and snap.steady.waited and snap.steady.reached is False
