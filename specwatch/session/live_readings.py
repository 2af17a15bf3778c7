"""What the live verdict keeps of the session's readings: tok/s intervals and GPU points, and
the figures of a span of them (:class:`~specwatch.core.judge.Figures`, the rule's input)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specwatch.core import gpu_rules, reasons

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuTick
    from specwatch.core.judge import Figures

POOL_S = 3.0
"""tok/s samples are pooled over this many seconds of consecutive intervals: a scrape's exact
moment jitters against the counters it reads, and the jitter cancels inside a pool."""
MIN_INTERVALS = 5
"""Pooled tok/s samples with traffic a window needs before it is judged."""


@dataclass(frozen=True, slots=True)
class Interval:
    """One metrics interval: tok/s and the load beside it."""

    t: float
    dt: float
    tok_s: float
    running: float | None
    prompt_tok_s: float | None
    accept_length: float | None


@dataclass(frozen=True, slots=True)
class GpuPoint:
    """One GPU tick as the verdict reads it: the pace of the busy GPUs."""

    t: float
    clock_mhz: float | None
    max_mhz: float | None
    reasons: frozenset[str]
    mem_clock_mhz: float | None = None
    dram_active: float | None = None
    """Mean DRAM activity of the busy GPUs."""
    dram_mhz: float | None = None
    """``Σ dram_active × memory clock`` over the busy GPUs (bytes per second, up to the bus
    width); ``None`` unless every busy GPU has both."""


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pool(intervals: list[Interval]) -> list[float]:
    """tok/s over consecutive runs of intervals spanning at least :data:`POOL_S` each."""
    out: list[float] = []
    tokens = span = 0.0
    for i in intervals:
        tokens += i.tok_s * i.dt
        span += i.dt
        if span >= POOL_S:
            out.append(tokens / span)
            tokens = span = 0.0
    if span >= POOL_S / 2:
        out.append(tokens / span)
    return out


def gpu_point(tick: GpuTick, max_clock: Mapping[int, float]) -> GpuPoint:
    """One GPU tick: the slowest busy GPU's clock (and its board's maximum in ``max_clock``),
    the busy GPUs' lowest memory clock, their DRAM activity and their active reasons."""
    busy = [s for s in tick.samples if gpu_rules.sample_busy(s)]
    slow = gpu_rules.slowest(gpu_rules.pace_of_samples(busy))
    active = frozenset(
        r.short
        for s in busy
        for r in reasons.decode(s.clock_event_reasons)
        if r.bit != reasons.IDLE_BIT
    )
    clock = slow.sm_clock_mhz if slow is not None else None
    top = max_clock.get(slow.index) if slow is not None else None
    # A memory-bound decode waits on the slowest HBM, whichever board that is.
    mem = min((s.mem_clock_mhz for s in busy if s.mem_clock_mhz is not None), default=None)
    drams = [(s.dram_active, s.mem_clock_mhz) for s in busy if s.dram_active is not None]
    dram = _mean([d for d, _ in drams])
    moved = None
    if busy and len(drams) == len(busy) and all(m is not None for _, m in drams):
        moved = sum(d * (m or 0) for d, m in drams)
    return GpuPoint(tick.t, clock, top, active, mem, dram, moved)


def span_figures(
    intervals: Iterable[Interval], gpus: Iterable[GpuPoint], t0: float, t1: float
) -> Figures | None:
    """The figures of ``(t0, t1]``; ``None`` with fewer than MIN_INTERVALS with traffic."""
    from specwatch.core.judge import Figures

    iv = [i for i in intervals if t0 < i.t <= t1]
    pooled = _pool(iv)
    if sum(1 for x in pooled if x > 0) < MIN_INTERVALS:
        return None
    gp = [g for g in gpus if t0 < g.t <= t1]
    clocks = [g.clock_mhz for g in gp if g.clock_mhz is not None]
    tops = [g.max_mhz for g in gp if g.max_mhz is not None]
    mems = [g.mem_clock_mhz for g in gp if g.mem_clock_mhz is not None]
    moved = _mean([g.dram_mhz for g in gp if g.dram_mhz is not None])
    rate = sum(pooled) / len(pooled)
    active: frozenset[str] = frozenset().union(*(g.reasons for g in gp))
    return Figures(
        tok_s=tuple(pooled),
        slowest_sm_clock_mhz=_mean(clocks),
        board_max_sm_clock_mhz=max(tops) if tops else None,
        clock_reasons=active,
        running_requests=_mean([i.running for i in iv if i.running is not None]),
        prompt_tok_s=_mean([i.prompt_tok_s for i in iv if i.prompt_tok_s is not None]),
        accept_length=_mean([i.accept_length for i in iv if i.accept_length is not None]),
        slowest_mem_clock_mhz=_mean(mems),
        dram_active=_mean([g.dram_active for g in gp if g.dram_active is not None]),
        dram_per_token=moved / rate if moved is not None and rate > 0 else None,
    )


__all__ = ["MIN_INTERVALS", "POOL_S", "GpuPoint", "Interval", "gpu_point", "span_figures"]
