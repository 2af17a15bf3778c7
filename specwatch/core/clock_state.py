"""The clock-lock state file: which GPUs a ``bench --lock-clocks`` locked, by which process.

Kept apart from the NVML calls (no ``pynvml`` import) so every start can look for a stale file
cheaply.

One process at a time may lock: it holds an exclusive ``flock`` on ``clock-lock.lock`` beside
the state file from before the record is written until the clocks are restored (the record
itself is replaced atomically, so the OS lock sits on a file that stays). A second
``--lock-clocks`` refuses at once, in one line; a record whose writer no longer holds the OS
lock is stale, whatever its pid says now. A record is read only when it is small and sane
(:data:`STATE_LIMIT_BYTES`, at most :data:`MAX_GPUS` GPUs of index below it): a corrupt or
planted one is reported in one line and drives no work.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_LIMIT_BYTES = 64 * 1024
"""Largest state file read (eight GPUs take about 600 bytes)."""
MAX_GPUS = 256
"""GPU indices in a record are below this (and below the GPUs present when restored)."""


class BadState(ValueError):
    """A state file that is unreadable, too large or not a sane record (one line)."""


class LockBusy(Exception):
    """Another process holds the clock lock (one line)."""


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
    """The state file's content (``None`` when there is none).

    Raises:
        BadState: It cannot be read, is over :data:`STATE_LIMIT_BYTES`, or is not a record
            of at most :data:`MAX_GPUS` distinct GPUs of index below that, clocks positive.
    """
    try:
        with path.open("rb") as f:
            data = f.read(STATE_LIMIT_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadState(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > STATE_LIMIT_BYTES:
        raise BadState(f"{path} is over {STATE_LIMIT_BYTES // 1024} KiB: not a clock-lock record")
    try:
        raw = json.loads(data)
        gpus = tuple(
            LockedGpu(
                int(g["index"]),
                None if g.get("uuid") is None else str(g["uuid"])[:100],
                int(g["sm_mhz"]),
                None if g.get("mem_mhz") is None else int(g["mem_mhz"]),
            )
            for g in raw["gpus"][: MAX_GPUS + 1]
        )
        state = LockState(int(raw["pid"]), str(raw["nvml"])[:10], gpus)
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        raise BadState(f"{path} is not a clock-lock record") from None
    indices = [g.index for g in gpus]
    if (
        len(gpus) > MAX_GPUS
        or len(set(indices)) != len(indices)
        or any(not 0 <= i < MAX_GPUS for i in indices)
        or any(g.sm_mhz <= 0 or (g.mem_mhz is not None and g.mem_mhz <= 0) for g in gpus)
        or state.pid <= 0
        or state.nvml not in ("nvml", "sim")
    ):
        raise BadState(f"{path} names GPUs or clocks no specwatch would have locked")
    return state


def lock_path(path: Path) -> Path:
    """The file whose ``flock`` the holder of ``path``'s lock holds."""
    return path.with_name("clock-lock.lock")


@contextlib.contextmanager
def hold(path: Path) -> Iterator[None]:
    """Hold the OS lock of the state file ``path`` while inside (never waits).

    Raises:
        LockBusy: Another process holds it.
        OSError: The lock file cannot be created.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = None
            with contextlib.suppress(BadState):
                held = read_state(path)
                holder = held.pid if held is not None else None
            who = f"specwatch process {holder}" if holder else "another specwatch process"
            raise LockBusy(f"the clocks are being locked by {who}; nothing changed") from None
        yield
    finally:
        os.close(fd)  # releases the flock


def write_state(path: Path, state: LockState) -> None:
    """Write ``state`` atomically (complete or absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".clock-lock.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(state), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


__all__ = [
    "MAX_GPUS",
    "STATE_LIMIT_BYTES",
    "BadState",
    "LockBusy",
    "LockState",
    "LockedGpu",
    "hold",
    "lock_path",
    "pid_alive",
    "read_state",
    "state_path",
    "write_state",
]
