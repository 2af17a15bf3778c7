"""Per-GPU summary of the sampler's ticks over a benchmark run. Pure: no NVML here.

Anything that cannot be computed (no readings, a counter that went backwards) is ``None``;
summarising never raises on missing data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from specwatch.core import gpu as R
from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick, sample_busy

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
    tensor_active_mean: float | None = None
    """Mean tensor-pipe activity (0-1; ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``)."""


def summarize_ticks(
    ticks: Iterable[GpuTick], inventory: GpuInventory | None, tokens: int | None = None
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
    summary = TickSummary()
    for tick in ticks:
        summary.add(tick)
    return summary.result(inventory, tokens)


class TickSummary:
    """:func:`summarize_ticks` taken one tick at a time, in memory that does not grow with the
    ticks (a recording's range of days is summarised as it is read)."""

    def __init__(self) -> None:
        self._gpus: dict[int, _GpuFigures] = {}

    def add(self, tick: GpuTick) -> None:
        """Take one tick (oldest first)."""
        for sample in tick.samples:
            figures = self._gpus.get(sample.index)
            if figures is None:
                figures = self._gpus[sample.index] = _GpuFigures()
            figures.add(sample)

    def result(
        self, inventory: GpuInventory | None, tokens: int | None = None
    ) -> tuple[GpuRunSummary, ...]:
        """One summary per GPU, as :func:`summarize_ticks` gives it."""
        statics: dict[int, GpuStatic] = {}
        if inventory is not None:
            statics = {g.index: g for g in inventory.gpus}
        indexes = sorted(set(statics) | set(self._gpus))
        return tuple(
            self._gpus.get(i, _GpuFigures()).summary(i, statics.get(i), tokens) for i in indexes
        )


class _Mean:
    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.total: float = 0
        self.n = 0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total += value
            self.n += 1

    def value(self) -> float | None:
        return self.total / self.n if self.n else None


class _Growth:
    """Growth of a cumulative counter; ``None`` with fewer than two readings. A step backwards
    means the counter was reset (driver reload): the growth on either side is summed and the
    interval across the reset is left out."""

    __slots__ = ("known", "last", "total")

    def __init__(self) -> None:
        self.total: float = 0
        self.last: float | None = None
        self.known = 0

    def add(self, value: float | None) -> None:
        if value is None:
            return
        if self.last is not None and value >= self.last:
            self.total += value - self.last
        self.last = value
        self.known += 1

    def value(self) -> float | None:
        return self.total if self.known >= 2 else None


class _GpuFigures:
    """One GPU's running figures (what :class:`GpuRunSummary` is made of)."""

    def __init__(self) -> None:
        self.samples = self.live = self.masks = 0
        self.clock, self.power, self.util, self.mem_clock = _Mean(), _Mean(), _Mean(), _Mean()
        self.dram_active = _Mean()
        self.tensor_active = _Mean()
        self.clock_min: int | None = None
        self.temp_max: int | None = None
        self.hbm_max: int | None = None
        self.reason_counts: dict[int, int] = {}
        self.energy, self.power_viol, self.thermal_viol = _Growth(), _Growth(), _Growth()
        # Idle links drop to gen 1 on many boards: only a loaded link says anything about health.
        self.loaded = False
        self.link_loaded: list[int | None] = [None, None]
        self.link_any: list[int | None] = [None, None]

    def add(self, s: GpuSample) -> None:
        self.samples += 1
        if s.lost:
            return
        self.live += 1
        if s.sm_clock_mhz is not None:
            self.clock.add(s.sm_clock_mhz)
            self.clock_min = _lower(self.clock_min, s.sm_clock_mhz)
        self.temp_max = _higher(self.temp_max, s.temp_c)
        self.hbm_max = _higher(self.hbm_max, s.hbm_temp_c)
        self.power.add(s.power_w)
        self.util.add(None if s.util_gpu_pct is None else float(s.util_gpu_pct))
        self.mem_clock.add(s.mem_clock_mhz)
        self.dram_active.add(s.dram_active)
        self.tensor_active.add(s.tensor_active)
        if s.clock_event_reasons is not None:
            self.masks += 1
            for reason in R.decode(s.clock_event_reasons):
                self.reason_counts[reason.bit] = self.reason_counts.get(reason.bit, 0) + 1
        self.energy.add(s.energy_j)
        self.power_viol.add(s.power_violation_ns)
        self.thermal_viol.add(s.thermal_violation_ns)
        busy = sample_busy(s)
        self.loaded |= busy
        for i, v in enumerate((s.pcie_gen, s.pcie_width)):
            self.link_any[i] = _higher(self.link_any[i], v)
            if busy:
                self.link_loaded[i] = _lower(self.link_loaded[i], v)

    def summary(self, index: int, static: GpuStatic | None, tokens: int | None) -> GpuRunSummary:
        energy = self.energy.value()
        per_token = energy / tokens if energy is not None and tokens and tokens > 0 else None
        power_viol, thermal_viol = self.power_viol.value(), self.thermal_viol.value()
        gen, width = self.link_loaded if self.loaded else self.link_any
        return GpuRunSummary(
            index=index,
            name=static.name if static else None,
            sm_clock_mean_mhz=self.clock.value(),
            sm_clock_min_mhz=self.clock_min,
            board_max_sm_clock_mhz=static.max_sm_clock_mhz if static else None,
            temp_max_c=self.temp_max,
            hbm_temp_max_c=self.hbm_max,
            power_mean_w=self.power.value(),
            reason_fractions=self._reason_fractions(),
            pcie_gen=gen,
            pcie_width=width,
            pcie_max_gen=static.max_pcie_gen if static else None,
            pcie_max_width=static.max_pcie_width if static else None,
            energy_j=energy,
            joules_per_token=per_token,
            samples=self.live,
            reason_samples=self.masks,
            lost_samples=self.samples - self.live,
            power_violation_s=power_viol / 1e9 if power_viol is not None else None,
            thermal_violation_s=thermal_viol / 1e9 if thermal_viol is not None else None,
            util_mean_pct=self.util.value(),
            mem_clock_mean_mhz=self.mem_clock.value(),
            dram_active_mean=self.dram_active.value(),
            tensor_active_mean=self.tensor_active.value(),
        )

    def _reason_fractions(self) -> Mapping[str, float]:
        if not self.masks:
            return EMPTY_FRACTIONS
        out: dict[str, float] = {}
        for bit in sorted(self.reason_counts):
            known = R.BY_BIT.get(bit)
            name = known.short if known else f"{bit:#x}"
            out[name] = self.reason_counts[bit] / self.masks
        return out


def _lower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _higher(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
