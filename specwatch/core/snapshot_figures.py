"""What the verdict rule reads from a snapshot: the slowest GPU's clock, load, accept length.

:func:`figures` turns a :class:`~specwatch.core.snapshot_records.Snapshot` into the
:class:`~specwatch.core.judge.Figures` that :func:`specwatch.core.judge.judge` compares, the
same inputs a live verdict gives it from a window of readings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from specwatch.core import gpu as rules
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.judge import Figures
from specwatch.core.launch_config import server_launch_config
from specwatch.core.snapshot_records import Snapshot


def run_tok_s(snap: Snapshot) -> list[float]:
    """Per-run tok/s of a snapshot (runs without a figure are skipped)."""
    return snap.run_tok_s


def straggler_clock(snap: Snapshot) -> tuple[float | None, int | None]:
    """Mean SM clock of the pace-setting GPU, weighted by run wall time, and the straggler.

    The clock is that of the slowest busy GPU of each run (``rules.slowest``: with one GPU,
    that GPU); the index is the GPU most often named straggler (``rules.straggler``, the
    rule the live pane marks), ``None`` when no run had one. Why the slowest GPU and not the
    mean: in tensor parallelism every step ends in an all-reduce, so each rank waits for the
    last one; the step runs at the pace of the slowest GPU, and one hot board drags the whole
    server down while the average looks healthy.
    """
    total, weight = 0.0, 0.0
    who: Counter[int] = Counter()
    for run in snap.runs:
        pace = rules.pace_of_summaries(run.gpus)
        slow = rules.slowest(pace)
        w = run.wall_s or 1.0
        if slow is None or w <= 0:
            continue
        total += slow.sm_clock_mhz * w
        weight += w
        lag = rules.straggler(pace)
        if lag is not None:
            who[lag] += 1
    if weight > 0:
        return total / weight, who.most_common(1)[0][0] if who else None
    pace = rules.pace_of_summaries(snap.overall_gpus)
    slow = rules.slowest(pace)
    if slow is not None:
        return slow.sm_clock_mhz, rules.straggler(pace)
    return None, None


def overall_gpus(snap: Snapshot) -> list[GpuRunSummary]:
    """The busy GPUs over all runs (each run's GPUs when there is no overall summary)."""
    gpus = rules.busy_summaries(snap.overall_gpus)
    if gpus:
        return gpus
    # No overall summary (older or partial snapshot): use every run's GPUs.
    return rules.busy_summaries(g for r in snap.runs for g in r.gpus)


def figures(snap: Snapshot) -> Figures:
    """The figures of a snapshot that the verdict rule compares."""
    clock, _ = straggler_clock(snap)
    busy = overall_gpus(snap)
    pace = rules.slowest(rules.pace_of_summaries(busy))
    slow = next((g for g in busy if pace is not None and g.index == pace.index), None)
    reasons = frozenset(
        name
        for g in busy
        for name, fraction in g.reason_fractions.items()
        if fraction > 0 and name not in rules.IDLE_REASONS
    )
    return Figures(
        tok_s=tuple(snap.run_tok_s),
        slowest_sm_clock_mhz=clock,
        board_max_sm_clock_mhz=(
            float(slow.board_max_sm_clock_mhz)
            if slow is not None and slow.board_max_sm_clock_mhz
            else None
        ),
        clock_reasons=reasons,
        slowest_mem_clock_mhz=min(
            (g.mem_clock_mean_mhz for g in busy if g.mem_clock_mean_mhz is not None), default=None
        ),
        dram_active=_mean([g.dram_active_mean for g in busy if g.dram_active_mean is not None]),
        dram_per_token=dram_per_token_of(busy, snap.run_tok_s),
        running_requests=snap.overall.running_requests.mean,
        prompt_tok_s=snap.overall.prompt_tok_s.mean,
        accept_length=snap.accept_length,
        host=snap.host_cpu,
        launch=server_launch_config(snap.server),
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def dram_per_token_of(busy: list[GpuRunSummary], tok_s: Sequence[float]) -> float | None:
    """``Σ dram_active × memory clock / tok/s`` (:mod:`specwatch.core.memory_bound`): ``None``
    unless every busy GPU has both readings."""
    rate = _mean(list(tok_s))
    moved = [
        (g.dram_active_mean, g.mem_clock_mean_mhz)
        for g in busy
        if g.dram_active_mean is not None and g.mem_clock_mean_mhz is not None
    ]
    if not busy or len(moved) != len(busy) or not rate:
        return None
    return sum(d * m for d, m in moved) / rate


__all__ = ["dram_per_token_of", "figures", "overall_gpus", "run_tok_s", "straggler_clock"]
