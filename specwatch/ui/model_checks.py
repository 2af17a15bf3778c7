"""Checks on what reaches the UI model: a malformed window or tick is refused, never drawn."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuTick
    from specwatch.core.server import LatencyBucket, MetricsWindow

WINDOW_NUMBERS = (
    "t",
    "dt",
    "gen_tok_s",
    "accept_length",
    "draft_acceptance_rate",
    "step_latency_s",
    "step_latency_p50_s",
    "step_latency_p90_s",
    "step_latency_p99_s",
    "lifetime_accept_length",
    "lifetime_acceptance_rate",
    "prompt_tok_s",
    "requests_per_s",
    "kv_cache_usage",
    "prefix_cache_hit_rate",
    "preemptions_per_s",
    "preemptions_total",
)
SAMPLE_NUMBERS = (
    "sm_clock_mhz",
    "mem_clock_mhz",
    "temp_c",
    "hbm_temp_c",
    "power_w",
    "pstate",
    "clock_event_reasons",
    "util_gpu_pct",
    "mem_used_bytes",
    "mem_total_bytes",
    "pcie_gen",
    "pcie_width",
)


def is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_window(w: MetricsWindow) -> None:
    """Refuse a window whose numbers are not numbers (a bad sample is skipped, never drawn).

    Raises:
        ValueError: Naming the first bad field.
    """
    from specwatch.core.server import MetricsWindow  # loaded by then: the first frame is not

    if not isinstance(w, MetricsWindow):
        raise ValueError(f"not a metrics window: {type(w).__name__}")
    for name in WINDOW_NUMBERS:
        v = getattr(w, name)
        if v is not None and not is_number(v):
            raise ValueError(f"metrics window {name}={v!r}")
    for reason, n in w.finished_by_reason.items():
        if not isinstance(reason, str) or not is_number(n):
            raise ValueError(f"metrics window finished_by_reason[{reason!r}]={n!r}")
    for key, buckets in w.latency_buckets.items():
        for b in buckets:
            if not _bucket_ok(b):
                raise ValueError(f"metrics window latency_buckets[{key!r}]={b!r}")
    ctx = w.largest_context
    if ctx is not None and not _bucket_ok(ctx):
        raise ValueError(f"metrics window largest_context={ctx!r}")
    pos = w.per_position_acceptance
    if pos is not None and not all(is_number(p) for p in pos):
        raise ValueError(f"metrics window per_position_acceptance={pos!r}")


def _bucket_ok(b: LatencyBucket) -> bool:
    """A quantile in ``[0, 1]`` and ``(low, high]`` with ``0 <= low <= high`` (``high`` may be
    ``inf``: the overflow bucket)."""
    return (
        isinstance(b.q, int | float)
        and 0.0 <= b.q <= 1.0
        and is_number(b.low)
        and b.low >= 0
        and isinstance(b.high, int | float)
        and b.high >= b.low
    )


def check_tick(tick: GpuTick) -> None:
    """Refuse a GPU tick whose samples are malformed.

    Raises:
        ValueError: Naming the first bad field.
    """
    from specwatch.core.gpu import GpuSample, GpuTick  # as above

    if not isinstance(tick, GpuTick) or not is_number(tick.t):
        raise ValueError("not a GPU tick")
    if not isinstance(tick.samples, tuple | list):
        raise ValueError(f"GPU tick samples={tick.samples!r}")
    for s in tick.samples:
        if not isinstance(s, GpuSample) or not isinstance(s.index, int):
            raise ValueError(f"not a GPU sample: {s!r}")
        for name in SAMPLE_NUMBERS:
            v = getattr(s, name)
            if v is not None and not is_number(v):
                raise ValueError(f"GPU {s.index} {name}={v!r}")
