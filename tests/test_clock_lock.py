"""bench --lock-clocks: refused without root (nothing changed); with it, the clocks are restored
on a normal exit, ^C, ^C^C, SIGTERM, SIGHUP and a crash, and after SIGKILL by the next start or
``specwatch clocks restore``. Proven against the fake NVML, whose set/reset calls go to a
ledger file shared across processes."""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specwatch.commands.main import build_parser
from specwatch.core.clocks import read_state, state_path
from specwatch.sim.fake_nvml import LEDGER_ENV, ROOT_ENV, FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.nvml import binding as N
from specwatch.sources.nvml.clock_lock import LockError, lock, parse_target, restore
from tests.sim_fixtures import ManualClock

ROOT = Path(__file__).resolve().parent.parent
GPUS = 8
"""The story demo's GPUs."""
WAIT_S = 60.0
BENCH = ["bench", "--demo", "hot", "--demo-step-factor", "0.3", "--max-tokens", "256"]


def _fake(privileged: bool = True) -> FakeNvml:
    clock = ManualClock(100.0)
    fake = FakeNvml(SimGpus(2, seed=1, start_t=clock.now()), clock=clock.now)
    fake.privileged = privileged
    return fake


def test_lock_writes_the_state_file_first_and_restore_undoes_it(tmp_path: Path) -> None:
    fake, path = _fake(), tmp_path / "lock.json"
    state = lock(fake, "max", path, "sim")
    assert read_state(path) == state and {g.sm_mhz for g in state.gpus} == {1980}
    assert {g.mem_mhz for g in state.gpus} == {2619}
    assert fake.locked == {
        (i, clock): (mhz, mhz)
        for i in range(2)
        for clock, mhz in ((N.CLOCK_SM, 1980), (N.CLOCK_MEM, 2619))
    }
    assert restore(fake, state, path) == []
    assert fake.locked == {} and not path.exists()
    base = lock(fake, "base", path, "sim").gpus[0]  # the default application clocks
    assert (base.sm_mhz, base.mem_mhz) == (1980, 2619)
    assert parse_target("1500") == 1500
    assert parse_target("1500,2619") == (1500, 2619)
    for bad in ("fast", "1500,", "1500,0"):
        with pytest.raises(ValueError):
            parse_target(bad)


def test_a_board_that_cannot_lock_its_memory_clock_keeps_the_sm_lock(tmp_path: Path) -> None:
    fake, path = _fake(), tmp_path / "lock.json"
    fake.fail("nvmlDeviceSetMemoryLockedClocks", N.ERROR_NOT_SUPPORTED, index=1)
    fake.fail("nvmlDeviceResetMemoryLockedClocks", N.ERROR_NOT_SUPPORTED, index=1)
    state = lock(fake, 1500, path, "sim")
    assert [(g.sm_mhz, g.mem_mhz) for g in state.gpus] == [(1500, 2619), (1500, None)]
    assert read_state(path) == state  # the record names only what was locked
    assert fake.locked == {
        (0, N.CLOCK_SM): (1500, 1500),
        (0, N.CLOCK_MEM): (2619, 2619),
        (1, N.CLOCK_SM): (1500, 1500),
    }
    assert restore(fake, state, path) == []
    assert fake.locked == {} and not path.exists()
    resets = [c for c in fake.clock_calls if c[0] == "nvmlDeviceResetMemoryLockedClocks"]
    assert resets == [("nvmlDeviceResetMemoryLockedClocks", 0)]


def test_a_memory_reset_that_is_not_supported_still_restores(tmp_path: Path) -> None:
    """A record left by a killed process names a memory lock the board then refuses to reset
    as unsupported: nothing was locked there, so the restore is complete."""
    fake, path = _fake(), tmp_path / "lock.json"
    state = lock(fake, "max", path, "sim")
    fake.fail("nvmlDeviceResetMemoryLockedClocks", N.ERROR_NOT_SUPPORTED)
    assert restore(fake, state, path) == [] and not path.exists()


def test_a_failed_memory_lock_restores_everything(tmp_path: Path) -> None:
    fake, path = _fake(), tmp_path / "lock.json"
    fake.fail("nvmlDeviceSetMemoryLockedClocks", N.ERROR_UNKNOWN, index=1)
    with pytest.raises(LockError, match="could not lock"):
        lock(fake, "max", path, "sim")
    assert fake.locked == {} and not path.exists()


def test_a_failed_lock_restores_what_it_set(tmp_path: Path) -> None:
    fake, path = _fake(), tmp_path / "lock.json"
    fake.fail("nvmlDeviceSetGpuLockedClocks", N.ERROR_UNKNOWN, index=1)
    with pytest.raises(LockError, match="could not lock"):
        lock(fake, 1500, path, "sim")
    assert fake.locked == {} and not path.exists()


def test_without_root_nothing_changes(tmp_path: Path) -> None:
    fake, path = _fake(privileged=False), tmp_path / "lock.json"
    with pytest.raises(LockError, match="needs root"):
        lock(fake, "max", path, "sim")
    assert fake.clock_calls == [] and not path.exists()


def _env(tmp_path: Path, root: bool = True) -> dict[str, str]:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), PYTHONPATH=str(ROOT))
    env[LEDGER_ENV] = str(tmp_path / "ledger.jsonl")
    env[ROOT_ENV] = "1" if root else "0"  # unset: as this process's own user
    return env


def _ledger(tmp_path: Path) -> list[list[Any]]:
    path = tmp_path / "ledger.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _calls(tmp_path: Path, function: str) -> set[int]:
    return {row[1] for row in _ledger(tmp_path) if row[0] == function}


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "out.txt"
    argv = [sys.executable, "-m", "specwatch", *BENCH, "--out", str(tmp_path / "snaps"), *extra]
    with out.open("wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=_env(tmp_path))
    return proc, out


def _wait_for(predicate: Any, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert proc.poll() is None, "bench ended early"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _assert_restored(tmp_path: Path) -> None:
    assert _calls(tmp_path, "nvmlDeviceSetGpuLockedClocks") == set(range(GPUS))
    assert _calls(tmp_path, "nvmlDeviceResetGpuLockedClocks") == set(range(GPUS))
    assert _calls(tmp_path, "nvmlDeviceSetMemoryLockedClocks") == set(range(GPUS))
    assert _calls(tmp_path, "nvmlDeviceResetMemoryLockedClocks") == set(range(GPUS))
    assert not (tmp_path / "state" / "specwatch" / "clock-lock.json").exists()


def test_normal_exit_restores(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, "-n", "2", "--lock-clocks", "max")
    assert proc.wait(WAIT_S) == 0, out.read_text()
    assert "Clocks locked at 1980 MHz, memory 2619 MHz" in out.read_text()
    assert "Clocks unlocked" not in out.read_text()
    _assert_restored(tmp_path)
    (snap,) = (tmp_path / "snaps").glob("*.json")
    gpus = json.loads(snap.read_text())["gpu_environment"]["gpus"]
    assert {g["locked_sm_clock_mhz"] for g in gpus} == {1980}
    assert {g["locked_mem_clock_mhz"] for g in gpus} == {2619}


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT,), (signal.SIGINT, signal.SIGINT), (signal.SIGTERM,), (signal.SIGHUP,)],
    ids=["ctrl-c", "ctrl-c-twice", "sigterm", "sighup"],
)
def test_a_stop_signal_restores(tmp_path: Path, signals: tuple[int, ...]) -> None:
    proc, out = _start(tmp_path, "-n", "500", "--lock-clocks", "1500")
    try:
        _wait_for(lambda: "Run 1/500" in out.read_text(errors="replace"), proc)
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.05)
        assert proc.wait(WAIT_S) == 128 + signals[0], out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_restored(tmp_path)


@pytest.mark.parametrize("next_start", [["dcgm-counters"], ["clocks", "restore"]])
def test_sigkill_then_the_next_start_restores(tmp_path: Path, next_start: list[str]) -> None:
    proc, out = _start(tmp_path, "-n", "500", "--lock-clocks", "max")
    try:
        _wait_for(lambda: "Run 1/500" in out.read_text(errors="replace"), proc)
        proc.kill()
        proc.wait(WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _calls(tmp_path, "nvmlDeviceResetGpuLockedClocks") == set()
    after = subprocess.run(
        [sys.executable, "-m", "specwatch", *next_start],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert after.returncode == 0, after.stderr
    assert f"restored the GPU clocks left locked by process {proc.pid}" in after.stderr or (
        f"restored the GPU clocks locked by process {proc.pid}" in after.stderr
    )
    _assert_restored(tmp_path)
    resets = [r for r in _ledger(tmp_path) if r[0] == "nvmlDeviceResetGpuLockedClocks"]
    assert proc.pid not in {r[-1] for r in resets}  # the next start did it


def test_without_root_the_refusal_is_one_line_and_nothing_changes(tmp_path: Path) -> None:
    argv = [*BENCH, "-n", "1", "--out", str(tmp_path / "snaps"), "--lock-clocks", "max"]
    env = _env(tmp_path, root=False)
    proc = subprocess.run(
        [sys.executable, "-m", "specwatch", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert errors == [
        "specwatch bench: --lock-clocks needs root (a locked clock is a driver-wide setting);"
        " nothing changed"
    ]
    assert _ledger(tmp_path) == [] and not (tmp_path / "snaps").exists()


def test_a_crash_restores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specwatch.commands import bench

    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)

    def crash(*a: Any, **k: Any) -> int:
        assert read_state(state_path()) is not None  # locked, and the undo record written
        raise RuntimeError("boom")

    monkeypatch.setattr(bench, "_measure_and_save", crash)
    argv = [*BENCH, "-n", "1", "--out", str(tmp_path / "snaps"), "--lock-clocks", "max"]
    with pytest.raises(RuntimeError, match="boom"):
        bench.run_bench(build_parser().parse_args(argv), stdout=io.StringIO(), stderr=io.StringIO())
    _assert_restored(tmp_path)


def test_a_failed_sm_reset_still_resets_the_memory_clock(tmp_path: Path) -> None:
    fake, path = _fake(), tmp_path / "lock.json"
    state = lock(fake, "max", path, "sim")
    fake.fail("nvmlDeviceResetGpuLockedClocks", N.ERROR_UNKNOWN, index=0)
    problems = restore(fake, state, path)
    assert len(problems) == 1 and problems[0].startswith("GPU 0:")
    assert fake.locked == {(0, N.CLOCK_SM): (1980, 1980)}
    assert path.exists()  # kept for `specwatch clocks restore`


def _holds(tmp_path: Path) -> list[tuple[int, int, int]]:
    """Per process in the ledger: (pid, first set, last reset) by ledger row."""
    rows = _ledger(tmp_path)
    spans: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        if row[0] in ("nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"):
            spans.setdefault(row[-1], []).append(i)
    return sorted((pid, rows_[0], rows_[-1]) for pid, rows_ in spans.items())


def test_two_benches_started_together_never_hold_the_clocks_at_once(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "specwatch", *BENCH, "-n", "2", "--lock-clocks", "max"]
    procs = [
        subprocess.Popen(
            [*argv, "--out", str(tmp_path / f"snaps{i}")],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=WAIT_S) for p in procs]
    spans = sorted(_holds(tmp_path), key=lambda s: s[1])
    assert spans, outs
    for (_, _, end), (_, start, _) in itertools.pairwise(spans):
        assert end < start, spans  # one holder's reset came before the next one's set
    for proc, (_, err) in zip(procs, outs, strict=True):
        if proc.returncode != 0:  # refused: one line, nothing measured
            other = next(p.pid for p in procs if p is not proc)
            lines = [line for line in err.splitlines() if line.strip()]
            # Refused before the holder wrote its state, the holder has no pid to name yet.
            assert lines in (
                [
                    f"specwatch bench: the clocks are being locked by specwatch process {other};"
                    " nothing changed"
                ],
                [
                    "specwatch bench: the clocks are being locked by another specwatch process;"
                    " nothing changed"
                ],
            ), err
            assert proc.pid not in {pid for pid, _, _ in spans}
    _assert_restored(tmp_path)


def test_a_second_lock_is_refused_in_one_line_while_the_first_holds(tmp_path: Path) -> None:
    first, out = _start(tmp_path, "-n", "500", "--lock-clocks", "max")
    try:
        _wait_for(lambda: "Run 1/500" in out.read_text(errors="replace"), first)
        second = subprocess.run(
            [sys.executable, "-m", "specwatch", *BENCH, "-n", "1", "--lock-clocks", "max"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        )
        assert second.returncode == 2
        assert [line for line in second.stderr.splitlines() if line.strip()] == [
            f"specwatch bench: the clocks are being locked by specwatch process {first.pid};"
            " nothing changed"
        ]
        restore = subprocess.run(
            [sys.executable, "-m", "specwatch", "clocks", "restore"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        )
        assert restore.returncode == 1 and str(first.pid) in restore.stderr
        assert _calls(tmp_path, "nvmlDeviceResetGpuLockedClocks") == set()  # untouched
        first.send_signal(signal.SIGTERM)
        assert first.wait(WAIT_S) == 128 + signal.SIGTERM
    finally:
        if first.poll() is None:
            first.kill()
    assert {pid for pid, _, _ in _holds(tmp_path)} == {first.pid}
    _assert_restored(tmp_path)


PLANTED = {
    "huge index": {"pid": 999_999_999, "nvml": "sim", "gpus": [{"index": 10**9, "sm_mhz": 1}]},
    "not json": "{not a record",
    "too large": {"pid": 1, "nvml": "sim", "gpus": [], "pad": "x" * 100_000},
    "negative clock": {"pid": 999_999_999, "nvml": "nvml", "gpus": [{"index": 0, "sm_mhz": -5}]},
}


@pytest.mark.parametrize("case", PLANTED)
@pytest.mark.parametrize("command", [["dcgm-counters"], ["clocks", "restore"]])
def test_a_planted_record_is_said_in_one_line_and_drives_no_work(
    tmp_path: Path, case: str, command: list[str]
) -> None:
    path = tmp_path / "state" / "specwatch" / "clock-lock.json"
    path.parent.mkdir(parents=True)
    record = PLANTED[case]
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "specwatch", *command],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert time.monotonic() - start < 20
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "ignored" in lines[0], done.stderr
    assert done.returncode == (1 if command[0] == "clocks" else 0)
    assert _ledger(tmp_path) == [] and path.exists()  # not ours to delete


def _nvml_loads() -> bool:
    try:
        N.real_nvml().nvmlInit()
    except Exception:
        return False
    N.real_nvml().nvmlShutdown()
    return True


@pytest.mark.skipif(os.geteuid() != 0, reason="the path without NVML as root needs root")
@pytest.mark.parametrize(
    "source",
    [[], ["--no-gpu"], ["--dcgm", "http://127.0.0.1:9"], ["--prometheus", "http://127.0.0.1:9"]],
)
def test_without_nvml_as_root_the_lock_is_refused_in_one_line(
    tmp_path: Path, source: list[str]
) -> None:
    if _nvml_loads():
        pytest.skip("NVML loads here: the path without it cannot be taken")
    argv = ["bench", "http://127.0.0.1:9", "-n", "1", "--lock-clocks", "max", *source]
    done = subprocess.run(
        [sys.executable, "-m", "specwatch", *argv, "--out", str(tmp_path / "snaps")],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        "specwatch bench: could not lock the clocks: NVML Shared Library Not Found; nothing changed"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="root's own demo lock needs root")
def test_the_demo_does_not_tell_root_it_needs_root(tmp_path: Path) -> None:
    env = _env(tmp_path)
    del env[ROOT_ENV]  # as the real driver: this user, root, may lock
    argv = [*BENCH, "-n", "1", "--out", str(tmp_path / "snaps"), "--lock-clocks", "max"]
    done = subprocess.run(
        [sys.executable, "-m", "specwatch", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "needs root" not in done.stdout + done.stderr
    assert "Clocks locked at 1980 MHz" in done.stdout + done.stderr
    _assert_restored(tmp_path)
