"""Locking the GPU and memory clocks for a benchmark, and putting them back whatever happens.

A locked clock is a driver-level setting that outlives the process that set it (ROCm's CI
learned "always unlock: the lock persists across jobs"). So before locking, what will be
restored is written to a state file; the lock is undone on every way out of ``bench``, and a
state file left by a process that is gone (SIGKILL, power loss) is restored at the next start
or by ``specwatch clocks restore``. NVML cannot read a lock back, so restoring means resetting
the locked clocks; a board whose clocks someone else already pinned is not touched.

The memory clock is locked with the SM clock (a memory-bound decode follows it, and a power cap
can lower it). A board that cannot lock its memory clock (``NOT_SUPPORTED``) keeps the SM lock
and says so; any other refusal undoes everything.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from specwatch.core.clocks import (
    BadState,
    LockedGpu,
    LockState,
    pid_alive,
    read_state,
    state_path,
    write_state,
)
from specwatch.sources.nvml.binding import (
    CLOCK_MEM,
    CLOCK_SM,
    UNSUPPORTED_CODES,
    describe,
    error_code,
)

USER_CLOCKS_BIT = 0x2
"""``nvmlClocksEventReasonApplicationsClocksSetting`` (= ``UserDefinedClocks``): clocks pinned."""


Target = str | int | tuple[int, int]
"""``"base"``, ``"max"``, an SM clock in MHz, or (SM, memory) clocks in MHz."""


class LockError(Exception):
    """A one-line reason the clocks were not locked (nothing was changed)."""


def _mhz(text: str) -> int:
    try:
        mhz = int(text)
    except ValueError:
        raise ValueError(
            f"--lock-clocks takes base, max, MHz or SM,MEMORY MHz, got {text!r}"
        ) from None
    if mhz <= 0:
        raise ValueError(f"--lock-clocks MHz must be positive, got {mhz}")
    return mhz


def parse_target(text: str) -> Target:
    """``"base"``, ``"max"``, an SM clock in MHz or ``"SM,MEMORY"`` in MHz.

    Raises:
        ValueError: Anything else.
    """
    if text in ("base", "max"):
        return text
    sm, comma, mem = text.partition(",")
    if comma:
        return _mhz(sm.strip()), _mhz(mem.strip())
    return _mhz(text)


def privileged(nv: Any) -> bool:
    """Whether this process may set clocks (root; the fake NVML says for itself)."""
    flag = getattr(nv, "privileged", None)
    if isinstance(flag, bool):
        return flag
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _base(nv: Any, handle: Any, clock: int) -> int:
    return int(nv.nvmlDeviceGetDefaultApplicationsClock(handle, clock))


def target_clocks(nv: Any, handle: Any, target: Target) -> tuple[int, int | None]:
    """(SM, memory) MHz ``target`` locks one board at (read-only); memory ``None`` when the
    board gives no clock to lock it at."""
    if isinstance(target, tuple):
        return target
    top = target == "max"
    if top:
        sm = int(nv.nvmlDeviceGetMaxClockInfo(handle, CLOCK_SM))
    else:
        sm = target if isinstance(target, int) else _base(nv, handle, CLOCK_SM)
    try:
        if top:
            return sm, int(nv.nvmlDeviceGetMaxClockInfo(handle, CLOCK_MEM))
        return sm, _base(nv, handle, CLOCK_MEM)
    except Exception as exc:
        if error_code(exc) in UNSUPPORTED_CODES:
            return sm, None
        raise


def _lock_memory(nv: Any, handle: Any, mhz: int | None) -> int | None:
    """Lock one board's memory clock; ``None`` when the board cannot (``NOT_SUPPORTED``)."""
    if mhz is None:
        return None
    try:
        nv.nvmlDeviceSetMemoryLockedClocks(handle, mhz, mhz)
    except Exception as exc:
        if error_code(exc) in UNSUPPORTED_CODES:
            return None
        raise
    return mhz


def lock(nv: Any, target: Target, path: Path, kind: str) -> LockState:
    """Lock every GPU's SM and memory clocks at ``target``; the state file is written first.

    A board that cannot lock its memory clock keeps the SM lock; its record says so
    (``mem_mhz`` ``None``).

    Raises:
        LockError: Not root, a lock already held, a state file that is no record, NVML
            missing, or NVML refused (what was set is undone).
    """
    if not privileged(nv):
        raise LockError(
            "--lock-clocks needs root (a locked clock is a driver-wide setting); nothing changed"
        )
    try:
        held = read_state(path)
    except BadState as exc:
        raise LockError(f"{exc}; nothing changed") from None
    if held is not None and pid_alive(held.pid):
        raise LockError(f"clocks are already locked by specwatch process {held.pid}")
    try:
        nv.nvmlInit()
    except Exception as exc:  # no driver, no library: said in one line, never a traceback
        raise LockError(f"could not lock the clocks: {describe(exc)}; nothing changed") from exc
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
            gpus.append(LockedGpu(index, uuid, *target_clocks(nv, h, target)))
            handles.append(h)
        state = LockState(os.getpid(), kind, tuple(gpus))
        write_state(path, state)
        done: list[LockedGpu] = []
        try:
            for g, h in zip(gpus, handles, strict=True):
                nv.nvmlDeviceSetGpuLockedClocks(h, g.sm_mhz, g.sm_mhz)
                done.append(replace(g, mem_mhz=_lock_memory(nv, h, g.mem_mhz)))
        except Exception as exc:
            restore(nv, state, path, initialized=True)
            raise LockError(f"could not lock the clocks: {describe(exc)}; restored") from exc
        if done != gpus:
            # Some memory clocks could not be locked: the record names only what was.
            state = replace(state, gpus=tuple(done))
            write_state(path, state)
        return state
    except LockError:
        raise
    except Exception as exc:
        raise LockError(f"could not lock the clocks: {describe(exc)}") from exc
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def _reset_memory(nv: Any, handle: Any) -> None:
    try:
        nv.nvmlDeviceResetMemoryLockedClocks(handle)
    except Exception as exc:
        # A board that cannot lock its memory clock had nothing locked to undo.
        if error_code(exc) not in UNSUPPORTED_CODES:
            raise


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
        present: int | None = None
        with contextlib.suppress(Exception):
            present = int(nv.nvmlDeviceGetCount())
        for g in state.gpus:
            if present is not None and not 0 <= g.index < present:
                problems.append(f"GPU {g.index}: not present ({present} GPUs)")
                continue
            try:
                h = nv.nvmlDeviceGetHandleByIndex(g.index)
            except Exception as exc:
                problems.append(f"GPU {g.index}: {describe(exc)}")
                continue
            try:
                nv.nvmlDeviceResetGpuLockedClocks(h)
            except Exception as exc:
                problems.append(f"GPU {g.index}: {describe(exc)}")
            if g.mem_mhz is not None:
                try:
                    _reset_memory(nv, h)
                except Exception as exc:
                    problems.append(f"GPU {g.index} memory clock: {describe(exc)}")
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


def locked_memory_clocks(state: LockState | None) -> dict[int, int]:
    """GPU index -> locked memory clock (MHz), for the GPUs whose memory clock was locked."""
    if state is None:
        return {}
    return {g.index: g.mem_mhz for g in state.gpus if g.mem_mhz is not None}


__all__: Sequence[str] = [
    "USER_CLOCKS_BIT",
    "LockError",
    "LockState",
    "LockedGpu",
    "Target",
    "lock",
    "locked_clocks",
    "locked_memory_clocks",
    "parse_target",
    "pid_alive",
    "privileged",
    "read_state",
    "restore",
    "state_path",
    "target_clocks",
]
