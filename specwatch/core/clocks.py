"""Clock hygiene: a GPU's clock policy, and the state file of the clocks specwatch locked.

The policy says whether a GPU's clocks follow boost (and so temperature) or are pinned.

Two benchmarks are only comparable when their GPUs ran under the same policy: a locked clock,
application clocks below the default or a power limit below the default all change what the
board can do, and an unlocked board's boost clock follows its temperature. The policy is read
from :class:`~specwatch.core.gpu.GpuStatic`; a reading the driver did not give counts as
unknown, never as "default".

The clock-lock state file says which GPUs a ``bench --lock-clocks`` locked, by which process
(no ``pynvml`` here, so every start can look for a stale file cheaply). One process at a time
may lock: it holds an exclusive ``flock`` on ``clock-lock.lock`` beside the state file from
before the record is written until the clocks are restored (the record itself is replaced
atomically, so the OS lock sits on a file that stays). A second ``--lock-clocks`` refuses at
once, in one line; a record whose writer no longer holds the OS lock is stale, whatever its pid
says now. A record is read only when it is small and sane (:data:`STATE_LIMIT_BYTES`, at most
:data:`MAX_GPUS` GPUs of index below it): a corrupt or planted one is reported in one line and
drives no work.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuStatic
import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

POWER_CAP_MARGIN = 0.02
"""An enforced power limit this far (relative) below the default counts as a cap."""

UNLOCKED_LINE = "boost follows temperature: runs on other days may differ"


@dataclass(frozen=True, slots=True)
class ClockPolicy:
    """What one GPU's clocks were allowed to do."""

    locked_sm_mhz: int | None = None
    locked_mem_mhz: int | None = None
    app_sm_mhz: int | None = None
    """Application SM clock, only when it differs from the default."""
    app_mem_mhz: int | None = None
    """Application memory clock, only when it differs from the default."""
    power_cap_w: float | None = None
    """Enforced power limit, only when below the default."""
    power_default_w: float | None = None
    persistence: bool | None = None

    @property
    def unlocked(self) -> bool:
        """Neither locked nor pinned by application clocks: boost follows temperature."""
        return self.locked_sm_mhz is None and self.app_sm_mhz is None

    @property
    def flag(self) -> str:
        """A short flag for a table cell: ``lock``, ``app``, ``cap`` or ``""`` (boost)."""
        if self.locked_sm_mhz is not None or self.locked_mem_mhz is not None:
            return "lock"
        if self.app_sm_mhz is not None or self.app_mem_mhz is not None:
            return "app"
        if self.power_cap_w is not None:
            return "cap"
        return ""

    def text(self) -> str:
        """One phrase: ``locked SM 1500 MHz, power cap 500/700 W``."""
        parts: list[str] = []
        if self.locked_sm_mhz is not None:
            parts.append(f"locked SM {self.locked_sm_mhz} MHz")
        if self.locked_mem_mhz is not None:
            parts.append(f"locked memory {self.locked_mem_mhz} MHz")
        if self.app_sm_mhz is not None:
            parts.append(f"application SM clock {self.app_sm_mhz} MHz")
        if self.app_mem_mhz is not None:
            parts.append(f"application memory clock {self.app_mem_mhz} MHz")
        if self.power_cap_w is not None:
            cap = f"power cap {self.power_cap_w:.0f}"
            parts.append(cap + (f"/{self.power_default_w:.0f} W" if self.power_default_w else " W"))
        if self.unlocked:
            parts.insert(0, "unlocked (boost)")
        if self.persistence is False:
            parts.append("persistence off")
        return ", ".join(parts)


def _differs(value: int | None, default: int | None) -> int | None:
    if value is None or default is None or value == default:
        return None
    return value


def policy_of(static: GpuStatic) -> ClockPolicy:
    """The clock policy of one GPU from its static facts."""
    limit, default = static.power_limit_w, static.power_default_limit_w
    capped = limit is not None and default and limit < default * (1 - POWER_CAP_MARGIN)
    return ClockPolicy(
        locked_sm_mhz=static.locked_sm_clock_mhz,
        locked_mem_mhz=static.locked_mem_clock_mhz,
        app_sm_mhz=_differs(static.app_sm_clock_mhz, static.default_app_sm_clock_mhz),
        app_mem_mhz=_differs(static.app_mem_clock_mhz, static.default_app_mem_clock_mhz),
        power_cap_w=limit if capped else None,
        power_default_w=default,
        persistence=static.persistence_mode,
    )


def policies_text(gpus: Iterable[GpuStatic]) -> str | None:
    """The policies of a set of GPUs in one phrase (``None`` without GPUs)."""
    texts: dict[str, list[int]] = {}
    for g in gpus:
        texts.setdefault(policy_of(g).text(), []).append(g.index)
    if not texts:
        return None
    if len(texts) == 1:
        return next(iter(texts))
    return "; ".join(f"GPU {','.join(map(str, idx))}: {t}" for t, idx in texts.items())


def any_unlocked(gpus: Iterable[GpuStatic]) -> bool:
    """Whether any GPU's boost clock follows its temperature."""
    return any(policy_of(g).unlocked for g in gpus)


def policy_difference(a: Iterable[GpuStatic], b: Iterable[GpuStatic]) -> tuple[str, str] | None:
    """(A's policy, B's policy) when two sets of GPUs ran under different clock policies."""
    ta, tb = policies_text(a), policies_text(b)
    if ta is None or tb is None or ta == tb:
        return None
    return ta, tb


# --- the clock-lock state file ----------------------------------------------------------------


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
    "POWER_CAP_MARGIN",
    "STATE_LIMIT_BYTES",
    "UNLOCKED_LINE",
    "BadState",
    "ClockPolicy",
    "LockBusy",
    "LockState",
    "LockedGpu",
    "any_unlocked",
    "hold",
    "lock_path",
    "pid_alive",
    "policies_text",
    "policy_difference",
    "policy_of",
    "read_state",
    "state_path",
    "write_state",
]
