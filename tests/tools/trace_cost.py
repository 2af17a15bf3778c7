#!/usr/bin/env python3
"""What reading a profile trace costs: the streaming reader (``read_rank``, ijson's C backend)
against the standard library's ``json.load`` of the same file, in the same run, each in its own
child process so that peak RSS is its own.

    .venv/bin/python tests/tools/trace_cost.py [--mb 200] [--steps N] [--keep FILE]

The trace is the simulator's (an eager verify step launches 600 kernels, so each step is about
1,800 events); ``--mb`` sizes it by repeating steps until the uncompressed JSON reaches that
many megabytes. Prints MB/s and peak RSS of each reader and their ratios.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _make(path: Path, mb: float) -> int:
    from specwatch.sim.profiler import SimStep, write_trace

    probe = path.with_name("probe.trace.json")
    one = [SimStep("VERIFY", 4, 16, 29.3, False)]
    write_trace(probe, engine="sglang", rank=0, tp=2, steps=one)
    per_step = probe.stat().st_size
    probe.unlink()
    steps = max(1, int(mb * 1e6 / per_step))
    write_trace(path, engine="sglang", rank=0, tp=2, steps=(one[0] for _ in range(steps)))
    return steps


def _child(mode: str, path: str) -> None:
    t0 = time.perf_counter()
    if mode == "stream":
        from specwatch.sources.profile.trace import read_rank

        rank = read_rank(Path(path), engine="sglang")
        n = rank.kinds[0].n if rank.kinds else 0
    else:
        with open(path, "rb") as f:
            doc = json.load(f)
        n = sum(1 for e in doc["traceEvents"] if e.get("cat") == "user_annotation")
    seconds = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "steps": n}))


def _measure(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=200.0, help="uncompressed trace size (200)")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--no-stdlib", action="store_true", help="skip json.load (a 1 GB trace)")
    args = p.parse_args()
    if args.child:
        if args.child[0] == "make":
            print(_make(Path(args.child[1]), args.mb))
        else:
            _child(*args.child)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cost-TP-0.trace.json"
        # made in a child: a child's peak RSS starts from its parent's at fork
        made = subprocess.run(
            [sys.executable, __file__, "--mb", str(args.mb), "--child", "make", str(path)],
            check=True,
            capture_output=True,
            text=True,
        )
        steps = int(made.stdout)
        size_mb = path.stat().st_size / 1e6
        print(f"trace: {size_mb:.0f} MB uncompressed, {steps} eager verify steps")
        stream = _measure("stream", path)
        rows = [("read_rank (ijson yajl2_c)", stream)]
        if not args.no_stdlib:
            rows.append(("json.load (stdlib)", _measure("stdlib", path)))
        for name, r in rows:
            print(
                f"{name:<28} {size_mb / r['seconds']:7.1f} MB/s  peak {r['peak_mib']:7.1f} MiB"
                f"  steps {r['steps']:.0f}"
            )
        if len(rows) == 2:
            std = rows[1][1]
            print(
                f"streaming / stdlib: speed {std['seconds'] / stream['seconds']:.2f}x,"
                f" peak memory {stream['peak_mib'] / std['peak_mib']:.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
