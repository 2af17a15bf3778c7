"""The benchmark's steady-state gate: judge (or with ``--steady`` wait for) steady GPUs after the
warmups, then record the slopes and drift over the measured runs (``specwatch.core.steady``)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from specwatch.bench.recorders import GpuRecorder
from specwatch.core.gpu import GpuTick
from specwatch.core.snapshot_records import BenchConfig, RunResult
from specwatch.core.steady import (
    Steadiness,
    first_steady,
    is_steady,
    judged_with_runs,
    steady_line,
    window_slopes,
)


class _Benchmark(Protocol):
    """What the gate uses of a running benchmark (``bench.runner``, which calls the gate)."""

    config: BenchConfig
    recorder: GpuRecorder
    cancel: asyncio.Event | None
    clock: Callable[[], float]
    t0: float
    interrupted: bool
    steadiness: Steadiness | None

    def emit(
        self, kind: str, index: int, total: int, message: str, run: RunResult | None = None
    ) -> None: ...

    async def one_run(self, index: int, warmup: bool, max_tokens: int) -> RunResult | None: ...


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def with_drift(s: Steadiness | None, runs: Sequence[RunResult]) -> Steadiness | None:
    """``s`` with the SM clock and temperature drift from the first measured run to the last."""
    if s is None or len(runs) < 2:
        return s
    first, last = runs[0], runs[-1]

    def change(attr: str) -> float | None:
        a = {g.index: getattr(g, attr) for g in first.gpus if getattr(g, attr) is not None}
        b = {g.index: getattr(g, attr) for g in last.gpus if getattr(g, attr) is not None}
        return _mean([float(b[i]) - float(a[i]) for i in a.keys() & b.keys()])

    return dataclasses.replace(
        s, drift_sm_clock_mhz=change("sm_clock_mean_mhz"), drift_temp_c=change("temp_max_c")
    )


def steady_after(
    s: Steadiness | None, t0: float, runs: Sequence[RunResult], ticks: Sequence[GpuTick]
) -> Steadiness | None:
    """The steady-state record with the slopes and drift over the measured runs."""
    if s is None or not runs:
        return s
    start, end = t0 + runs[0].t_start, t0 + runs[-1].t_end
    during = window_slopes(ticks, end, end - start) if end > start else None
    return with_drift(judged_with_runs(s, during), runs)


async def steady_gate(bench: _Benchmark) -> bool:
    """Judge (and with ``config.steady`` wait for) a steady state; False when cancelled.

    While waiting, warmup requests of the measured length keep the GPUs under load; each is
    announced by a ``steady_wait`` event (the progress line), the outcome by a ``steady`` one.
    """
    config, recorder = bench.config, bench.recorder
    window = config.steady_window_s
    started = bench.clock()
    count = 0
    while True:
        now = bench.clock()
        slopes = window_slopes(recorder.ticks(bench.t0, now), now, window)
        steady = is_steady(slopes, window) if recorder.active else None
        waited = now - started
        if not config.steady or not recorder.active or steady is True:
            break
        if waited >= config.steady_limit_s:
            break
        if bench.cancel is not None and bench.cancel.is_set():
            bench.interrupted = True
            return False
        count += 1
        shape = "not enough readings yet" if slopes is None else slopes.text()
        limit = config.steady_limit_s
        bench.emit(
            "steady_wait",
            count,
            0,
            f"Waiting for steady GPUs ({waited:.0f}/{limit:.0f} s): {shape}",
        )
        if await bench.one_run(count, True, config.max_tokens) is None:
            bench.interrupted = True
            return False
    first = first_steady(recorder.ticks(bench.t0, now), bench.t0, window)
    bench.steadiness = Steadiness(
        reached=steady,
        waited=config.steady,
        window_s=window,
        time_to_steady_s=None if first is None else first - bench.t0,
        slopes=slopes,
    )
    bench.emit("steady", 0, 0, steady_line(bench.steadiness, config.steady_limit_s))
    return True


__all__ = ["steady_after", "steady_gate", "with_drift"]
