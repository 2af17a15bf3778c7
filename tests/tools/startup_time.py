"""Print how long ``specwatch --help`` takes beside a bare ``python -c pass`` (median of 5).

Run from the repository root: ``python tests/tools/startup_time.py``. The target is 0.3 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.3
RUNS = 5


def _median_wall_s(argv: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    """Measure and print; exit 1 when ``specwatch --help`` misses the target."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    bare = _median_wall_s([sys.executable, "-c", "pass"], env)
    helped = _median_wall_s([sys.executable, "-m", "specwatch", "--help"], env)
    print(f"python -c pass      {bare:.3f} s")
    print(f"specwatch --help    {helped:.3f} s  (target <= {TARGET_S:.1f} s)")
    return 0 if helped <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
