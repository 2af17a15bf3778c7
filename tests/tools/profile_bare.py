#!/usr/bin/env python3
"""Where the event-loop thread of ``overhead.py``'s bare child spends its CPU.

    .venv/bin/python tests/tools/profile_bare.py [--seconds 20] [--out /tmp/bare.prof] [--rows 30]

Runs the bare child (sampler thread + ``/metrics`` scrape loop, no UI) in this process against
``specwatch sim``, with a cProfile of the event-loop thread timed by thread CPU time (a
wall-clock profile would charge the waits in ``epoll`` and ``send`` to the loop), and prints the
child's report and the top entries by own time and by cumulative time. Profiling inflates the
CPU figure; ``overhead.py`` gives the real one.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    """Profile the bare child and print its top entries."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bare.prof")
    parser.add_argument("--rows", type=int, default=30, help="entries printed per ordering")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.tools import overhead

    def start() -> Any:
        prof = cProfile.Profile(time.thread_time)
        prof.enable()
        return prof

    os.environ["SPECWATCH_PROFILE"] = str(args.out)
    overhead._profile_start = start
    sim, url = overhead.start_sim()
    report = args.out.with_suffix(".json")
    try:
        overhead.child_bare(url, args.seconds, report)
    finally:
        sim.terminate()
        sim.wait(10)
    figures = json.loads(report.read_text())
    figures.pop("threads_cpu_s_since_start", None)
    print(json.dumps(figures))
    stats = pstats.Stats(str(args.out))
    stats.sort_stats("tottime").print_stats(args.rows)
    stats.sort_stats("cumulative").print_stats(args.rows)


if __name__ == "__main__":
    main()
