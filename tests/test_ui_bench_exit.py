"""Leaving the monitor (q, SIGTERM, SIGHUP) while its benchmark (``b``) runs: the finished runs
are saved as a partial snapshot and the line after the screen says how many and where, as
``specwatch bench`` does (issue 28 item 5). A real ``specwatch --url`` in a pty, against the
simulator in this process (whose request count tells when run 1 has finished)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from specwatch.sim.presets import preset
from specwatch.ui.hangup import HANGUP_EXIT, TERM_EXIT
from tests.sim_testing import FAST, serving
from tests.test_ui_hangup import read_to_exit, read_until, spawn_in_pty

STEP_MS = 3.0
"""A run of 2048 tokens takes ~2.5 s: the last of five is far off when the test leaves."""
HOW = {"q": (None, 0, "on quitting"), "sigterm": (signal.SIGTERM, TERM_EXIT, "by SIGTERM")}
HOW["sighup"] = (signal.SIGHUP, HANGUP_EXIT, "by SIGHUP")


@pytest.mark.parametrize("how", sorted(HOW))
def test_leaving_during_a_benchmark_saves_its_finished_runs(tmp_path: Path, how: str) -> None:
    sig, code, said = HOW[how]
    config = preset("vllm", **{**FAST, "base_step_ms": STEP_MS, "plain_step_ms": STEP_MS})
    with serving(config) as (world, server):
        pid, fd = spawn_in_pty(["--url", server.url, "--interval", "0.5"], cwd=tmp_path)
        status: int | None = None
        try:
            seen = read_until(fd, b"vllm", 30)  # the status line names the detected dialect
            assert b"vllm" in seen, seen[-400:]
            before = world.submitted
            os.write(fd, b"b")
            # Two warmups, run 1, and run 2 sent: run 1 has finished.
            assert world.wait_submitted(before + 4, 60), "the benchmark never reached run 2"
            if sig is None:
                os.write(fd, b"q")
            else:
                os.kill(pid, sig)
            status, rest = read_to_exit(pid, fd, 10.0)
        finally:
            os.close(fd)
            if status is None:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    assert status is not None, "still running 10 s after leaving"
    assert os.waitstatus_to_exitcode(status) == code, rest[-600:]
    (snap,) = (tmp_path / "specwatch-snapshots").glob("*.json")
    doc = json.loads(snap.read_bytes())
    assert doc["interrupted"] is True
    runs = len(doc["runs"])
    assert 1 <= runs < 5
    where = snap.relative_to(tmp_path)
    line = f"benchmark stopped {said}; {runs} of 5 runs saved (partial snapshot): {where}"
    assert line.encode() in rest, rest[-600:]
