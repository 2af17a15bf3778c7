#!/usr/bin/env python3
"""RSS, CPU and bytes written over time: vllmstat 0.9.1 and specwatch checkouts, side by side.

    .venv/bin/python tests/tools/rss_beside.py                      # 75 s, this tree
    .venv/bin/python tests/tools/rss_beside.py --seconds 300 --every 60 --tree /tmp/base

``cost_report.py`` reads RSS once, about 68 s in, and a reading there moves by about
0.5-1 MiB from run to run; this one follows the processes: one ``specwatch sim --dialect
vllm``, and on it vllmstat and each checkout (``--tree``, this one by default) at the same time,
each with ``--no-gpu`` and 1 s rates on its own 160x48 pseudo-terminal, cores alternated. Every
``--every`` seconds it prints each one's RSS (MiB), CPU seconds so far and KiB written to its
terminal. Run together, they share the same simulated load; CPU figures are for a trend only
(the processes share the machine's cores), ``cost_report.py`` is the place for them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.tools import cost_report, overhead  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=75.0)
    p.add_argument("--every", type=float, default=10.0, help="seconds between readings")
    p.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    args = p.parse_args()
    trees: list[Path] = args.tree or [ROOT]
    exe = cost_report._vllmstat()
    if not exe.startswith("/"):
        print(f"vllmstat not available: {exe}")
        return 1
    python = cost_report.runtime_python()
    cores = sorted(os.sched_getaffinity(0))
    sim, url = overhead.start_sim("vllm")
    watched: list[tuple[str, int, int]] = []
    written: dict[int, int] = {}
    try:
        pid, fd = cost_report._spawn([exe, "-u", url, "-i", "1", "--no-gpu"], cores[0])
        watched.append(("vllmstat", pid, fd))
        for i, tree in enumerate(trees, start=1):
            argv = [python, "-m", "specwatch", "--url", url, "--interval", "1", "--no-gpu"]
            pid, fd = cost_report._spawn(argv, cores[i % len(cores)], tree.resolve())
            watched.append((str(tree), pid, fd))
        heads = [f"{name[-24:]:>24} MiB   CPU s  KiB out" for name, _, _ in watched]
        print("    s  " + "  ".join(heads))
        t0 = time.monotonic()
        due = min(5.0, args.every)
        while (now := time.monotonic() - t0) < args.seconds:
            ready, _, _ = select.select([fd for _, _, fd in watched], [], [], 0.1)
            for _, _, fd in watched:
                if fd in ready:
                    with contextlib.suppress(OSError):
                        written[fd] = written.get(fd, 0) + len(os.read(fd, 1 << 16))
            if now >= due:
                row = [
                    f"{cost_report._proc_rss_mib(pid):28.1f} {cost_report._proc_cpu_s(pid):7.2f}"
                    f" {written.get(fd, 0) // 1024:8d}"
                    for _, pid, fd in watched
                ]
                print(f"{due:5.0f}  " + "  ".join(row), flush=True)
                due += args.every
    finally:
        for _, pid, fd in watched:
            cost_report._stop(pid, fd)
        sim.terminate()
        sim.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
