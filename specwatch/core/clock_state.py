"""The clock-lock state file: which GPUs a ``bench --lock-clocks`` locked, by which process.

Kept apart from the NVML calls (no ``pynvml`` import) so every start can look for a stale file
cheaply.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class LockedGpu:
    """One GPU as locked."""

    index: int
    uuid: str | None
    sm_mhz: int
    mem_mhz: int | None = None
    """The memory clock locked with it; ``None`` where the board cannot lock it (NVML's
    ``NOT_SUPPORTED``). Restoring resets it whenever the record names one."""


@dataclass(frozen=True, slots=True)
class LockState:
    """What the state file holds: who locked which GPUs, through which NVML."""

    pid: int
    nvml: str
    """``"nvml"`` (the driver) or ``"sim"`` (the demo's fake NVML: never touches real GPUs)."""
    gpus: tuple[LockedGpu, ...]


def state_path() -> Path:
    """``$XDG_STATE_HOME/specwatch/clock-lock.json`` (``~/.local/state`` by default)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "specwatch" / "clock-lock.json"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(path: Path) -> LockState | None:
    """The state file's content (``None`` when there is none or it is unreadable)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        gpus = tuple(
            LockedGpu(
                int(g["index"]),
                g.get("uuid"),
                int(g["sm_mhz"]),
                None if g.get("mem_mhz") is None else int(g["mem_mhz"]),
            )
            for g in raw["gpus"]
        )
        return LockState(int(raw["pid"]), str(raw["nvml"]), gpus)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(path: Path, state: LockState) -> None:
    """Write ``state`` atomically (complete or absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".clock-lock.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(state), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


__all__ = ["LockState", "LockedGpu", "pid_alive", "read_state", "state_path", "write_state"]
