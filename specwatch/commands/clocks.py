"""``specwatch clocks [status|restore]``, the stale-lock check at start-up, and the lock
``bench`` holds.

The lock itself lives in :mod:`specwatch.sources.nvml.clock_lock`; this module picks the NVML a
state file names (the driver, or the demo's fake NVML, which never touches real GPUs) and says
what happened in one line.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from specwatch.core.clocks import (
    BadState,
    LockBusy,
    LockState,
    hold,
    pid_alive,
    read_state,
    state_path,
)
from specwatch.sources.nvml.clock_lock import LockError, Target, lock, parse_target, restore

if TYPE_CHECKING:
    from specwatch.core.snapshot_records import BenchResult
    from specwatch.sim.demo import StoryServer


Locked = dict[int, tuple[int, int | None]]
"""GPU index -> (locked SM clock, locked memory clock or ``None``), MHz."""


def add_clocks_arguments(p: argparse.ArgumentParser) -> None:
    """``specwatch clocks [status|restore]``."""
    p.add_argument(
        "action",
        nargs="?",
        choices=("status", "restore"),
        default="status",
        help="status: which GPU clocks a specwatch bench holds locked, and whether its process "
        "runs; restore: undo clocks a specwatch bench left locked (default: status)",
    )


def nvml_for(state: LockState) -> Any:
    """The NVML that locked ``state``'s GPUs."""
    if state.nvml == "sim":
        from specwatch.sim.fake_nvml import FakeNvml
        from specwatch.sim.gpus import SimGpus

        count = max((g.index for g in state.gpus), default=0) + 1
        return FakeNvml(SimGpus(count))
    from specwatch.sources.nvml.binding import real_nvml

    return real_nvml()


def _restore_lines(state: LockState, why: str) -> list[str]:
    problems = restore(nvml_for(state), state, state_path())
    if problems:
        return [f"specwatch: could not restore GPU clocks ({why}): {'; '.join(problems)}"]
    return [f"specwatch: restored the GPU clocks {why}"]


def _ignored(exc: BadState) -> str:
    return f"{exc}: ignored; check the GPU clocks (nvidia-smi -q -d CLOCK), then remove it"


def restore_stale(err: TextIO) -> None:
    """At start-up: restore clocks a specwatch process that is gone left locked (a process that
    holds the lock is not gone; a record that is no record is said in one line, not used)."""
    path = state_path()
    if not path.exists():
        return
    try:
        with hold(path):
            state = read_state(path)
            if state is None or pid_alive(state.pid):
                return
            for line in _restore_lines(state, f"left locked by process {state.pid}, which is gone"):
                print(line, file=err)
    except LockBusy:
        return
    except BadState as exc:
        print(f"specwatch: {_ignored(exc)}", file=err)
    except OSError as exc:
        print(f"specwatch: cannot check {path}: {exc.strerror or exc}", file=err)


def _gpu_words(state: LockState) -> str:
    gpus = "; ".join(
        f"GPU {g.index} SM {g.sm_mhz} MHz" + ("" if g.mem_mhz is None else f", memory {g.mem_mhz}")
        for g in state.gpus
    )
    where = "the demo's fake NVML" if state.nvml == "sim" else "NVML"
    return f"{gpus or 'no GPU'} (through {where})"


def clocks_status(out: TextIO) -> int:
    """``specwatch clocks status``: the lock record, said in one line; never changes a clock.

    Read without taking the lock, so a running bench is neither waited for nor disturbed.
    """
    path = state_path()
    try:
        state = read_state(path)
    except BadState as exc:
        print(f"specwatch clocks: {_ignored(exc)}", file=out)
        return 1
    if state is None:
        print(f"specwatch clocks: no clocks locked by specwatch (no record at {path})", file=out)
        return 0
    locked = _gpu_words(state)
    if pid_alive(state.pid):
        print(
            f"specwatch clocks: locked by process {state.pid}, which runs and restores them "
            f"when it ends: {locked}",
            file=out,
        )
    else:
        print(
            f"specwatch clocks: left locked by process {state.pid}, which is gone: {locked}; "
            "specwatch clocks restore undoes it",
            file=out,
        )
    return 0


def run_clocks(
    args: argparse.Namespace, err: TextIO | None = None, out: TextIO | None = None
) -> int:
    """``specwatch clocks [status]``: the lock record (0 unless it is unreadable);
    ``specwatch clocks restore``: 0 when nothing is left locked."""
    err = err or sys.stderr
    if getattr(args, "action", "status") != "restore":
        return clocks_status(out or sys.stdout)
    path = state_path()
    try:
        with hold(path):
            state = read_state(path)
            if state is None:
                print("specwatch clocks: no locked clocks to restore", file=err)
                return 0
            if pid_alive(state.pid):
                print(
                    f"specwatch clocks: process {state.pid} wrote the lock record and still runs;"
                    " not touching it",
                    file=err,
                )
                return 1
            lines = _restore_lines(state, f"locked by process {state.pid}")
    except LockBusy as exc:
        held = str(exc).split(" by ", 1)[-1].split(";", 1)[0]
        print(f"specwatch clocks: {held} holds the lock and restores it when it ends", file=err)
        return 1
    except BadState as exc:
        print(f"specwatch clocks: {_ignored(exc)}", file=err)
        return 1
    except OSError as exc:
        print(f"specwatch clocks: cannot check {path}: {exc.strerror or exc}", file=err)
        return 1
    for line in lines:
        print(line, file=err)
    return 1 if "could not" in lines[0] else 0


def parse_lock_target(text: str | None) -> Target | None:
    """``--lock-clocks``: ``None`` when not given (raises ``ValueError`` when malformed)."""
    return None if text is None else parse_target(text)


def lock_for_bench(
    stack: contextlib.ExitStack,
    target: Target | None,
    demo: StoryServer | None,
    fake: object | None,
    progress: TextIO,
    err: TextIO,
) -> Locked | None:
    """Lock the clocks until ``stack`` closes: GPU index -> (SM, memory) MHz (``{}`` without a
    target; ``None`` when refused, said in one line on ``err``, nothing changed)."""
    if target is None:
        return {}
    from specwatch.bench.shield import print_lines
    from specwatch.sources.nvml.clock_lock import locked_clocks, locked_memory_clocks

    if demo is not None:
        from specwatch.sim.fake_nvml import FakeNvml

        nv: object = fake or FakeNvml(demo.world.gpus, demo.world.clock.now)
        kind = "sim"
    else:
        from specwatch.sources.nvml.binding import real_nvml

        nv, kind = real_nvml(), "nvml"
    try:
        state = stack.enter_context(held_lock(nv, target, kind))
    except LockError as exc:
        print_lines(err, [f"specwatch bench: {exc}"])
        return None
    locked = locked_clocks(state)
    memory = locked_memory_clocks(state)
    mhz = ", ".join(sorted({str(v) for v in locked.values()}))
    mem = ", ".join(sorted({str(v) for v in memory.values()}))
    lines = [
        f"  Clocks locked at {mhz} MHz"
        + (f", memory {mem} MHz" if mem else "")
        + f" until the benchmark ends (undo record: {state_path()})"
    ]
    if unlockable := sorted(set(locked) - set(memory)):
        gpus = ",".join(map(str, unlockable))
        lines.append(f"  Memory clock not locked on GPU {gpus}: the board does not support it")
    print_lines(progress, lines)
    return {i: (sm, memory.get(i)) for i, sm in locked.items()}


def with_locks(result: BenchResult, locked: Locked) -> BenchResult:
    """``result`` with the locked clocks in its GPUs' static facts (NVML cannot read them)."""
    if not locked or result.inventory is None:
        return result
    gpus = tuple(
        dataclasses.replace(
            g,
            locked_sm_clock_mhz=locked[g.index][0] if g.index in locked else None,
            locked_mem_clock_mhz=locked[g.index][1] if g.index in locked else None,
        )
        for g in result.inventory.gpus
    )
    return dataclasses.replace(result, inventory=dataclasses.replace(result.inventory, gpus=gpus))


@contextlib.contextmanager
def held_lock(nv: Any, target: Target, kind: str) -> Iterator[LockState]:
    """Lock the clocks while inside, one process at a time (the OS lock is taken before any
    clock is set and released after they are restored); restore them on every way out.

    Raises:
        LockError: Another process holds the lock (refused at once, never waited for), or
            :func:`~specwatch.sources.nvml.clock_lock.lock` refused.
    """
    path = state_path()
    with contextlib.ExitStack() as holding:
        try:
            holding.enter_context(hold(path))
        except LockBusy as exc:
            raise LockError(str(exc)) from None
        except OSError as exc:
            where = f"{path.parent}: {exc.strerror or exc}"
            raise LockError(f"cannot create the lock in {where}; nothing changed") from None
        state = lock(nv, target, path, kind)
        try:
            yield state
        finally:
            restore(nv, state, path)


__all__ = [
    "Locked",
    "add_clocks_arguments",
    "held_lock",
    "lock_for_bench",
    "nvml_for",
    "parse_lock_target",
    "restore_stale",
    "run_clocks",
    "with_locks",
]
