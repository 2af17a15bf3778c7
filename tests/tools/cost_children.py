#!/usr/bin/env python3
"""The processes ``cost_report.py`` measures, and how it starts, watches and stops them.

What runs where:

* the simulated server runs in its own process (``specwatch sim --gpus 8 --background 3``), so
  its CPU is not counted;
* **app**: the whole TUI in a child on a real pseudo-terminal (Textual's real Linux driver,
  real ANSI output, read and discarded here), at the default rates: GPU samples every second
  on a fake NVML over simulated GPUs under load, ``/metrics`` every second;
* **bare**: the same live session in a child with no UI (its events dropped);
* **serve**: a replay server streaming a recorded vLLM completion at a fixed chunk rate, faster
  than the simulator's own engine steps, for the benchmark client's chunk rate;
* **trace-make**, **trace-read**, **trace-stdlib**: the simulator's eager profile trace written
  to a size, then read by ``read_rank`` (streaming, ijson's C backend) or ``json.load``, each in
  a child of its own so that its peak RSS is its own (a child starts from its parent's at fork).

Each measured child reports its own CPU time (``time.process_time``: user and system, all
threads) over the measured window after a warm-up, and its peak RSS. FakeNvml asks the
simulated boards for their state on every NVML call; that physics stands in for the driver, so
its CPU is metered (thread time around ``SimGpus.states``) and reported apart, to be taken out.

Developer knobs for the app and bare children: ``SPECWATCH_PROFILE=FILE`` writes a cProfile of
the measured window (thread CPU time); ``SPECWATCH_NO_REDRAW=1`` turns the app's drawing off, to
see what the rest costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
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
click, and ``import httpx`` then loads httpx's command line too."""

SIZE = (160, 48)
"""The pseudo-terminal every measured monitor draws on (columns, rows)."""

WARMUP_S = 8.0
"""Seconds before measuring: imports, NVML open, first scrapes and the first full draw."""

SIM_CPU = [0.0]
"""CPU seconds spent inside the simulated GPUs' physics (FakeNvml -> SimGpus.states)."""

MODEL = "sim/Llama-3.1-8B-Instruct"


def env() -> dict[str, str]:
    """The children's environment: this tree importable, a colour terminal."""
    return dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLORTERM="truecolor")


def start_sim(
    dialect: str = "sglang", dcgm: bool = False
) -> tuple[subprocess.Popen[str], str, str]:
    """``specwatch sim`` in its own process; returns it, its URL and, with ``dcgm``, the URL of
    its dcgm-exporter on a free port (else ``""``: it tries dcgm-exporter's own port)."""
    cmd = [sys.executable, "-m", "specwatch", "sim", "--port", "0", "--gpus", "8"]
    cmd += ["--background", "3", "--dialect", dialect]
    if dcgm:
        cmd += ["--dcgm-port", "0"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env())
    assert proc.stdout is not None
    urls = [_url(proc.stdout.readline())]
    if dcgm:
        urls.append(_url(proc.stdout.readline()))
    if not all(urls):
        proc.kill()
        raise SystemExit(f"could not start the simulator ({' '.join(cmd[3:])})")
    return proc, urls[0], urls[1] if dcgm else ""


def _url(line: str) -> str:
    return next((w for w in line.split() if w.startswith("http://")), "").rstrip(".,")


def stop_sim(proc: subprocess.Popen[str]) -> None:
    """Stop a simulator this module started."""
    proc.terminate()
    proc.wait(10)


def spawn(argv: list[str], core: int | None = None) -> tuple[int, int]:
    """``argv`` on a pseudo-terminal of :data:`SIZE` (pinned to ``core``); its pid and fd."""
    pid, fd = pty.fork()
    if pid == 0:
        if core is not None:
            os.sched_setaffinity(0, {core})
        os.execve(argv[0], argv, env())
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGWINCH)
    return pid, fd


def drain(fd: int, timeout_s: float) -> bytes | None:
    """What the terminal received within ``timeout_s`` (``b""``: nothing); ``None`` once the
    child closed it."""
    ready, _, _ = select.select([fd], [], [], timeout_s)
    if not ready:
        return b""
    try:
        return os.read(fd, 1 << 16) or None
    except OSError:
        return None


def stop(pid: int, fd: int) -> None:
    """SIGTERM, then SIGKILL after 5 s; reaps the child and closes its terminal."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if drain(fd, 0.05) is None:
            time.sleep(0.01)  # the terminal is closed: only the exit is left to wait for
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)


def proc_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid: int) -> float:
    """Resident set size of process ``pid`` now, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def run_child(mode: str, url: str, seconds: float, gpus: int = 8) -> dict[str, Any]:
    """One measurement in a child (``app`` or ``bare``) on a pseudo-terminal; its report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        argv = [PYTHON, __file__, mode, "--url", url, "--seconds", str(seconds)]
        pid, fd = spawn([*argv, "--report", str(report), "--gpus", str(gpus)])
        deadline = time.monotonic() + WARMUP_S + seconds + 60
        while time.monotonic() < deadline and drain(fd, 0.5) is not None:
            pass
        stop(pid, fd)
        if not report.exists():
            raise SystemExit(f"{mode}: the child wrote no report")
        data: dict[str, Any] = json.loads(report.read_text())
        return data


def _sources(url: str, count: int) -> Any:
    """The live session over simulated GPUs whose own CPU is metered, to be taken out."""
    from specwatch.session import LiveSession, NvmlGpuSource
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sim.gpus import SimGpus
    from specwatch.sources.http.endpoint import parse_endpoint

    gpus = SimGpus(count=count, start_t=time.monotonic())
    gpus.advance_to(time.monotonic(), load=0.9)
    states = gpus.states

    def metered_states(t: float | None = None) -> Any:
        c0 = time.thread_time()
        try:
            return states(t)
        finally:
            SIM_CPU[0] += time.thread_time() - c0

    gpus.states = metered_states  # type: ignore[method-assign]
    nvml = FakeNvml(gpus)
    return LiveSession([parse_endpoint(url)], NvmlGpuSource(1.0, nvml=nvml), metrics_interval_s=1.0)


class Window:
    """The measured window of a child: CPU, wall and simulated-GPU time from its start."""

    def __init__(self) -> None:
        self.prof: Any = None
        if os.environ.get("SPECWATCH_PROFILE"):
            import cProfile

            self.prof = cProfile.Profile(time.thread_time)  # CPU time: a preempted call is not ours
            self.prof.enable()
        self.cpu0, self.t0, self.sim0 = time.process_time(), time.monotonic(), SIM_CPU[0]

    def report(self, path: Path) -> None:
        """Write the window's figures to ``path`` as JSON."""
        cpu, wall = time.process_time() - self.cpu0, time.monotonic() - self.t0
        if self.prof is not None:
            self.prof.disable()
            self.prof.dump_stats(os.environ["SPECWATCH_PROFILE"])
        data = {
            "cpu_s": cpu,
            "sim_gpu_cpu_s": SIM_CPU[0] - self.sim0,
            "wall_s": wall,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }
        path.write_text(json.dumps(data))


def child_app(url: str, seconds: float, report: Path, count: int) -> None:
    """The full TUI; measures itself from WARMUP_S after mounting for ``seconds``."""
    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.settings import AppSettings

    sources = _sources(url, count)
    app = SpecwatchApp(AppSettings(), sources)
    if os.environ.get("SPECWATCH_NO_REDRAW"):
        app.redraw = lambda: None  # type: ignore[method-assign]
    windows: list[Window] = []

    def start() -> None:
        windows.append(Window())
        app.set_timer(seconds, finish)

    def finish() -> None:
        windows[0].report(report)
        app.exit()

    app.call_later(lambda: app.set_timer(WARMUP_S, start))
    try:
        app.run()
    finally:
        sources.stop()


def child_bare(url: str, seconds: float, report: Path, count: int) -> None:
    """The same live session without a UI; its events are dropped."""
    sources = _sources(url, count)

    async def main() -> None:
        sources.subscribe(lambda message: None)
        sources.start()
        await asyncio.sleep(WARMUP_S)
        window = Window()
        await asyncio.sleep(seconds)
        window.report(report)
        await sources.aclose()

    try:
        asyncio.run(main())
    finally:
        sources.stop()


def record_stream() -> list[dict[str, Any]]:
    """The chunks of a three-token stream from the simulated vLLM, the replay's template."""
    import httpx

    sim, url, _ = start_sim("vllm")
    try:
        body = {
            "model": MODEL,
            "prompt": "hi",
            "max_tokens": 3,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        chunks = []
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line[6:]))
        return chunks
    finally:
        stop_sim(sim)


def start_replay(template: Path, chunks: int, rate: float) -> tuple[subprocess.Popen[str], str]:
    """The replay server in its own process; it and its URL."""
    argv = [sys.executable, __file__, "serve", "--template", str(template)]
    argv += ["--chunks", str(chunks), "--rate", str(rate)]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env())
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def serve(template: Path, chunks: int, rate: float) -> None:
    """The replay server: prints its URL, then streams ``chunks`` chunks a request at ``rate``
    a second, renumbered from the template, until killed."""
    from aiohttp import web

    first, *_, usage_only = json.loads(template.read_text())
    lines = []
    for i in range(1, chunks + 1):
        choice = dict(first["choices"][0], finish_reason="length" if i == chunks else None)
        usage = {"prompt_tokens": 1, "total_tokens": 1 + i, "completion_tokens": i}
        chunk = dict(first, choices=[choice], usage=usage)
        lines.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    usage = {"prompt_tokens": 1, "total_tokens": 1 + chunks, "completion_tokens": chunks}
    tail = dict(usage_only, usage=usage)
    lines.append(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        t0 = time.perf_counter()
        sent = 0
        while sent < len(lines):
            due = min(len(lines), int((time.perf_counter() - t0) * rate) + 1)
            if due > sent:
                await resp.write(b"".join(lines[sent:due]))
                sent = due
            else:
                await asyncio.sleep(0.001)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)

    async def main() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def make_trace(path: Path, mb: float) -> int:
    """The simulator's eager trace (600 kernels a verify step, about 1,800 events), repeated
    until it is ``mb`` MB uncompressed; returns the number of steps."""
    from specwatch.sim.profiler import SimStep, write_trace

    probe = path.with_name("probe.trace.json")
    one = SimStep("VERIFY", 4, 16, 29.3, False)
    write_trace(probe, engine="sglang", rank=0, tp=2, steps=[one])
    steps = max(1, int(mb * 1e6 / probe.stat().st_size))
    probe.unlink()
    write_trace(path, engine="sglang", rank=0, tp=2, steps=(one for _ in range(steps)))
    return steps


def read_trace(mode: str, path: Path) -> dict[str, float]:
    """Read ``path`` (``trace-read``: streaming; ``trace-stdlib``: ``json.load``); its figures."""
    t0 = time.perf_counter()
    if mode == "trace-read":
        from specwatch.sources.profile.trace import read_rank

        rank = read_rank(path, engine="sglang")
        n = rank.kinds[0].n if rank.kinds else 0
    else:
        with open(path, "rb") as f:
            doc = json.load(f)
        n = sum(1 for e in doc["traceEvents"] if e.get("cat") == "user_annotation")
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mib": peak, "steps": n}


def main() -> int:
    """Run one child (called by this module's own ``run_child`` and ``start_replay``)."""
    p = argparse.ArgumentParser(description="a process cost_report.py measures")
    p.add_argument(
        "mode", choices=("app", "bare", "serve", "trace-make", "trace-read", "trace-stdlib")
    )
    p.add_argument("--url")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--report", type=Path)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--template", type=Path)
    p.add_argument("--chunks", type=int, default=20_000)
    p.add_argument("--rate", type=float, default=20_000.0)
    p.add_argument("--trace", type=Path)
    p.add_argument("--mb", type=float, default=100.0)
    args = p.parse_args()
    if args.mode == "trace-make":
        print(make_trace(args.trace, args.mb))
    elif args.mode.startswith("trace-"):
        print(json.dumps(read_trace(args.mode, args.trace)))
    elif args.mode == "serve":
        serve(args.template, args.chunks, args.rate)
    elif args.mode == "app":
        child_app(args.url, args.seconds, args.report, args.gpus)
    else:
        child_bare(args.url, args.seconds, args.report, args.gpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
