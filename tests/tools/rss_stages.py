#!/usr/bin/env python3
"""Where specwatch's resident memory goes: RSS after each import stage, then the monitor's.

    .venv/bin/python tests/tools/rss_stages.py                # 12 s watching, 3 runs
    .venv/bin/python tests/tools/rss_stages.py --seconds 30

Prints the RSS of a fresh interpreter after each import stage (each in its own process, so
one stage's imports do not hide another's), then starts ``specwatch sim --dialect vllm`` and
runs ``python -m specwatch --url URL --interval 1`` on a 160x48 pseudo-terminal for
``--seconds``, reporting its RSS and peak RSS (VmHWM) at the end: the figure that
``cost_report.py`` sets beside vllmstat 0.9.1's.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.tools import overhead  # noqa: E402
from tests.tools.first_frame import _reap, _spawn  # noqa: E402

STAGES = (
    ("python -c pass", ""),
    ("import httpx", "import httpx"),
    ("httpx + one AsyncClient()", "import httpx; c = httpx.AsyncClient()"),
    ("httpx + AsyncClient(verify=False)", "import httpx; c = httpx.AsyncClient(verify=False)"),
    ("import prometheus_client", "import prometheus_client"),
    ("import textual.app", "import textual.app"),
    ("import specwatch.ui.app", "import specwatch.ui.app"),
    ("specwatch.ui.app + session", "import specwatch.ui.app, specwatch.session.live"),
)
PRINT_RSS = (
    "\nfor l in open('/proc/self/status'):\n"
    "    if l.startswith(('VmRSS', 'VmHWM')): print(l.split()[1])"
)


def _status_mib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def stage_rss(code: str) -> float:
    """Peak RSS (MiB) of a fresh interpreter that runs ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", code + PRINT_RSS],
        capture_output=True,
        text=True,
        check=True,
        env=overhead._env(),
    ).stdout.split()
    return int(out[-1]) / 1024.0


def monitor_rss(url: str, seconds: float) -> tuple[float, float]:
    """(RSS, peak RSS) in MiB of the monitor after ``seconds`` on a 160x48 pty."""
    pid, fd, _ = _spawn([sys.executable, "-m", "specwatch", "--url", url, "--interval", "1"])
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    os.read(fd, 1 << 16)
                except OSError:
                    break
        return _status_mib(pid, "VmRSS"), _status_mib(pid, "VmHWM")
    finally:
        _reap(pid, fd)


def main() -> int:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tree", action="append", default=[], help="another checkout to compare")
    p.add_argument("--no-stages", action="store_true", help="only the monitor")
    args = p.parse_args()
    for label, code in () if args.no_stages else STAGES:
        print(f"{label:<40} {stage_rss(code):6.1f} MiB peak")
    sim, url = overhead.start_sim("vllm")
    try:
        trees = [str(ROOT), *args.tree]
        got: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
        for _ in range(args.runs):
            for tree in trees:  # interleaved, so load on the machine falls on both alike
                os.environ["SPECWATCH_TREE"] = tree
                got[tree].append(monitor_rss(url, args.seconds))
    finally:
        os.environ.pop("SPECWATCH_TREE", None)
        sim.terminate()
        sim.wait(10)
    for tree, runs in got.items():
        rss = statistics.median(g[0] for g in runs)
        hwm = statistics.median(g[1] for g in runs)
        name = "this tree" if tree == str(ROOT) else tree
        print(f"specwatch --url (simulated vLLM), {name}: {rss:.1f} MiB, peak {hwm:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
