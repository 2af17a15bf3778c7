"""Big recordings (issue 28 item 8, issue 23 item 4): a time range costs what is in it.

The recordings are written in bulk (:mod:`tests.big_recording`); the property is that a
five-minute range of a file ten times bigger reads the same rows in about the same time, and
that a range of the whole file is summarised in bounded memory (a real child process).
"""

from __future__ import annotations

import functools
import os
import pty
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specwatch.record.codec import decode
from specwatch.record.compare_range import RangeSpec, load_range
from tests.big_recording import write_big_recording
from tests.child_peak import PEAK_LIMIT_MIB, run_specwatch

SMALL_S, BIG_S = 5_000, 50_000
"""Seconds recorded (a tick and a window each: two rows a second)."""


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("record-scale")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("big")
    out = {}
    for seconds in (SMALL_S, BIG_S):
        out[seconds] = root / f"rec-{seconds}.sqlite"
        write_big_recording(out[seconds], seconds, drop_at=seconds - 300)
    return out


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every payload decoded from now on (the rows a read paid for)."""
    count = [0]

    def counting(*args: Any) -> Any:
        count[0] += 1
        return decode(*args)

    monkeypatch.setattr("specwatch.record.reader.decode", counting)
    return count


def _timed(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):  # the best of three: the machine is shared
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def test_a_small_range_costs_the_same_in_a_file_ten_times_bigger(
    files: dict[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cost = {}
    for seconds, path in files.items():
        count = _decodes(monkeypatch)
        a = load_range(RangeSpec(path, "-10m", "-5m"))
        b = load_range(RangeSpec(path, "-5m", "-0s"))
        assert a.overall.tok_s.mean == pytest.approx(90.0, abs=0.2)
        assert b.overall.tok_s.mean == pytest.approx(73.0)  # the clocks sag 300 s before the end
        assert b.overall.gpus[0].sm_clock_mean_mhz == pytest.approx(1600)
        assert a.gpu_environment.available and a.server.model == "llama"
        # two rows a second over 301 s each, plus the inventory and the server they start under
        assert count[0] <= 2 * (2 * 301 + 2), count[0]
        cost[seconds] = _timed(functools.partial(load_range, RangeSpec(path, "-10m", "-5m")))
    print(f"5-minute range: {cost[SMALL_S] * 1000:.0f} ms ({SMALL_S} s file), "
          f"{cost[BIG_S] * 1000:.0f} ms ({BIG_S} s file)")  # fmt: skip
    assert cost[BIG_S] < 3 * cost[SMALL_S] + 0.2, cost


def test_a_range_of_the_whole_file_is_compared_in_bounded_memory(files: dict[int, Path]) -> None:
    path = files[BIG_S]
    half = f"-{BIG_S // 2}s"
    run = run_specwatch("compare", f"{path}@-{BIG_S}s/{half}", f"{path}@{half}/-0s", timeout_s=60)
    print(
        f"compare of two {BIG_S // 2} s ranges: {run.cpu_s:.1f} s CPU, peak {run.peak_mib:.0f} MiB"
    )
    assert run.rc == 0, run.text[-2000:]
    assert "tok/s" in run.text, run.text[-2000:]
    assert run.peak_mib < PEAK_LIMIT_MIB, run.text[-2000:]


def test_export_from_to_reads_only_the_range(
    files: dict[int, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from specwatch.commands.main import main
    from specwatch.record.reader import Reader

    decoded = _decodes(monkeypatch)
    fetched = [0]
    checked = Reader._decoded

    def counting(self: Reader, row: tuple[Any, ...]) -> Any:
        fetched[0] += 1
        return checked(self, row)

    # every row the reader takes from SQLite is checked once: this counts what was read
    monkeypatch.setattr(Reader, "_decoded", counting)
    assert main(["export", "--csv", "--from", "-10m", "--to", "-5m", str(files[BIG_S])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "time,source,subject,field,value" and len(out) > 2 * 301 * 5
    assert decoded[0] <= 2 * 301 + 2, decoded[0]
    assert fetched[0] <= 2 * 301 + 2, f"{fetched[0]} rows read for a range of {2 * 301}"


def test_export_shows_progress_and_throughput_on_a_terminal(files: dict[int, Path]) -> None:
    """stderr a pty: the line redrawn in place, then the throughput (a real child).

    A drawn progress line is always replaced by the throughput line, however quick the export,
    so this holds on a quiet machine (0.7 s here) as on a busy one."""
    master, slave = pty.openpty()
    with open(os.devnull, "w") as sink:
        child = subprocess.Popen(
            [sys.executable, "-m", "specwatch", "export", "--csv", str(files[SMALL_S])],
            stdout=sink,
            stderr=slave,
        )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert child.wait(timeout=120) == 0
    text = seen.decode(errors="replace")
    assert "\rexport: " in text and "% · " in text, text[-500:]
    last = text.rstrip().splitlines()[-1]
    print(last.strip())
    assert last.strip().startswith("specwatch export: ") and "MB/s" in last and "rows/s" in last
