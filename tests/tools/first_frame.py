#!/usr/bin/env python3
"""Where the first frame of ``specwatch --url URL`` goes: exec to the laid-out screen, by stage.

    .venv/bin/python tests/tools/first_frame.py            # 5 runs each, medians
    .venv/bin/python tests/tools/first_frame.py --runs 9
    .venv/bin/python tests/tools/first_frame.py --tree /tmp/base  # beside another checkout

Starts ``specwatch sim`` (8 GPUs, no NVML here), then on a 160x48 pseudo-terminal:

- ``python -c pass`` and ``python -c "import textual.app"`` (the interpreter and Textual's
  import floor),
- ``python -m specwatch --url URL`` timed to the GPU pane's title on the terminal (as
  ``cost_report.py``'s ``first_frame_s``: the figure of issue 13, target 0.6 s),
- the same start-up through this script's ``--child`` mode, which stamps each stage with the
  system-wide monotonic clock (``time.perf_counter`` is CLOCK_MONOTONIC on Linux, so the
  parent's exec time and the child's stamps share one clock): interpreter, imports (the CLI,
  then ``specwatch.ui.app`` with Textual), arguments to ``App()`` (settings, themes, session),
  App construction, Textual's prelude (reading CSS), compose and mount (CSS parse counted
  apart), and the first paint written to the terminal.

Wall-clock figures on a shared machine are noisy: compare runs made together.
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()
_C_START = time.process_time()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pty  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import termios  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SIZE = (160, 48)
TARGET_S = 0.6
MARK = b"GPUs"
STAGES = (
    ("interpreter", "exec", "start"),
    ("import specwatch.commands.main", "start", "cli"),
    ("import textual.app", "cli", "textual"),
    ("import specwatch.ui.app (rest)", "textual", "ui"),
    ("arguments, themes, session", "ui", "init0"),
    ("App() construction", "init0", "init1"),
    ("run() to compose (prelude, CSS read)", "init1", "compose"),
    ("compose, mount, CSS apply", "compose", "mounted"),
    ("mounted to first paint", "mounted", "paint"),
)


def _env() -> dict[str, str]:
    # SPECWATCH_TREE: another checkout's specwatch to measure (a before/after in one run).
    tree = os.environ.get("SPECWATCH_TREE", str(ROOT))
    return dict(os.environ, PYTHONPATH=tree, TERM="xterm-256color", COLORTERM="truecolor")


def _spawn(argv: list[str]) -> tuple[int, int, float]:
    pid, fd = pty.fork()
    if pid == 0:
        import fcntl

        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
        # ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH:
        # start in the tree measured, or another checkout's figures would be this one's.
        os.chdir(os.environ.get("SPECWATCH_TREE", str(ROOT)))
        os.execve(argv[0], argv, _env())
    return pid, fd, time.perf_counter()


def _reap(pid: int, fd: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            while select.select([fd], [], [], 0)[0] and os.read(fd, 1 << 16):
                pass
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.02)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)


def until_mark(argv: list[str], mark: bytes | None = MARK) -> tuple[float | None, float]:
    """(seconds from exec to ``mark`` on the terminal, the exec time); ``mark=None``: to exit."""
    pid, fd, t0 = _spawn(argv)
    seen = b""
    try:
        while time.perf_counter() - t0 < 10.0:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    return (time.perf_counter() - t0 if mark is None else None), t0
                seen = seen[-64:] + chunk
                if mark is not None and mark in seen:
                    return time.perf_counter() - t0, t0
        return None, t0
    finally:
        _reap(pid, fd)


def _child(url: str, report: str, profile: str | None) -> None:
    """Start the monitor as ``python -m specwatch --url URL`` would, stamping each stage.

    With ``profile``, cProfile runs from here to the first paint, dumps its stats there and
    the process ends.
    """
    stamps: dict[str, float] = {"start": _T_START}
    gc_s: dict[int, float] = {0: 0.0, 1: 0.0, 2: 0.0}
    gc_started = [0.0]

    def gc_watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.process_time()
        elif "paint" not in stamps:
            gc_s[info["generation"]] += time.process_time() - gc_started[0]

    import gc

    gc.callbacks.append(gc_watch)
    cpu: dict[str, float] = {"start": _C_START, "exec": 0.0}

    def stamp(name: str) -> None:
        if name not in stamps:
            stamps[name] = time.perf_counter()
            cpu[name] = time.process_time()

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    css_s = [0.0]
    import specwatch.commands.main

    stamp("cli")
    # As specwatch.commands.main.main does for the monitor before it imports Textual (run_tui).
    gc.disable()
    import textual.app

    stamp("textual")
    from textual.css.stylesheet import Stylesheet

    import specwatch.commands.tui  # what run_tui imports on the way
    from specwatch.ui.app import SpecwatchApp

    stamp("ui")

    def wrap(owner: Any, name: str, before: str | None, after: str | None) -> None:
        original = getattr(owner, name)

        def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
            if before is not None:
                stamp(before)
            result = original(self, *args, **kwargs)
            if after is not None:
                stamp(after)
            return result

        setattr(owner, name, hooked)

    wrap(SpecwatchApp, "__init__", "init0", "init1")
    wrap(SpecwatchApp, "compose", "compose", None)
    on_mount = SpecwatchApp.on_mount

    def mounted(self: SpecwatchApp) -> None:  # Textual passes no event to a 1-argument handler
        on_mount(self)
        stamp("mounted")

    SpecwatchApp.on_mount = mounted  # type: ignore[method-assign]
    parse_rules = Stylesheet._parse_rules

    def timed_parse(self: Stylesheet, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return parse_rules(self, *args, **kwargs)
        finally:
            css_s[0] += time.perf_counter() - t

    Stylesheet._parse_rules = timed_parse  # type: ignore[method-assign]
    display = textual.app.App._display

    def painted(self: Any, screen: Any, renderable: Any) -> None:
        display(self, screen, renderable)
        ready = renderable is not None and self._running and not self._batch_count
        if ready and "paint" not in stamps:
            stamp("paint")
            stamps["css_parse_s"] = css_s[0]
            stamps.update({f"gc{g}_s": v for g, v in gc_s.items()})
            Path(report).write_text(json.dumps({"wall": stamps, "cpu": cpu}))
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(profile))
                os._exit(0)

    textual.app.App._display = painted  # type: ignore[method-assign]
    sys.argv = ["specwatch", "--url", url]
    raise SystemExit(specwatch.commands.main.main(["--url", url]))


def staged(url: str) -> dict[str, tuple[float, float]] | None:
    """One ``--child`` start: (wall, CPU) seconds per stage, the CSS parse and the mark on
    the terminal."""
    report = Path(os.environ.get("TMPDIR", "/tmp")) / f"first-frame-{os.getpid()}.json"
    report.unlink(missing_ok=True)
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--url",
        url,
        "--report",
        str(report),
    ]
    frame, t0 = until_mark(argv)
    if frame is None or not report.exists():
        return None
    got = json.loads(report.read_text())
    report.unlink()
    wall, cpu = got["wall"], got["cpu"]
    wall["exec"] = t0
    out = {label: (wall[b] - wall[a], cpu[b] - cpu[a]) for label, a, b in STAGES}
    nan = float("nan")
    out["  of which CSS parse"] = (wall["css_parse_s"], nan)
    for g in range(3):
        out[f"garbage collection, generation {g}"] = (nan, wall[f"gc{g}_s"])
    out["exec to first paint"] = (wall["paint"] - t0, cpu["paint"])
    out["exec to 'GPUs' on the terminal"] = (frame, nan)
    return out


def main() -> int:
    """Measure and print; exit 1 when the first frame misses the target."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tree", action="append", default=[], help="another checkout to compare")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--report", help=argparse.SUPPRESS)
    p.add_argument("--profile", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.url, args.report, args.profile)
    sys.path.insert(0, str(ROOT))
    from tests.tools import overhead

    py = sys.executable
    trees = [os.environ.get("SPECWATCH_TREE", str(ROOT)), *args.tree]
    real: dict[str, list[float | None]] = {t: [] for t in trees}
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {t: [] for t in trees}
    sim, url = overhead.start_sim()
    try:
        bare = [until_mark([py, "-c", "pass"], None)[0] for _ in range(args.runs)]
        floor = [until_mark([py, "-c", "import textual.app"], None)[0] for _ in range(args.runs)]
        for _ in range(args.runs):
            for tree in trees:  # interleaved, so load on the machine falls on each alike
                os.environ["SPECWATCH_TREE"] = tree
                real[tree].append(until_mark([py, "-m", "specwatch", "--url", url])[0])
                got = staged(url)
                if got is not None:
                    runs[tree].append(got)
    finally:
        sim.terminate()
        sim.wait(10)

    def med(xs: list[float | None]) -> str:
        known = [x for x in xs if x is not None]
        return f"{statistics.median(known):.3f} s" if known else "none seen"

    print(f"medians of {args.runs} runs on a {SIZE[0]}x{SIZE[1]} pty")
    print(f"{'python -c pass (to exit)':<40} {med(bare)}")
    floor_label = 'python -c "import textual.app" (to exit)'
    print(f"{floor_label:<40} {med(floor)}")
    for tree in trees:
        if len(trees) > 1:
            print(f"--- {'this tree' if tree == str(ROOT) else tree}")
        print(f"{'specwatch --url: first frame':<40} {med(real[tree])}  (target <= {TARGET_S} s)")
        done = runs[tree]
        print(f"by stage (--child, stamped; {len(done)} runs): {'wall':>7} {'CPU':>7}")
        for label in done[0] if done else []:
            w = statistics.median(r[label][0] for r in done)
            c = statistics.median(r[label][1] for r in done)
            print(f"  {label:<38} {w:.3f} s {c:.3f} s")
    known = [x for x in real[trees[0]] if x is not None]
    return 0 if known and statistics.median(known) <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
