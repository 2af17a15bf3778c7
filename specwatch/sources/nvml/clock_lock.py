"""Locking the GPU clock for a benchmark, and putting it back whatever happens.

A locked clock is a driver-level setting that outlives the process that set it (ROCm's CI
learned "always unlock: the lock persists across jobs"). So before locking, what will be
restored is written to a state file; the lock is undone on every way out of ``bench``, and a
state file left by a process that is gone (SIGKILL, power loss) is restored at the next start
or by ``specwatch clocks restore``. NVML cannot read a lock back, so restoring means resetting
the locked clocks; a board whose clocks someone else already pinned is not touched.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specwatch.core.clock_state import (
    LockedGpu,
    LockState,
    pid_alive,
    read_state,
    state_path,
    write_state,
)
from specwatch.sources.nvml.binding import CLOCK_SM, describe

USER_CLOCKS_BIT = 0x2
"""``nvmlClocksEventReasonApplicationsClocksSetting`` (= ``UserDefinedClocks``): clocks pinned."""


class LockError(Exception):
    """A one-line reason the clocks were not locked (nothing was changed)."""


def parse_target(text: str) -> str | int:
    """``"base"``, ``"max"`` or a clock in MHz.

    Raises:
        ValueError: Anything else.
    """
    if text in ("base", "max"):
        return text
    try:
        mhz = int(text)
    except ValueError:
        raise ValueError(f"--lock-clocks takes base, max or MHz, got {text!r}") from None
    if mhz <= 0:
        raise ValueError(f"--lock-clocks MHz must be positive, got {mhz}")
    return mhz


def privileged(nv: Any) -> bool:
    """Whether this process may set clocks (root; the fake NVML says for itself)."""
    flag = getattr(nv, "privileged", None)
    if isinstance(flag, bool):
        return flag
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _target_mhz(nv: Any, handle: Any, target: str | int) -> int:
    if isinstance(target, int):
        return target
    if target == "max":
        return int(nv.nvmlDeviceGetMaxClockInfo(handle, CLOCK_SM))
    return int(nv.nvmlDeviceGetDefaultApplicationsClock(handle, CLOCK_SM))


def lock(nv: Any, target: str | int, path: Path, kind: str) -> LockState:
    """Lock every GPU's SM clock at ``target``; the state file is written first.

    Raises:
        LockError: Not root, a lock already held, or NVML refused (what was set is undone).
    """
    if not privileged(nv):
        raise LockError(
            "--lock-clocks needs root (a locked clock is a driver-wide setting); nothing changed"
        )
    held = read_state(path)
    if held is not None and pid_alive(held.pid):
        raise LockError(f"clocks are already locked by specwatch process {held.pid}")
    nv.nvmlInit()
    try:
        gpus: list[LockedGpu] = []
        handles = []
        for index in range(int(nv.nvmlDeviceGetCount())):
            h = nv.nvmlDeviceGetHandleByIndex(index)
            reasons = 0
            with contextlib.suppress(Exception):
                reasons = int(nv.nvmlDeviceGetCurrentClocksEventReasons(h))
            if reasons & USER_CLOCKS_BIT:
                raise LockError(f"GPU {index}'s clocks are already pinned; not touching them")
            uuid = None
            with contextlib.suppress(Exception):
                uuid = str(nv.nvmlDeviceGetUUID(h))
            gpus.append(LockedGpu(index, uuid, _target_mhz(nv, h, target)))
            handles.append(h)
        state = LockState(os.getpid(), kind, tuple(gpus))
        write_state(path, state)
        try:
            for g, h in zip(gpus, handles, strict=True):
                nv.nvmlDeviceSetGpuLockedClocks(h, g.sm_mhz, g.sm_mhz)
        except Exception as exc:
            restore(nv, state, path, initialized=True)
            raise LockError(f"could not lock the clocks: {describe(exc)}; restored") from exc
        return state
    except LockError:
        raise
    except Exception as exc:
        raise LockError(f"could not lock the clocks: {describe(exc)}") from exc
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def restore(nv: Any, state: LockState, path: Path, *, initialized: bool = False) -> list[str]:
    """Reset the locked clocks of ``state``'s GPUs; remove the state file when all succeeded.

    Returns:
        One line per GPU that could not be restored (empty: all done).
    """
    problems: list[str] = []
    if not initialized:
        try:
            nv.nvmlInit()
        except Exception as exc:
            return [f"NVML unavailable: {describe(exc)}"]
    try:
        for g in state.gpus:
            try:
                h = nv.nvmlDeviceGetHandleByIndex(g.index)
                nv.nvmlDeviceResetGpuLockedClocks(h)
            except Exception as exc:
                problems.append(f"GPU {g.index}: {describe(exc)}")
    finally:
        if not initialized:
            with contextlib.suppress(Exception):
                nv.nvmlShutdown()
    if not problems:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return problems


def locked_clocks(state: LockState | None) -> dict[int, int]:
    """GPU index -> locked SM clock (MHz)."""
    return {} if state is None else {g.index: g.sm_mhz for g in state.gpus}


__all__: Sequence[str] = [
    "USER_CLOCKS_BIT",
    "LockError",
    "LockState",
    "LockedGpu",
    "lock",
    "locked_clocks",
    "parse_target",
    "pid_alive",
    "privileged",
    "read_state",
    "restore",
    "state_path",
]
