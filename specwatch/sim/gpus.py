"""Simulated GPUs: a small thermal and power model, integrated lazily as time passes.

Temperature follows power with a thermal time constant; the boost clock falls as the
temperature rises; the power cap and thermal slowdown lower the clock and set the matching
clock-event reason bits. The model is deterministic for a given seed and clock.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, replace

from specwatch.core import gpu as R

_SUBSTEP_S = 0.25


@dataclass(frozen=True, slots=True)
class SimGpuSpec:
    """Static description of one simulated board."""

    name: str = "Simulated H100 80GB HBM3"
    max_sm_clock_mhz: int = 1980
    idle_sm_clock_mhz: int = 345
    max_mem_clock_mhz: int = 2619
    power_limit_w: float = 700.0
    idle_power_w: float = 70.0
    dynamic_power_w: float = 690.0
    """Power at full load and full clock, above idle (so a busy GPU presses on the limit)."""
    mem_total_bytes: int = 80 * 1024**3
    max_pcie_gen: int = 5
    max_pcie_width: int = 16
    ambient_c: float = 30.0
    thermal_resistance_c_per_w: float = 0.075
    thermal_tau_s: float = 90.0
    boost_knee_c: float = 55.0
    """Above this temperature the boost clock falls by ``boost_slope_mhz_per_c``."""
    boost_slope_mhz_per_c: float = 9.0
    slowdown_temp_c: int = 87
    shutdown_temp_c: int = 92
    hbm_offset_c: float = 6.0
    memory_bound_share: float = 0.0
    """Share of a decode step spent waiting on HBM, which follows the memory clock (0: the step
    follows the SM clock alone, as in the story)."""


@dataclass(frozen=True, slots=True)
class SimGpuState:
    """One simulated GPU as NVML would report it right now."""

    index: int
    uuid: str
    pci_bus_id: str
    sm_clock_mhz: int
    mem_clock_mhz: int
    temp_c: float
    hbm_temp_c: float
    power_w: float
    energy_j: float
    pstate: int
    reasons: int
    util_gpu_pct: int
    util_mem_pct: int
    mem_used_bytes: int
    pcie_gen: int
    pcie_width: int
    power_violation_ns: int
    thermal_violation_ns: int
    lost: bool
    dram_active: float = 0.0
    """Share of time HBM was busy: the memory-bound share of a step, stretched or shrunk by how
    the clocks pace it (``DCGM_FI_PROF_DRAM_ACTIVE``)."""
    dram_busy_s: float = 0.0
    """Seconds of ``dram_active`` accumulated: the counter GPM samples take deltas of."""
    tensor_active: float = 0.0
    """Share of time the tensor pipes were busy: the compute share of a step, paced by the
    clocks as ``dram_active`` is (``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``)."""


class SimGpu:
    """One board's evolving state. Use through ``SimGpus``; not thread-safe alone."""

    def __init__(self, index: int, spec: SimGpuSpec, rng: random.Random) -> None:
        self.index = index
        self.spec = spec
        # Boards differ a little: one runs hotter than its neighbours, as real ones do.
        self.r_th = spec.thermal_resistance_c_per_w * rng.uniform(0.94, 1.08)
        self.uuid = f"GPU-5a1d{index:04x}-{rng.getrandbits(32):08x}-sim"
        self.pci_bus_id = f"00000000:{0x18 + index * 0x10:02X}:00.0"
        self.temp_c = spec.ambient_c + 2.0
        self.energy_j = rng.uniform(1e6, 5e6)
        self.load = 0.0
        self.mem_used_bytes = 600 * 1024**2
        self.power_limit_w = spec.power_limit_w
        self.link: tuple[int, int] | None = None
        """Forced (gen, width) for a degraded link; ``None`` for a healthy one."""
        self.pinned_temp_c: float | None = None
        self.mem_clock_cap_mhz: int | None = None
        """A lowered memory clock (a power cap on boards that cut HBM clocks under it)."""
        self.app_clocks_mhz: tuple[int, int] | None = None
        """Application (SM, memory) clocks set below the defaults (the maxima); ``None``:
        untouched. Only the policy reads report it: the simulated boost ignores it."""
        self.lost = False
        self.power_violation_ns = 0
        self.thermal_violation_ns = 0
        self.dram_busy_s = 0.0

    def _operating_point(self) -> tuple[float, float, int]:
        """(sm clock MHz, power W, reason bits) at the current temperature and load."""
        s = self.spec
        bits = 0
        if self.load <= 0.0:
            return float(s.idle_sm_clock_mhz), s.idle_power_w, R.BY_BIT[0x001].bit
        clock = float(s.max_sm_clock_mhz)
        if self.temp_c > s.boost_knee_c:
            clock -= s.boost_slope_mhz_per_c * (self.temp_c - s.boost_knee_c)
        if self.temp_c >= s.slowdown_temp_c:
            clock = min(clock, 0.7 * s.max_sm_clock_mhz)
            bits |= 0x020
        power = s.idle_power_w + self.load * s.dynamic_power_w * (clock / s.max_sm_clock_mhz) ** 3
        if power > self.power_limit_w:
            ratio = (self.power_limit_w - s.idle_power_w) / (self.load * s.dynamic_power_w)
            clock = s.max_sm_clock_mhz * max(ratio, 0.05) ** (1.0 / 3.0)
            power = self.power_limit_w
            bits |= 0x004
        clock = max(clock, float(s.idle_sm_clock_mhz))
        return clock, power, bits

    def mem_clock(self) -> int:
        """The memory clock under load, MHz."""
        cap = self.mem_clock_cap_mhz
        return self.spec.max_mem_clock_mhz if cap is None else min(cap, self.spec.max_mem_clock_mhz)

    def integrate(self, dt: float) -> None:
        """Advance temperature, energy and violation counters by ``dt`` seconds."""
        if self.lost or dt <= 0:
            return
        clock, power, bits = self._operating_point()
        self.energy_j += power * dt
        if self.load > 0.0:
            self.dram_busy_s += self._dram_active(clock) * dt
        if bits & 0x004:
            self.power_violation_ns += int(dt * 1e9)
        if bits & 0x020:
            self.thermal_violation_ns += int(dt * 1e9)
        if self.pinned_temp_c is not None:
            self.temp_c = self.pinned_temp_c
            return
        target = self.spec.ambient_c + self.r_th * power
        alpha = min(1.0, dt / self.spec.thermal_tau_s)
        self.temp_c += (target - self.temp_c) * alpha

    def state(self) -> SimGpuState:
        """The board as NVML would read it now."""
        s = self.spec
        clock, power, bits = self._operating_point()
        busy = self.load > 0.0
        gen, width = self.link or ((s.max_pcie_gen if busy else 1), s.max_pcie_width)
        return SimGpuState(
            index=self.index,
            uuid=self.uuid,
            pci_bus_id=self.pci_bus_id,
            sm_clock_mhz=round(clock),
            mem_clock_mhz=self.mem_clock() if busy else 1593,
            temp_c=self.temp_c,
            hbm_temp_c=self.temp_c + s.hbm_offset_c * (1.0 + self.load),
            power_w=power,
            energy_j=self.energy_j,
            pstate=0 if busy else 8,
            reasons=bits,
            util_gpu_pct=round(100 * self.load),
            util_mem_pct=round(55 * self.load),
            mem_used_bytes=self.mem_used_bytes,
            pcie_gen=gen,
            pcie_width=width,
            power_violation_ns=self.power_violation_ns,
            thermal_violation_ns=self.thermal_violation_ns,
            lost=self.lost,
            dram_active=self._dram_active(clock) if busy else 0.0,
            dram_busy_s=self.dram_busy_s,
            tensor_active=self._tensor_active(clock) if busy else 0.0,
        )

    def _dram_active(self, clock: float) -> float:
        """The same bytes each step over a step whose length follows both clocks: ``m`` at full
        clocks, less when a slower SM clock stretches the step, more when HBM runs slower."""
        s = self.spec
        m = s.memory_bound_share
        mem = s.max_mem_clock_mhz / self.mem_clock()
        pace = (1 - m) * s.max_sm_clock_mhz / clock + m * mem
        return min(1.0, self.load * m * mem / pace)

    def _tensor_active(self, clock: float) -> float:
        """The compute part of the same step: ``1 − m`` at full clocks, more of the step when a
        slower SM clock stretches it."""
        s = self.spec
        m = s.memory_bound_share
        sm = s.max_sm_clock_mhz / clock
        pace = (1 - m) * sm + m * s.max_mem_clock_mhz / self.mem_clock()
        return min(1.0, self.load * (1 - m) * sm / pace)


class SimGpus:
    """A box of simulated GPUs sharing one clock. Thread-safe.

    The engine calls ``advance_to(t, load)`` as it runs; readers call ``states(t)``.
    """

    def __init__(
        self,
        count: int = 8,
        spec: SimGpuSpec | None = None,
        seed: int = 0,
        start_t: float = 0.0,
    ) -> None:
        self.spec = spec or SimGpuSpec()
        rng = random.Random(seed)
        self.gpus = [SimGpu(i, self.spec, rng) for i in range(count)]
        self._t = start_t
        self._lock = threading.RLock()
        self._states: list[SimGpuState] | None = None
        """The boards' states as of the last change (``None``: something changed since)."""
        self.changes = 0
        """Counts changes of the boards (time moving on, a knob turned): a cheap "anything new?"."""

    def __len__(self) -> int:
        return len(self.gpus)

    def advance_to(self, t: float, load: float | None = None) -> None:
        """Integrate up to ``t``; then, if given, set the load (0..1) that applies from ``t``."""
        with self._lock:
            if self._t < t:
                self._changed()
            while self._t < t:
                dt = min(_SUBSTEP_S, t - self._t)
                for g in self.gpus:
                    g.integrate(dt)
                self._t += dt
            if load is not None:
                load = max(0.0, min(1.0, load))
                for g in self.gpus:
                    if g.load != load:
                        g.load = load
                        self._changed()

    def states(self, t: float | None = None) -> list[SimGpuState]:
        """Every board's state, first integrating to ``t`` when given.

        The list is built once per change of the boards (time moving on, a knob turned) and
        shared by the readers until the next change: treat it as read-only.
        """
        with self._lock:
            if t is not None and t > self._t:
                self.advance_to(t)
            states = self._states
            if states is None:
                states = self._states = [g.state() for g in self.gpus]
            return states

    def pace_factor(self) -> float:
        """How much slower than at full boost a tensor-parallel step runs now (>= 1.0).

        The slowest busy GPU sets the pace of a TP step, so this is max clock / min clock.
        """
        with self._lock:
            live = [g for g in self.gpus if not g.lost]
            if not live:
                return 1.0
            top = float(self.spec.max_sm_clock_mhz)
            # Evaluate at load: an idle GPU's idle clock does not pace a step about to run.
            if all(g.load <= 0.0 for g in self.gpus):
                return 1.0
            m = self.spec.memory_bound_share
            top_mem = float(self.spec.max_mem_clock_mhz)
            return max(
                1.0,
                max(
                    (1 - m) * top / g._operating_point()[0] + m * top_mem / g.mem_clock()
                    for g in live
                ),
            )

    # --- knobs for the demo, the tests and fault injection -------------------------------

    def set_temperature(self, temp_c: float, pin: bool = False, index: int | None = None) -> None:
        """Set temperature (optionally held there) on one GPU or all."""
        with self._lock:
            for g in self._select(index):
                g.temp_c = temp_c
                g.pinned_temp_c = temp_c if pin else None

    def set_power_limit(self, watts: float, index: int | None = None) -> None:
        """Set the enforced power limit on one GPU or all."""
        with self._lock:
            for g in self._select(index):
                g.power_limit_w = watts

    def set_memory_clock(self, mhz: int | None, index: int | None = None) -> None:
        """Lower the memory clock under load (``None``: back to the maximum)."""
        with self._lock:
            for g in self._select(index):
                g.mem_clock_cap_mhz = mhz

    def set_app_clocks(self, clocks: tuple[int, int] | None, index: int | None = None) -> None:
        """Set application (SM, memory) clocks, as ``nvidia-smi -ac`` does (``None``: reset)."""
        with self._lock:
            for g in self._select(index):
                g.app_clocks_mhz = clocks

    def set_link(self, gen: int, width: int, index: int | None = None) -> None:
        """Force a degraded PCIe link."""
        with self._lock:
            for g in self._select(index):
                g.link = (gen, width)

    def set_lost(self, index: int, lost: bool = True) -> None:
        """Make a GPU fall off the bus (or come back)."""
        with self._lock:
            self._changed()
            self.gpus[index].lost = lost

    def set_memory_used(self, used_bytes: int) -> None:
        """Set memory in use on every GPU (the model weights and KV cache)."""
        with self._lock:
            self._changed()
            for g in self.gpus:
                g.mem_used_bytes = used_bytes

    def _changed(self) -> None:
        self._states = None
        self.changes += 1

    def _select(self, index: int | None) -> list[SimGpu]:
        self._changed()
        return self.gpus if index is None else [self.gpus[index]]


def with_overrides(spec: SimGpuSpec, **kw: object) -> SimGpuSpec:
    """A copy of ``spec`` with fields replaced (the ``warming`` demo's slower heating)."""
    return replace(spec, **kw)  # type: ignore[arg-type]
