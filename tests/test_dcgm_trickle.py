"""``probe --dcgm`` and ``bench --dcgm`` against a dcgm-exporter that drips its headers a byte a
second (``python -m tests.hostile dcgm-trickle``): each request ends at its wall-clock deadline,
and SIGTERM or Ctrl-C stops the command while a request trickles (issue 28 item 7; a per-read
timeout alone once let it hang for 817 s, deaf to both)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specwatch.sim.presets import preset
from tests.hostile import HostileServer, hostile_server
from tests.sim_testing import FAST, serving

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 2.0
"""A dcgm-exporter's answer must be complete within this (``sources.dcgm.fetch``)."""


@contextmanager
def server_and_exporter() -> Iterator[tuple[str, HostileServer]]:
    with serving(preset("vllm", **FAST)) as (_, server), hostile_server("dcgm-trickle") as dcgm:
        yield server.url, dcgm


def _command(which: str, url: str, dcgm: str, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "specwatch", which, url, "--dcgm", dcgm, "--max-tokens", "32"]
    if which == "bench":
        argv += ["-n", "2", "--warmup", "0", "--out", str(out)]
    return argv


def _start(argv: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )


@pytest.mark.parametrize("which", ["probe", "bench"])
def test_a_trickling_exporter_costs_one_deadline(tmp_path: Path, which: str) -> None:
    with server_and_exporter() as (url, dcgm):
        started = time.monotonic()
        proc = _start(_command(which, url, dcgm.url, tmp_path))
        out, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - started
    assert proc.returncode == 0, err
    assert f"no complete answer within {DEADLINE_S:g} s" in out
    assert elapsed < 60  # the headers alone would take ~90 s at a byte a second


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
@pytest.mark.parametrize("which", ["probe", "bench"])
def test_a_stop_signal_ends_it_while_the_exporter_trickles(
    tmp_path: Path, which: str, sig: int
) -> None:
    with server_and_exporter() as (url, dcgm):
        proc = _start(_command(which, url, dcgm.url, tmp_path))
        try:
            end = time.monotonic() + 60
            while not dcgm.requests:  # a request to the exporter is trickling in now
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < end, "the exporter was never asked"
                time.sleep(0.02)
            sent = time.monotonic()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
            elapsed = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode in (128 + sig, -sig), err
    assert "Traceback" not in err, err[-2000:]
    # 2.0-2.1 s on a quiet machine; the margin is for a loaded one (the hang was 40 s and more).
    assert elapsed < DEADLINE_S + 6.0, f"{elapsed:.1f} s after the signal"
