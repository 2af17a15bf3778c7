"""Per-GPU summary of the sampler's ticks over a benchmark run. Pure: no NVML here.

Anything that cannot be computed (no readings, a counter that went backwards) is ``None``;
summarising never raises on missing data.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specwatch.core import reasons as R
from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.gpu_rules import sample_busy

EMPTY_FRACTIONS: Mapping[str, float] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuRunSummary:
    """One GPU over one run (or a whole benchmark); fields with a default may lack in a snapshot."""

    index: int
    name: str | None = None
    sm_clock_mean_mhz: float | None
    sm_clock_min_mhz: int | None = None
    board_max_sm_clock_mhz: int | None = None
    """The board's maximum SM clock (static, from the inventory), for comparison with the mean.
    Snapshots of schema version 1 called it ``sm_clock_max_mhz``."""
    temp_max_c: int | None = None
    hbm_temp_max_c: int | None = None
    power_mean_w: float | None = None
    reason_fractions: Mapping[str, float] = field(default_factory=dict)
    """Fraction of samples (with a known mask) under each clock-event reason, by short name
    (``"pwrcap"``, ``"thermal"``...); reasons never seen are absent."""
    pcie_gen: int | None = None
    """The lowest link generation seen under load (the highest seen when never loaded)."""
    pcie_width: int | None = None
    """The lowest link width seen under load (the highest seen when never loaded)."""
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    energy_j: float | None = None
    """Energy counter delta over the samples (last minus first)."""
    joules_per_token: float | None = None
    """``energy_j / tokens`` for this GPU, when tokens were given."""
    samples: int
    """Samples that carried readings (lost ones excluded)."""
    reason_samples: int = 0
    """Samples whose clock-event mask was known (the denominator of ``reason_fractions``)."""
    lost_samples: int = 0
    """Samples where the GPU was lost (off the bus)."""
    power_violation_s: float | None = None
    """Time spent held by the power policy over the run, from NVML's violation counter."""
    thermal_violation_s: float | None = None
    """Time spent held by the thermal policy over the run."""
    util_mean_pct: float | None = None
    mem_clock_mean_mhz: float | None = None
    """Mean memory clock: what a memory-bound decode follows."""
    dram_active_mean: float | None = None
    """Mean DRAM activity (0-1; dcgm-exporter's ``DCGM_FI_PROF_DRAM_ACTIVE``): the share of a
    step that waits on HBM."""


def summarize_ticks(
    ticks: Sequence[GpuTick], inventory: GpuInventory | None, tokens: int | None = None
) -> tuple[GpuRunSummary, ...]:
    """Summarise each GPU over ``ticks``.

    Args:
        ticks: The sampler's ticks during the run, oldest first.
        inventory: The sampler's inventory (names, maximum clocks and PCIe link).
        tokens: Tokens generated over the run, for joules per token.

    Returns:
        One summary per GPU, by index: the inventory's GPUs plus any index seen only in
        ticks. Empty when NVML was unavailable and no samples exist.
    """
    statics: dict[int, GpuStatic] = {}
    if inventory is not None:
        statics = {g.index: g for g in inventory.gpus}
    by_index: dict[int, list[GpuSample]] = {i: [] for i in statics}
    for tick in ticks:
        for sample in tick.samples:
            by_index.setdefault(sample.index, []).append(sample)
    return tuple(
        _summarize_gpu(index, by_index[index], statics.get(index), tokens)
        for index in sorted(by_index)
    )


def total_joules_per_token(summaries: Sequence[GpuRunSummary], tokens: int | None) -> float | None:
    """Energy of every GPU together per token; ``None`` if any GPU's energy is unknown."""
    if not summaries or not tokens or tokens <= 0:
        return None
    energies = [s.energy_j for s in summaries]
    if any(e is None for e in energies):
        return None
    return sum(e for e in energies if e is not None) / tokens


def _summarize_gpu(
    index: int, samples: list[GpuSample], static: GpuStatic | None, tokens: int | None
) -> GpuRunSummary:
    live = [s for s in samples if not s.lost]
    clocks = [s.sm_clock_mhz for s in live if s.sm_clock_mhz is not None]
    temps = [s.temp_c for s in live if s.temp_c is not None]
    hbm = [s.hbm_temp_c for s in live if s.hbm_temp_c is not None]
    power = [s.power_w for s in live if s.power_w is not None]
    util = [s.util_gpu_pct for s in live if s.util_gpu_pct is not None]
    masks = [s.clock_event_reasons for s in live if s.clock_event_reasons is not None]
    energy = _delta([s.energy_j for s in live])
    gen, width = _pcie_under_load(live)
    power_viol = _delta([s.power_violation_ns for s in live])
    thermal_viol = _delta([s.thermal_violation_ns for s in live])
    per_token = energy / tokens if energy is not None and tokens and tokens > 0 else None
    return GpuRunSummary(
        index=index,
        name=static.name if static else None,
        sm_clock_mean_mhz=_mean(clocks),
        sm_clock_min_mhz=min(clocks) if clocks else None,
        board_max_sm_clock_mhz=static.max_sm_clock_mhz if static else None,
        temp_max_c=max(temps) if temps else None,
        hbm_temp_max_c=max(hbm) if hbm else None,
        power_mean_w=_mean(power),
        reason_fractions=_reason_fractions(masks),
        pcie_gen=gen,
        pcie_width=width,
        pcie_max_gen=static.max_pcie_gen if static else None,
        pcie_max_width=static.max_pcie_width if static else None,
        energy_j=energy,
        joules_per_token=per_token,
        samples=len(live),
        reason_samples=len(masks),
        lost_samples=len(samples) - len(live),
        power_violation_s=power_viol / 1e9 if power_viol is not None else None,
        thermal_violation_s=thermal_viol / 1e9 if thermal_viol is not None else None,
        util_mean_pct=_mean([float(u) for u in util]),
        mem_clock_mean_mhz=_mean([s.mem_clock_mhz for s in live if s.mem_clock_mhz is not None]),
        dram_active_mean=_mean([s.dram_active for s in live if s.dram_active is not None]),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _delta(values: Sequence[float | None]) -> float | None:
    """Growth of a cumulative counter over ``values``; ``None`` with fewer than two readings.

    A step backwards means the counter was reset (driver reload): the growth on either side
    is summed and the interval across the reset is left out.
    """
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return None
    return sum(b - a for a, b in itertools.pairwise(known) if b >= a)


def _reason_fractions(masks: Sequence[int]) -> Mapping[str, float]:
    if not masks:
        return EMPTY_FRACTIONS
    counts: dict[int, int] = {}
    for mask in masks:
        for reason in R.decode(mask):
            counts[reason.bit] = counts.get(reason.bit, 0) + 1
    out: dict[str, float] = {}
    for bit in sorted(counts):
        known = R.BY_BIT.get(bit)
        name = known.short if known else f"{bit:#x}"
        out[name] = counts[bit] / len(masks)
    return out


def _pcie_under_load(samples: Sequence[GpuSample]) -> tuple[int | None, int | None]:
    loaded = [s for s in samples if sample_busy(s)]
    # Idle links drop to gen 1 on many boards: only a loaded link says anything about health.
    pick = min if loaded else max
    pool = loaded or list(samples)
    gens = [s.pcie_gen for s in pool if s.pcie_gen is not None]
    widths = [s.pcie_width for s in pool if s.pcie_width is not None]
    return (pick(gens) if gens else None, pick(widths) if widths else None)
