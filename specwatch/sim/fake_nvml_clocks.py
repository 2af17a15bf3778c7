"""The clock-policy part of the fake NVML: persistence, application and locked clocks, limits.

Reads answer like a board nobody has tuned (application clocks at their defaults, nothing
locked, persistence on); ``policy_supported = False`` makes every policy read
``NOT_SUPPORTED``, as on consumer boards. The set and reset calls need ``privileged`` (else
``NO_PERMISSION``, as NVML answers a non-root caller) and are recorded in ``clock_calls`` and,
when ``SPECWATCH_FAKE_NVML_LEDGER`` names a file, appended to it as JSON lines, so a test can
see what a killed process did and what the next one restored.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from specwatch.sources.nvml import binding as N

if TYPE_CHECKING:
    from specwatch.sim.gpus import SimGpus, SimGpuState

LEDGER_ENV = "SPECWATCH_FAKE_NVML_LEDGER"
"""A file the fake appends each set/reset call to (one JSON list per line)."""
ROOT_ENV = "SPECWATCH_FAKE_NVML_ROOT"
"""``"1"``: the fake lets this process set clocks (as root may on a real driver)."""


class FakeClockPolicy:
    """Mixed into ``FakeNvml``: the clock-policy reads and the clock set/reset calls."""

    if TYPE_CHECKING:
        gpus: SimGpus

        def _device(self, function: str, handle: Any) -> SimGpuState: ...

    policy_supported: bool = True
    """False: every policy read raises ``NOT_SUPPORTED``."""

    @property
    def privileged(self) -> bool:
        """Whether set calls succeed (``SPECWATCH_FAKE_NVML_ROOT=1``, or set by a test)."""
        return bool(self.__dict__.get("_privileged", os.environ.get(ROOT_ENV) == "1"))

    @privileged.setter
    def privileged(self, value: bool) -> None:
        self.__dict__["_privileged"] = value

    @property
    def clock_calls(self) -> list[tuple[Any, ...]]:
        """Every set/reset call made: ``(function, gpu index, *arguments)``."""
        calls: list[tuple[Any, ...]] = self.__dict__.setdefault("_clock_calls", [])
        return calls

    @property
    def locked(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(GPU index, clock type) -> (min, max) MHz currently locked."""
        out: dict[tuple[int, int], tuple[int, int]] = self.__dict__.setdefault("_locked", {})
        return out

    def _policy(self, function: str, handle: Any) -> SimGpuState:
        state = self._device(function, handle)
        if not self.policy_supported:
            raise N.nvml_error(N.ERROR_NOT_SUPPORTED)
        return state

    def _max_clock(self, clock_type: int) -> int:
        if clock_type == N.CLOCK_SM:
            return self.gpus.spec.max_sm_clock_mhz
        if clock_type == N.CLOCK_MEM:
            return self.gpus.spec.max_mem_clock_mhz
        raise N.nvml_error(N.ERROR_INVALID_ARGUMENT)

    def _record(self, function: str, index: int, *args: int) -> None:
        self.clock_calls.append((function, index, *args))
        ledger = os.environ.get(LEDGER_ENV)
        if ledger:
            with open(ledger, "a", encoding="utf-8") as f:
                f.write(json.dumps([function, index, *args, os.getpid()]) + "\n")

    def _setter(self, function: str, handle: Any) -> int:
        state = self._policy(function, handle)
        if not self.privileged:
            raise N.nvml_error(N.ERROR_NO_PERMISSION)
        return state.index

    # --- reads -------------------------------------------------------------------------

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        """Persistence mode (1: enabled)."""
        self._policy("nvmlDeviceGetPersistenceMode", handle)
        return 1

    def nvmlDeviceGetApplicationsClock(self, handle: Any, clock_type: int) -> int:
        """Application clock, MHz (the maximum, as on a board nobody has tuned, unless
        ``SimGpus.set_app_clocks`` set one)."""
        state = self._policy("nvmlDeviceGetApplicationsClock", handle)
        top = self._max_clock(clock_type)
        app = self.gpus.gpus[state.index].app_clocks_mhz
        if app is None:
            return top
        return app[0] if clock_type == N.CLOCK_SM else app[1]

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: Any, clock_type: int) -> int:
        """Default application clock, MHz."""
        self._policy("nvmlDeviceGetDefaultApplicationsClock", handle)
        return self._max_clock(clock_type)

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        """The power limit set (follows ``SimGpus.set_power_limit``), mW."""
        state = self._policy("nvmlDeviceGetPowerManagementLimit", handle)
        return int(self.gpus.gpus[state.index].power_limit_w * 1000)

    # --- sets (root only) ----------------------------------------------------------------

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, lo: int, hi: int) -> None:
        """Lock the GPU (SM) clock between ``lo`` and ``hi`` MHz."""
        index = self._setter("nvmlDeviceSetGpuLockedClocks", handle)
        self.locked[(index, N.CLOCK_SM)] = (lo, hi)
        self._record("nvmlDeviceSetGpuLockedClocks", index, lo, hi)

    def nvmlDeviceSetMemoryLockedClocks(self, handle: Any, lo: int, hi: int) -> None:
        """Lock the memory clock between ``lo`` and ``hi`` MHz."""
        index = self._setter("nvmlDeviceSetMemoryLockedClocks", handle)
        self.locked[(index, N.CLOCK_MEM)] = (lo, hi)
        self._record("nvmlDeviceSetMemoryLockedClocks", index, lo, hi)

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:
        """Unlock the GPU clock."""
        index = self._setter("nvmlDeviceResetGpuLockedClocks", handle)
        self.locked.pop((index, N.CLOCK_SM), None)
        self._record("nvmlDeviceResetGpuLockedClocks", index)

    def nvmlDeviceResetMemoryLockedClocks(self, handle: Any) -> None:
        """Unlock the memory clock."""
        index = self._setter("nvmlDeviceResetMemoryLockedClocks", handle)
        self.locked.pop((index, N.CLOCK_MEM), None)
        self._record("nvmlDeviceResetMemoryLockedClocks", index)


__all__ = ["LEDGER_ENV", "ROOT_ENV", "FakeClockPolicy"]
