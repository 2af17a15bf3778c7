#!/usr/bin/env python3
"""How much does watching cost? CPU and memory of the monitor, with and without its UI.

    .venv/bin/python tests/tools/overhead.py              # 60 s each, 160x48, 8 GPUs, 1 s rates

What runs where:

* the simulated server runs in its own process (``specwatch sim --gpus 8 --background 3``), so
  its CPU is not counted;
* **app**: the whole TUI in a child process on a real pseudo-terminal of 160x48 (Textual's real
  Linux driver, real ANSI output, which this script reads and discards), at the default rates:
  GPU sampler thread every 1 s on a fake NVML over 8 simulated GPUs under load, ``/metrics``
  scraped over HTTP every 1 s, the screen redrawn every 2 s (only the cells that changed);
* **bare**: the same sampler thread and the same scrape loop in a child process, with no UI.

Each child measures its own CPU time (``time.process_time``: user + system, all threads) over
the measured window, after a warm-up, and its peak RSS (``ru_maxrss``). The figure is CPU
seconds per minute of monitoring; 0.6 CPU-s/min is 1% of one core. FakeNvml asks the simulated
boards for their state on every NVML call; that physics stands in for the driver, so its CPU is
metered (thread time around ``SimGpus.states``) and subtracted, and shown in its own column.

Developer knobs for the ``app`` child: ``SPECWATCH_PROFILE=FILE`` writes a cProfile of the
measured window; ``SPECWATCH_NO_REDRAW=1`` turns drawing off, to see what the rest costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import pty
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PYTHON = sys.executable
"""The interpreter of the measured children. ``cost_report.py`` points it at a venv holding only
specwatch's runtime dependencies, as a user's install has: in the dev venv import-linter brings
click, and ``import httpx`` then loads httpx's command line too (click, pygments' lexers,
rich.progress: about 100 modules and 5 MiB that no user's monitor carries)."""

WARMUP_S = 8.0
"""Seconds before measuring: imports, NVML open, first scrapes and the first full draw."""


SIM_CPU = [0.0]
"""CPU seconds spent inside the simulated GPUs' physics (FakeNvml -> SimGpus.states)."""


def _sources(url: str, count: int = 8) -> Any:
    """The live sources; the simulated GPUs' own CPU is metered so it can be taken out."""
    from specwatch.session import LiveSession, NvmlGpuSource
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sim.gpus import SimGpus
    from specwatch.sources.http.endpoint import parse_endpoint

    gpus = SimGpus(count=count, start_t=time.monotonic())
    gpus.advance_to(time.monotonic(), load=0.9)
    states = gpus.states

    # FakeNvml asks the simulated boards for their state on every NVML call (about 100 calls
    # per tick); that physics stands in for the GPU driver and is not the monitor's own work.
    def metered_states(t: float | None = None) -> Any:
        c0 = time.thread_time()
        try:
            return states(t)
        finally:
            SIM_CPU[0] += time.thread_time() - c0

    gpus.states = metered_states  # type: ignore[method-assign]
    nvml = FakeNvml(gpus)
    return LiveSession([parse_endpoint(url)], NvmlGpuSource(1.0, nvml=nvml), metrics_interval_s=1.0)


def thread_cpu() -> dict[str, float]:
    """CPU seconds per thread of this process, by thread name (Linux ``/proc``)."""
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(task.name), f"tid{task.name}")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


class GcMeter:
    """Seconds in the cyclic garbage collector (any thread) and its runs per generation, from
    its making (the start of a measured window) until :meth:`stop`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.runs = [0, 0, 0]
        self._t0 = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0
            self.runs[info["generation"]] += 1

    def stop(self) -> dict[str, Any]:
        """Stop metering; the collector's time and runs, for the report."""
        gc.callbacks.remove(self)
        return {"gc_s": self.seconds, "gc_runs": list(self.runs)}


def _report(path: Path, cpu_s: float, wall_s: float, sim_s: float, extra: dict[str, Any]) -> None:
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    data = {
        "cpu_s": cpu_s,
        "sim_gpu_cpu_s": sim_s,
        "wall_s": wall_s,
        "peak_rss_mib": rss_kib / 1024.0,
        "threads_cpu_s_since_start": thread_cpu(),
        **extra,
    }
    path.write_text(json.dumps(data))


def child_app(url: str, seconds: float, report: Path, count: int = 8) -> None:
    """The full TUI; measures itself between WARMUP_S and WARMUP_S + seconds after mounting."""
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.settings import AppSettings

    sources = _sources(url, count)
    app = SpecwatchApp(AppSettings(), sources)  # as run: the terminal watch on too
    if os.environ.get("SPECWATCH_NO_REDRAW"):  # for finding where the time goes
        app.redraw = lambda: None  # type: ignore[method-assign]
    marks: dict[str, float] = {}
    meters: list[GcMeter] = []

    profile = os.environ.get("SPECWATCH_PROFILE")
    prof: Any = None

    def start() -> None:
        nonlocal prof
        if profile:
            import cProfile

            prof = cProfile.Profile(time.thread_time)  # CPU time: a preempted call is not ours
            prof.enable()
        marks["cpu0"], marks["t0"] = time.process_time(), time.monotonic()
        marks["sim0"] = SIM_CPU[0]
        meters.append(GcMeter())
        app.set_timer(seconds, stop)

    def stop() -> None:
        cpu, wall = time.process_time() - marks["cpu0"], time.monotonic() - marks["t0"]
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        sim = SIM_CPU[0] - marks["sim0"]
        builds = {type(p).__name__: p.builds for p in app._panes}
        extra = {"messages": dict(app.message_counts), "builds": builds, **meters[0].stop()}
        _report(report, cpu, wall, sim, extra)
        app.exit()

    app.call_later(lambda: app.set_timer(WARMUP_S, start))
    try:
        app.run()
    finally:
        sources.stop()


def child_bare(url: str, seconds: float, report: Path, count: int = 8) -> None:
    """The same live session without a UI: sampler thread plus the scrape loop; events dropped."""
    sources = _sources(url, count)
    counts: dict[str, int] = {}

    def sink(message: object) -> None:
        name = type(message).__name__
        counts[name] = counts.get(name, 0) + 1

    async def main() -> None:
        sources.subscribe(sink)
        sources.start()
        await asyncio.sleep(WARMUP_S)
        prof = _profile_start()
        cpu0, t0, sim0 = time.process_time(), time.monotonic(), SIM_CPU[0]
        meter = GcMeter()
        await asyncio.sleep(seconds)
        cpu, wall, sim = time.process_time() - cpu0, time.monotonic() - t0, SIM_CPU[0] - sim0
        _profile_stop(prof)
        _report(report, cpu, wall, sim, {"messages": counts, **meter.stop()})
        await sources.aclose()

    try:
        asyncio.run(main())
    finally:
        sources.stop()


def _profile_start() -> Any:
    """cProfile of this thread when ``SPECWATCH_PROFILE=FILE`` is set (the event loop's)."""
    if not os.environ.get("SPECWATCH_PROFILE"):
        return None
    import cProfile

    prof = cProfile.Profile(time.thread_time)  # CPU time: a preempted call is not ours
    prof.enable()
    return prof


def _profile_stop(prof: Any) -> None:
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["SPECWATCH_PROFILE"])


def start_sim(dialect: str = "sglang") -> tuple[subprocess.Popen[str], str]:
    """``specwatch sim`` in its own process; returns it and its URL."""
    cmd = [
        sys.executable,
        "-m",
        "specwatch",
        "sim",
        "--port",
        "0",
        "--gpus",
        "8",
        "--background",
        "3",
        "--dialect",
        dialect,
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next((w for w in line.split() if w.startswith("http://")), "")
    if not url:
        proc.kill()
        raise SystemExit(f"could not start the simulator: {line!r}")
    return proc, url.rstrip(".,")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLORTERM="truecolor")


def run_child(
    mode: str, url: str, seconds: float, size: tuple[int, int], gpus: int = 8
) -> dict[str, Any]:
    """Run one measurement in a child (the app on a pty of ``size``); return its report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        args = [PYTHON, __file__, "--child", mode, "--url", url]
        args += ["--seconds", str(seconds), "--report", str(report), "--gpus", str(gpus)]
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(PYTHON, args, _env())
        fcntl_size = struct.pack("HHHH", size[1], size[0], 0, 0)
        import fcntl

        fcntl.ioctl(fd, termios.TIOCSWINSZ, fcntl_size)
        os.kill(pid, signal.SIGWINCH)
        written = 0
        deadline = time.monotonic() + WARMUP_S + seconds + 60
        measured_from = time.monotonic() + WARMUP_S
        measured_bytes = 0
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                written += len(chunk)
                if time.monotonic() >= measured_from:
                    measured_bytes += len(chunk)
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        else:
            os.kill(pid, signal.SIGKILL)
        os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if not report.exists():
            raise SystemExit(f"{mode}: the child wrote no report")
        data: dict[str, Any] = json.loads(report.read_text())
        data["terminal_bytes"] = measured_bytes
        return data


def main() -> int:
    p = argparse.ArgumentParser(description="CPU and memory of the monitor, with and without UI")
    p.add_argument("--seconds", type=float, default=60.0, help="measured seconds per mode")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=48)
    p.add_argument("--child", choices=("app", "bare"), help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--gpus", type=int, default=8, help="simulated GPUs the monitor reads")
    args = p.parse_args()
    if args.child == "app":
        child_app(args.url, args.seconds, args.report, args.gpus)
        return 0
    if args.child == "bare":
        child_bare(args.url, args.seconds, args.report, args.gpus)
        return 0

    sim, url = start_sim()
    try:
        size = (args.width, args.height)
        bare = run_child("bare", url, args.seconds, size, args.gpus)
        app = run_child("app", url, args.seconds, size, args.gpus)
    finally:
        sim.terminate()
        sim.wait(10)
    result: dict[str, Any] = {
        "seconds": args.seconds,
        "size": f"{args.width}x{args.height}",
        "gpus": args.gpus,
    }
    for name, r in (("app", app), ("bare", bare)):
        per_min = 60.0 / r["wall_s"]
        r["cpu_s_per_min_raw"] = r["cpu_s"] * per_min
        r["sim_gpu_cpu_s_per_min"] = r["sim_gpu_cpu_s"] * per_min
        r["cpu_s_per_min"] = (r["cpu_s"] - r["sim_gpu_cpu_s"]) * per_min
        r["core_pct"] = r["cpu_s_per_min"] / 0.6
        result[name] = r
    bare_min = result["bare"]["cpu_s_per_min"]
    result["ratio"] = result["app"]["cpu_s_per_min"] / bare_min if bare_min > 0 else None
    result["ui_cpu_s_per_min"] = result["app"]["cpu_s_per_min"] - bare_min
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, app["terminal_bytes"] / args.seconds)
    return 0 if result["app"]["core_pct"] <= 2.0 else 1


def print_table(result: dict[str, Any], out_bytes_s: float) -> None:
    """The figures as a small table."""
    secs, size = result["seconds"], result["size"]
    print(f"specwatch overhead: {secs:.0f} s measured per mode at {size}, {result['gpus']} GPUs,")
    print("GPU sampling 1 s, /metrics 1 s; simulator server in its own process (not counted);")
    print("the simulated GPUs' physics inside FakeNvml metered and taken out (shown apart)")
    print(f"{'':22}{'CPU s/min':>10}{'% of a core':>13}{'peak RSS':>11}{'sim GPUs':>10}")
    for name, label in (("app", "whole app (TUI)"), ("bare", "sampling without UI")):
        r = result[name]
        print(
            f"{label:22}{r['cpu_s_per_min']:>10.3f}{r['core_pct']:>12.2f}%"
            f"{r['peak_rss_mib']:>8.0f} MiB{r['sim_gpu_cpu_s_per_min']:>9.3f}s"
        )
    if result["ratio"] is not None:
        print(
            f"app / bare: {result['ratio']:.2f}x; the UI itself: "
            f"{result['ui_cpu_s_per_min']:.3f} CPU-s/min; "
            f"terminal output {out_bytes_s / 1024:.1f} KiB/s"
        )
    verdict = "meets" if result["app"]["core_pct"] <= 2.0 else "MISSES"
    print(f"target <= 2% of one core (1.2 CPU-s/min) for the whole app: {verdict}")


if __name__ == "__main__":
    raise SystemExit(main())
