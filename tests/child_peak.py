"""Run ``python -m specwatch ARGS`` in a child process and measure its peak RSS and CPU time
(``getrusage`` of the child, read by a wrapper process so that the test runner's own memory is
not counted)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

PEAK_LIMIT_MIB = 150
_WRAPPER = (
    "import resource, subprocess, sys, time;"
    "t = time.monotonic();"
    "r = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]));"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN);"
    "sys.stdout.write(r.stdout + '\\n' + r.stderr + '\\nPEAK_KIB %d %.3f %.3f %d'"
    " % (u.ru_maxrss, u.ru_utime + u.ru_stime, time.monotonic() - t, r.returncode))"
)


@dataclass(frozen=True)
class ChildRun:
    """What the child printed (stdout, then stderr), its peak RSS, CPU and wall seconds."""

    text: str
    peak_mib: float
    cpu_s: float
    wall_s: float
    rc: int


def run_specwatch(*argv: str, timeout_s: float = 120.0) -> ChildRun:
    """``python -m specwatch *argv`` in a child; raises ``subprocess.TimeoutExpired`` past
    ``timeout_s`` (the child is killed by the wrapper)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    command = [sys.executable, "-c", _WRAPPER, str(timeout_s), sys.executable, "-m", "specwatch"]
    out = subprocess.run(
        [*command, *argv], capture_output=True, text=True, timeout=timeout_s + 30, env=env
    )
    text, _, tail = out.stdout.rpartition("PEAK_KIB ")
    if not tail:
        raise AssertionError(f"the wrapper failed: {out.stderr[-2000:]}")
    kib, cpu, wall, rc = tail.split()
    return ChildRun(text, int(kib) / 1024, float(cpu), float(wall), int(rc))
