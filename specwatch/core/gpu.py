"""A GPU: its samples (what the NVML sampler, dcgm-exporter or the simulator produce) and the
rules every judgement about a GPU reads.

Every reading that can be missing is ``None`` with the reason in ``missing[field_name]``.
Reasons start with ``"n/s"`` (the board or driver does not support the field; it will not be
asked again) or ``"N/A"`` (a transient error this tick).

The rules are the one home for every judgement made about a GPU, so the live pane, the
benchmark's run summaries, the runner and ``compare`` never disagree (they once held two
straggler rules and four busy rules): busy, straggler, clock deficit, link degraded, near the
power limit, and the clock-event (throttle) reason bits they read, with their short names. Pure
functions over :class:`GpuSample` (one GPU at one tick) and
:class:`~specwatch.core.gpu_summary.GpuRunSummary` (one GPU over a run, read through the
:class:`RunPace` protocol so that this module stays below the summary, which uses its busy rule).

The rules:

- **Busy.** A sample is busy unless a reading says it is idle: the clock-event mask when known
  (``GpuIdle`` is the driver's own word that the clocks are low for lack of work), else GPU
  utilisation (``0%`` is idle), else the P-state (anything but P0 is idle). A run summary is
  busy when it has a clock reading and was idle at most half the run: a GPU idle longer was not
  part of the work (not in the server's tensor-parallel group).
- **Straggler.** Among the busy GPUs with a clock reading (lost ones excluded), the one with the
  lowest SM clock, the hottest among equal clocks. In tensor parallelism every step ends in an
  all-reduce, so the slowest rank sets the pace. There is no straggler with fewer than two such
  GPUs (nothing to lag behind), or when two or more tie for worst (marking one of them would be
  an arbitrary pick).
- **Clock deficit.** How far below the board's maximum SM clock a clock is, as a fraction.
- **Link degraded.** A PCIe link narrower than its maximum always is; a lower generation only
  under load (an idle link dropping to gen 1 saves power).
- **Near the power limit.** Drawing at least 97% of the enforced limit.
- **Busy held.** On screen, an idle sample within :data:`BUSY_HOLD_S` of a busy one is not the
  GPU's state: under load a sampler lands between batches now and then, and one idle frame
  (``P8 … 0% … idle`` with requests running) is a blink, not a change. The last busy sample
  stands in until the GPU has been idle that long.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """Driver-wide facts, read once."""

    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    """CUDA driver version as ``"12.8"``."""


@dataclass(frozen=True, slots=True)
class GpuStatic:
    """Per-GPU facts read once (or rarely)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    max_pcie_gen: int | None = None
    max_pcie_width: int | None = None
    slowdown_temp_c: int | None = None
    shutdown_temp_c: int | None = None
    persistence_mode: bool | None = None
    power_default_limit_w: float | None = None
    power_limit_w: float | None = None
    """Enforced power limit."""
    app_sm_clock_mhz: int | None = None
    """Application clock, if one is set."""
    app_mem_clock_mhz: int | None = None
    default_app_sm_clock_mhz: int | None = None
    """The board's default application clocks (what ``nvidia-smi -rac`` restores)."""
    default_app_mem_clock_mhz: int | None = None
    locked_sm_clock_mhz: int | None = None
    """Locked GPU clock; NVML cannot read these back, so only set when specwatch locked them."""
    locked_mem_clock_mhz: int | None = None
    missing: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one tick."""

    index: int
    t: float
    """Monotonic seconds (the sampler's clock)."""
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temp_c: int | None = None
    hbm_temp_c: int | None = None
    power_w: float | None = None
    energy_j: float | None = None
    """Energy counter since driver load, joules."""
    pstate: int | None = None
    clock_event_reasons: int | None = None
    """Bitmask of ``nvmlClocksEventReason*`` bits; decode with :func:`decode`."""
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    power_violation_ns: int | None = None
    thermal_violation_ns: int | None = None
    fan_pct: int | None = None
    dram_active: float | None = None
    """Share of time the HBM interface was busy (0-1): achieved bandwidth against the board's
    peak (DCGM's ``DCGM_FI_PROF_DRAM_ACTIVE``). Near 1 under decode: tokens wait on memory."""
    tensor_active: float | None = None
    """Share of cycles a tensor pipe was active (0-1; DCGM's
    ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``): the compute side of a step."""
    lost: bool = False
    """The GPU fell off the bus (``NVML_ERROR_GPU_IS_LOST``); all readings are ``None``."""
    missing: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuOrigin:
    """Where a session's GPU readings come from, for the pane to say (remote sources only)."""

    source: str
    """``"nvml"`` (this machine) or ``"dcgm"`` (dcgm-exporter over HTTP)."""
    nodes: tuple[str | None, ...] = ()
    """The node of each GPU, by index."""
    not_exported: tuple[str, ...] = ()
    """``GpuSample``/``GpuStatic`` fields the exporter does not send (for any GPU), sorted."""
    collection_interval_s: float | None = None
    """The exporter's inferred collection interval, when coarser than the view."""
    view_interval_s: float | None = None
    """The sampling interval of the view, next to the collection interval."""


@dataclass(frozen=True, slots=True)
class GpuInventory:
    """What the sampler found at start-up."""

    available: bool
    reason: str | None = None
    """Why there are no GPUs (e.g. ``"NVML unavailable: NVML Shared Library Not Found"``)."""
    system: SystemInfo = field(default_factory=SystemInfo)
    gpus: tuple[GpuStatic, ...] = ()
    origin: GpuOrigin | None = None
    """Set by a remote source's session adapter (``None``: the local NVML)."""


@dataclass(frozen=True, slots=True)
class GpuTick:
    """All GPUs at one tick, plus what the tick cost the monitor."""

    t: float
    """Monotonic seconds."""
    wall_time: float
    """Unix seconds."""
    samples: tuple[GpuSample, ...]
    cost_ms: float
    """Wall milliseconds the sampler spent in NVML for this tick."""
    error: str | None = None


# --- the clock-event (throttle) reason bits the rules read, and their short names -----------


@dataclass(frozen=True, slots=True)
class Reason:
    """One clock-event reason bit."""

    bit: int
    name: str
    short: str
    meaning: str
    harmful: bool
    """Whether the reason lowers clocks under load (idle and display settings do not)."""


IDLE_BIT = 0x001
"""``GpuIdle``: the clocks are low because the GPU has no work."""

REASONS: tuple[Reason, ...] = (
    Reason(IDLE_BIT, "GpuIdle", "idle", "idle: harmless", False),
    Reason(0x002, "ApplicationsClocksSetting", "appclk", "capped by application clocks", True),
    Reason(0x004, "SwPowerCap", "pwrcap", "at the power limit: clocks reduced", True),
    Reason(0x008, "HwSlowdown", "hwslow", "hardware slowdown (power brake or thermal)", True),
    Reason(0x010, "SyncBoost", "sync", "held down to match its sync-boost group", True),
    Reason(0x020, "SwThermalSlowdown", "thermal", "driver thermal slowdown: too hot", True),
    Reason(0x040, "HwThermalSlowdown", "hwtherm", "hardware thermal slowdown: far too hot", True),
    Reason(0x080, "HwPowerBrakeSlowdown", "brake", "external power brake", True),
    Reason(0x100, "DisplayClockSetting", "display", "display clock setting", False),
    Reason(0x200, "BoardLimit", "board", "board limit", True),
    Reason(0x400, "Reliability", "reliab", "reliability limit", True),
)

BY_BIT: dict[int, Reason] = {r.bit: r for r in REASONS}


def decode(mask: int | None) -> tuple[Reason, ...]:
    """Return the reasons set in ``mask`` (unknown bits are returned as ``bit0x...``)."""
    if not mask:
        return ()
    out: list[Reason] = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            out.append(BY_BIT.get(bit) or Reason(bit, f"bit{bit:#x}", f"{bit:#x}", "unknown", True))
        bit <<= 1
    return tuple(out)


def short_names(mask: int | None) -> str:
    """Short words for the active reasons, e.g. ``"pwrcap thermal"``; ``""`` when none."""
    return " ".join(r.short for r in decode(mask))


def harmful(mask: int | None) -> bool:
    """Whether any reason that lowers clocks under load is set."""
    return any(r.harmful for r in decode(mask))


BUSY_IDLE_FRACTION = 0.5
"""A GPU idle for more than this fraction of a run was not part of the work."""
IDLE_REASONS = ("idle", "GpuIdle")
"""Names of the idle clock-event reason in a summary's ``reason_fractions``."""
NEAR_POWER_LIMIT = 0.97
"""Drawing at least this share of the enforced power limit counts as at the limit."""
BUSY_HOLD_S = 3.0
"""An idle spell shorter than this after a busy sample is shown as the busy sample."""


class RunPace(Protocol):
    """What the run rules read of one GPU over a run (a ``GpuRunSummary``)."""

    @property
    def index(self) -> int: ...
    @property
    def sm_clock_mean_mhz(self) -> float | None: ...
    @property
    def temp_max_c(self) -> int | None: ...
    @property
    def reason_fractions(self) -> Mapping[str, float]: ...


R = TypeVar("R", bound=RunPace)


@dataclass(frozen=True, slots=True)
class PaceReading:
    """What the straggler rule looks at for one GPU: its SM clock and temperature."""

    index: int
    sm_clock_mhz: float
    temp_c: float | None


def sample_busy(s: GpuSample) -> bool:
    """Whether a GPU was working at this tick (busy unless a reading says idle)."""
    if s.lost:
        return False
    if s.clock_event_reasons is not None:
        return not s.clock_event_reasons & IDLE_BIT
    if s.util_gpu_pct is not None:
        return s.util_gpu_pct > 0
    if s.pstate is not None:
        return s.pstate == 0
    return True


def held_busy(
    latest: GpuSample, last_busy: GpuSample | None, hold_s: float = BUSY_HOLD_S
) -> GpuSample:
    """The sample to show for a GPU: ``last_busy`` while ``latest`` is a short idle spell.

    A lost GPU is never held: falling off the bus is news at once.
    """
    if latest.lost or sample_busy(latest) or last_busy is None:
        return latest
    return last_busy if latest.t - last_busy.t < hold_s else latest


def idle_fraction(fractions: Mapping[str, float]) -> float:
    """Share of a run's samples under the idle clock-event reason."""
    return max((fractions.get(k) or 0.0) for k in IDLE_REASONS)


def summary_busy(g: RunPace) -> bool:
    """Whether a GPU worked during a run: a clock reading, idle at most half the time."""
    return (
        g.sm_clock_mean_mhz is not None and idle_fraction(g.reason_fractions) <= BUSY_IDLE_FRACTION
    )


def busy_summaries(gpus: Iterable[R]) -> list[R]:
    """The GPUs of a run that worked (see :func:`summary_busy`)."""
    return [g for g in gpus if summary_busy(g)]


def pace_of_samples(samples: Iterable[GpuSample]) -> list[PaceReading]:
    """Straggler candidates at one tick: busy GPUs with an SM clock reading."""
    return [
        PaceReading(s.index, float(s.sm_clock_mhz), None if s.temp_c is None else float(s.temp_c))
        for s in samples
        if s.sm_clock_mhz is not None and sample_busy(s)
    ]


def pace_of_summaries(gpus: Iterable[RunPace]) -> list[PaceReading]:
    """Straggler candidates over a run: busy GPUs, by mean SM clock and hottest reading."""
    return [
        PaceReading(
            g.index,
            g.sm_clock_mean_mhz,
            None if g.temp_max_c is None else float(g.temp_max_c),
        )
        for g in busy_summaries(gpus)
        if g.sm_clock_mean_mhz is not None
    ]


def _pace_key(r: PaceReading) -> tuple[float, float]:
    return (r.sm_clock_mhz, -(r.temp_c if r.temp_c is not None else -1e9))


def slowest(readings: Iterable[PaceReading]) -> PaceReading | None:
    """The reading that sets the pace (lowest clock, then hottest); ``None`` when empty.

    Unlike :func:`straggler` this answers with a single GPU too: its clock still sets the pace.
    """
    return min(readings, key=_pace_key, default=None)


def straggler(readings: Iterable[PaceReading]) -> int | None:
    """Index of the GPU that lags behind the others, or ``None`` (see the module docstring)."""
    pool = list(readings)
    if len(pool) < 2:
        return None
    worst = min(pool, key=_pace_key)
    if sum(1 for r in pool if _pace_key(r) == _pace_key(worst)) > 1:
        return None
    return worst.index


def sample_straggler(samples: Iterable[GpuSample]) -> int | None:
    """The straggler among one tick's samples."""
    return straggler(pace_of_samples(samples))


def clock_fraction(clock_mhz: float | None, max_mhz: float | None) -> float | None:
    """``clock / max``: 1.0 at the board maximum; ``None`` when either is unknown."""
    if clock_mhz is None or not max_mhz:
        return None
    return clock_mhz / max_mhz


def clock_deficit(clock_mhz: float | None, max_mhz: float | None) -> float | None:
    """How far below the board maximum a clock is, as a fraction (0.0 at the maximum)."""
    frac = clock_fraction(clock_mhz, max_mhz)
    return None if frac is None else 1.0 - frac


def link_degraded(
    gen: int | None,
    width: int | None,
    max_gen: int | None,
    max_width: int | None,
    busy: bool,
) -> bool:
    """Whether a PCIe link runs below its maximum in a way that matters (see the module doc)."""
    narrow = width is not None and max_width is not None and width < max_width
    slow = busy and gen is not None and max_gen is not None and gen < max_gen
    return narrow or slow


def near_power_limit(power_w: float | None, limit_w: float | None) -> bool:
    """Whether a GPU draws at least :data:`NEAR_POWER_LIMIT` of its enforced limit."""
    return power_w is not None and bool(limit_w) and power_w >= NEAR_POWER_LIMIT * (limit_w or 0.0)


__all__ = [
    "BUSY_HOLD_S",
    "BUSY_IDLE_FRACTION",
    "BY_BIT",
    "IDLE_BIT",
    "IDLE_REASONS",
    "NEAR_POWER_LIMIT",
    "REASONS",
    "PaceReading",
    "Reason",
    "busy_summaries",
    "clock_deficit",
    "clock_fraction",
    "decode",
    "harmful",
    "held_busy",
    "idle_fraction",
    "link_degraded",
    "near_power_limit",
    "pace_of_samples",
    "pace_of_summaries",
    "sample_busy",
    "sample_straggler",
    "short_names",
    "slowest",
    "straggler",
    "summary_busy",
]
