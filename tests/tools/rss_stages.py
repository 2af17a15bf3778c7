#!/usr/bin/env python3
"""Where specwatch's resident memory goes: RSS after each import stage, then the monitor's.

    .venv/bin/python tests/tools/rss_stages.py                # 12 s watching, 3 runs
    .venv/bin/python tests/tools/rss_stages.py --seconds 30
    .venv/bin/python tests/tools/rss_stages.py --no-gpu --tree /tmp/base --modules

Prints the RSS of a fresh interpreter after each import stage (each in its own process, so
one stage's imports do not hide another's), then starts ``specwatch sim --dialect vllm`` and
runs ``python -m specwatch --url URL --interval 1`` on a 160x48 pseudo-terminal for
``--seconds``, reporting its RSS and peak RSS (VmHWM) at the end: the figure that
``cost_report.py`` sets beside vllmstat 0.9.1's (with ``--no-gpu``, as there). ``--tree`` adds
another checkout, measured in the same run, interleaved; ``--modules`` also counts the modules
the monitor holds at the end (all, and specwatch's own).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
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
        cwd=ROOT,  # ``-c`` puts the working directory first on sys.path
    ).stdout.split()
    return int(out[-1]) / 1024.0


MODULES_PRELUDE = (
    "import json, os, runpy, signal, sys\n"
    "def dump(*_):\n"
    "    with open(os.environ['RSS_STAGES_MODULES'], 'w') as f:\n"
    "        json.dump(sorted(sys.modules), f)\n"
    "signal.signal(signal.SIGUSR1, dump)\n"
    "sys.argv = ['specwatch', *sys.argv[1:]]\n"
    "runpy.run_module('specwatch', run_name='__main__', alter_sys=True)\n"
)
"""Runs the monitor as ``python -m specwatch`` does, writing ``sys.modules`` on SIGUSR1."""


def _drain(fd: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                os.read(fd, 1 << 16)
            except OSError:
                return


def monitor_rss(
    url: str, seconds: float, extra: list[str], modules: bool = False
) -> tuple[float, float, list[str]]:
    """(RSS, peak RSS) in MiB of the monitor after ``seconds`` on a 160x48 pty, and with
    ``modules`` the names in its ``sys.modules`` then."""
    args = ["--url", url, "--interval", "1", *extra]
    dump = Path(os.environ.get("TMPDIR", "/tmp")) / f"rss-stages-{os.getpid()}.json"
    if modules:
        os.environ["RSS_STAGES_MODULES"] = str(dump)
        argv = [sys.executable, "-c", MODULES_PRELUDE, *args]
    else:
        argv = [sys.executable, "-m", "specwatch", *args]
    pid, fd, _ = _spawn(argv)
    try:
        _drain(fd, seconds)
        rss = _status_mib(pid, "VmRSS"), _status_mib(pid, "VmHWM")
        names: list[str] = []
        if modules:
            os.kill(pid, signal.SIGUSR1)
            _drain(fd, 0.5)
            names = json.loads(dump.read_text()) if dump.exists() else []
            dump.unlink(missing_ok=True)
        return rss[0], rss[1], names
    finally:
        _reap(pid, fd)


def main() -> int:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tree", action="append", default=[], help="another checkout to compare")
    p.add_argument("--no-stages", action="store_true", help="only the monitor")
    p.add_argument("--no-gpu", action="store_true", help="run the monitor with --no-gpu")
    p.add_argument("--modules", action="store_true", help="count the monitor's modules")
    args = p.parse_args()
    for label, code in () if args.no_stages else STAGES:
        print(f"{label:<40} {stage_rss(code):6.1f} MiB peak")
    sim, url = overhead.start_sim("vllm")
    try:
        trees = [str(ROOT), *args.tree]
        got: dict[str, list[tuple[float, float, list[str]]]] = {t: [] for t in trees}
        extra = ["--no-gpu"] if args.no_gpu else []
        for _ in range(args.runs):
            for tree in trees:  # interleaved, so load on the machine falls on both alike
                os.environ["SPECWATCH_TREE"] = tree
                got[tree].append(monitor_rss(url, args.seconds, extra, args.modules))
    finally:
        os.environ.pop("SPECWATCH_TREE", None)
        sim.terminate()
        sim.wait(10)
    for tree, runs in got.items():
        rss = statistics.median(g[0] for g in runs)
        hwm = statistics.median(g[1] for g in runs)
        name = "this tree" if tree == str(ROOT) else tree
        flags = " --no-gpu" if args.no_gpu else ""
        line = f"specwatch --url{flags} (simulated vLLM), {name}: {rss:.1f} MiB, peak {hwm:.1f} MiB"
        names = runs[-1][2]
        if names:
            ours = sum(1 for n in names if n == "specwatch" or n.startswith("specwatch."))
            line += f"; {len(names)} modules, {ours} specwatch's"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
