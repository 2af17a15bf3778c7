"""Synthetic session events for recording tests: a steady box whose SM clock drops at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo, SpecConfig
from specwatch.record import Recorder
from specwatch.session import events as ev
from specwatch.sources.http.endpoint import Endpoint

WALL0 = 1_796_130_000.0
"""2026-12-01 (UTC afternoon): the wall time of session time 0."""
MAX_CLOCK = 1980
SECRET = "sk-test-DO-NOT-STORE-4242"


def inventory(limit_w: float = 700.0) -> GpuInventory:
    """Two GPUs."""
    gpus = tuple(
        GpuStatic(i, name="H100", max_sm_clock_mhz=MAX_CLOCK, power_limit_w=limit_w)
        for i in range(2)
    )
    return GpuInventory(available=True, gpus=gpus)


def tick(t: float, clock: int) -> GpuTick:
    """Both GPUs busy at ``clock`` MHz."""
    samples = tuple(
        GpuSample(
            i,
            t,
            sm_clock_mhz=clock,
            temp_c=60,
            power_w=500.0,
            util_gpu_pct=95,
            clock_event_reasons=0 if clock >= MAX_CLOCK else 0x04,
            energy_j=1000.0 + 500 * t,
        )
        for i in range(2)
    )
    return GpuTick(t, WALL0 + t, samples, 0.3)


def window(t: float, tok_s: float) -> MetricsWindow:
    """A one-second window at ``tok_s`` with two requests running."""
    return MetricsWindow(
        t,
        1.0,
        gen_tok_s=tok_s,
        accept_length=2.5,
        requests_running=2.0,
        step_latency_s=0.02,
        sources={"gen_tok_s": "Δtokens / Δt"},
    )


def story(seconds: int = 600, drop_at: float = 300.0) -> Iterator[ev.SessionEvent]:
    """Ready, inventory, then a tick and a window every second; clocks sag at ``drop_at``."""
    info = ServerInfo(
        "http://gpu-box:30000",
        Dialect.SGLANG,
        "0.5.0",
        "llama",
        SpecConfig(True, "EAGLE3", 3, 4),
        True,
    )
    yield ev.ServerReady(0.0, info)
    yield ev.GpuInventoryChanged(inventory())
    for s in range(1, seconds + 1):
        t = float(s)
        slow = t >= drop_at
        yield ev.GpuTicked(tick(t, 1600 if slow else MAX_CLOCK))
        yield ev.MetricsScraped(window(t, (73.0 if slow else 90.0) + (s % 3) * 0.5))


def record_story(
    path: Path,
    events: Iterator[ev.SessionEvent | tuple[float, ev.SessionEvent]] | None = None,
    **kw: Any,
) -> Recorder:
    """Record ``events`` (default :func:`story`) through a real recorder; returns it, stopped.

    An event is recorded at its own ``t``, else at the previous one's; ``(t, event)`` records it
    at ``t``.
    """
    now = [0.0]
    rec = Recorder(
        path,
        [Endpoint("http://gpu-box:30000", SECRET)],
        clock=lambda: now[0],
        wall_clock=lambda: WALL0 + now[0],
        flush_s=3600.0,
        **kw,
    )
    rec.start()
    for i, item in enumerate(events if events is not None else story()):
        if isinstance(item, tuple):
            now[0], e = item
        else:
            e = item
            now[0] = getattr(e, "t", now[0])
        rec(e)
        if i % 100 == 99:
            rec.flush()
    rec.stop()
    return rec
