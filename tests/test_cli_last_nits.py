"""Issue 40, item 9 (the rest): ``FILE@-1m/end``, ``clocks`` and ``clocks status``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specwatch.commands.main import main, parse_args
from specwatch.core.clocks import read_state, state_path
from specwatch.record.compare_range import parse_range_spec
from specwatch.record.timespec import parse_time
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.gpus import SimGpus
from specwatch.sources.nvml.clock_lock import lock
from tests.record_world import record_story


def test_end_and_start_name_the_recordings_own_ends() -> None:
    assert parse_time("end", 1000.0) == 1000.0
    assert parse_time(" END ", 1000.0) == 1000.0
    assert parse_time("start", 1000.0, start_wall=400.0) == 400.0
    assert parse_time("-1m", 1000.0) == 940.0
    with pytest.raises(ValueError, match="start or end"):
        parse_time("start", 1000.0)  # a caller that does not know the start
    spec = parse_range_spec("night.sqlite@-1m/end")
    assert spec is not None and (spec.start, spec.end) == ("-1m", "end")


def test_compare_takes_a_range_up_to_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    night = tmp_path / "night.sqlite"
    record_story(night)
    code = main(["compare", f"{night}@start/-2m", f"{night}@-1m/end"])
    out, err = capsys.readouterr()
    assert code not in (1, 2), err
    assert "-1m/end" in out, out


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return state_path()


def test_clocks_without_an_action_is_the_status(
    state_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_args(["clocks"]).action == "status"
    assert main(["clocks"]) == 0
    assert capsys.readouterr().out.startswith("specwatch clocks: no clocks locked by specwatch")
    assert main(["clocks", "status"]) == 0
    assert "no clocks locked" in capsys.readouterr().out


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_clocks_status_says_who_holds_what_and_changes_nothing(
    state_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state_home.parent.mkdir(parents=True)
    fake = FakeNvml(SimGpus(2, seed=1))
    fake.privileged = True
    state = lock(fake, "max", state_home, "sim")
    assert state.pid == os.getpid()
    assert main(["clocks", "status"]) == 0
    out = capsys.readouterr().out
    assert f"locked by process {os.getpid()}, which runs" in out, out
    assert "GPU 0 SM 1980 MHz, memory 2619" in out and "GPU 1 SM 1980" in out, out
    assert "fake NVML" in out
    gone = _gone_pid()
    monkeypatch.setattr("specwatch.commands.clocks.pid_alive", lambda pid: pid != gone)
    state_home.write_text(state_home.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {gone}'))
    left = read_state(state_home)
    assert left is not None and left.pid == gone
    assert main(["clocks"]) == 0
    out = capsys.readouterr().out
    assert f"left locked by process {gone}, which is gone" in out, out
    assert "specwatch clocks restore undoes it" in out
    assert read_state(state_home) == left  # status restores nothing
    assert fake.locked
