"""The recording's commands: ``specwatch record`` (headless, on the live session),
``specwatch replay`` (in the monitor) and ``specwatch export``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO, cast

from specwatch.commands.arguments import (
    add_server_arguments,
    add_slo_arguments,
    add_source_arguments,
    duration,
    duration_interval,
    say_error,
    shared_help,
    slo_of,
    source_options,
)

EXIT_USAGE = 2


def add_record_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch record``."""
    add_server_arguments(p, fleet=False)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        metavar="FILE",
        help="the recording (default: specwatch-DATE-TIME.sqlite here)",
    )
    p.add_argument(
        "--duration",
        type=duration,
        default=None,
        metavar="D",
        help="stop after this long (90s, 10m, 2h; default: until Ctrl-C)",
    )
    p.add_argument(
        "--retention",
        type=duration,
        default=None,
        metavar="D",
        help="keep only the last D (e.g. 24h); older rows are trimmed as it records",
    )
    p.add_argument(
        "--interval",
        type=duration_interval,
        default=1.0,
        metavar="S",
        help=shared_help("--interval", 1),
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="record a simulated server with 8 simulated GPUs instead of --url",
    )
    add_source_arguments(p)


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch replay``."""
    p.add_argument("file", metavar="FILE", help="a recording")
    p.add_argument("--theme", default=None, help="as for the live monitor")
    p.add_argument(
        "--speed", type=float, default=1.0, metavar="X", help="replay speed (1..60; default: 1)"
    )


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch export``."""
    p.add_argument("file", type=Path, metavar="FILE", help="a recording")
    fmt = p.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row")
    fmt.add_argument("--json", action="store_true", help="JSON Lines (pandas: lines=True)")
    p.add_argument(
        "--from",
        dest="start",
        default=None,
        metavar="T",
        help="ISO 8601 (local zone unless given), -2h before the recording's end, start or end",
    )
    p.add_argument("--to", dest="end", default=None, metavar="T", help="as --from")
    add_slo_arguments(p)


def default_output(now: float | None = None) -> Path:
    """``specwatch-20261201-140312.sqlite`` in the current directory."""
    return Path(time.strftime("specwatch-%Y%m%d-%H%M%S.sqlite", time.localtime(now)))


def run_record(args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Record until the duration ends or a signal arrives; returns the exit status."""
    err = err or sys.stderr
    from specwatch.record.recorder import Recorder
    from specwatch.session.factory import live_session

    options = source_options(args, args.interval, args.interval)
    if bool(options.urls) == options.demo:
        print("specwatch record: give a server with --url URL, or --demo", file=err)
        return EXIT_USAGE
    try:
        session = live_session(options)
    except ValueError as e:
        say_error("specwatch record", e, err)
        return EXIT_USAGE
    endpoints = session.endpoints
    path = args.output or default_output()
    stopped: list[str] = []
    recorder = Recorder(
        path,
        session.endpoints,
        clock=session.clock,
        retention_s=args.retention,
        interval_s=args.interval,
        on_stop=stopped.append,
    )
    try:
        recorder.start()
    except Exception as e:  # not a database, a newer format, no permission: one line
        session.stop()
        say_error("specwatch record", f"cannot record into {path}: {e}", err)
        return EXIT_USAGE
    until = f" for {args.duration:g}s" if args.duration else ""
    keep = f", keeping the last {args.retention:g}s" if args.retention else ""
    servers = ", ".join(str(e) for e in endpoints)
    print(
        f"specwatch record: recording {servers} into {path}{until}{keep}; Ctrl-C to stop",
        file=err,
        flush=True,
    )
    names = [str(e) for e in endpoints] if len(endpoints) > 1 else []
    late = LateReads(args.interval, lambda line: say_error("specwatch record", line, err), names)
    session.subscribe(recorder)
    session.subscribe(late)
    try:
        asyncio.run(_record(session, args.duration, stopped))
    finally:
        session.stop()
        recorder.stop()
    if recorder.error:
        say_error("specwatch record", recorder.error, err)
        return 1
    say_error("specwatch record", f"{recorder.rows} events in {path}{late.summary()}", err)
    return 0


class LateReads:
    """A session subscriber counting the ``/metrics`` windows read late
    (:meth:`~specwatch.core.server.MetricsWindow.late_read`), each server's since it was last
    ready; the first is said at once, since a recording is made unwatched and replayed later.

    Args:
        interval_s: The ``/metrics`` interval asked for.
        say: Takes the first late read's line.
        names: The servers by index, to name the one read late (none: one server, unnamed).
    """

    def __init__(
        self, interval_s: float, say: Callable[[str], object], names: Sequence[str] = ()
    ) -> None:
        self.interval_s = interval_s
        self.say = say
        self.names = tuple(names)
        self.count = 0
        self.worst_s = 0.0
        self._ready: dict[int, float] = {}

    def __call__(self, event: object) -> None:
        """Take one session event (on the session's loop)."""
        from specwatch.session import events as ev

        if isinstance(event, ev.ServerReady):
            self._ready[event.server] = event.t
        elif isinstance(event, ev.MetricsScraped):
            w = event.window
            if not w.late_read(self.interval_s, self._ready.get(event.server, -math.inf)):
                return
            self.count += 1
            self.worst_s = max(self.worst_s, w.dt)
            if self.count == 1:
                i = event.server
                who = f"{self.names[i]}: " if 0 <= i < len(self.names) else ""
                self.say(
                    f"{who}/metrics read {w.dt:.1f}s apart against --interval {self.interval_s:g}s "
                    "(the server slow to answer, or specwatch short of CPU); such a window's "
                    "figures are means over all of it, and a replay says so"
                )

    def summary(self) -> str:
        """``"; 3 /metrics reads late, up to 12.0s apart"``, or ``""`` when none was."""
        if not self.count:
            return ""
        reads = "read" if self.count == 1 else "reads"
        return f"; {self.count} /metrics {reads} late, up to {self.worst_s:.1f}s apart"


async def _record(session: object, duration: float | None, stopped: list[str]) -> None:
    from specwatch.session import LiveSession

    assert isinstance(session, LiveSession)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, done.set)
    end = None if duration is None else loop.time() + duration
    async with session:
        while not done.is_set() and not stopped:
            left = 0.5 if end is None else min(0.5, end - loop.time())
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), left)


def run_replay(args: argparse.Namespace) -> int:
    """Watch the recording in the monitor (:func:`specwatch.ui.replay_app.run_replay`)."""
    from specwatch.ui.replay_app import run_replay as replay

    return replay(args)


def run_export(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Write the recording's tidy time series to ``out``; returns the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    from specwatch.record.export import (
        CountingWriter,
        ExportProgress,
        tidy_rows,
        write_csv,
        write_json_lines,
    )
    from specwatch.record.reader import Reader, RecordingError
    from specwatch.record.timespec import parse_time

    try:
        reader = Reader(args.file)
    except RecordingError as e:
        say_error("specwatch export", e, err)
        return EXIT_USAGE
    with reader:
        span = reader.span()
        end = reader.wall(span[1]) if span else time.time()
        first = reader.wall(span[0]) if span else None
        try:
            wall0 = parse_time(args.start, end, start_wall=first) if args.start else None
            wall1 = parse_time(args.end, end, start_wall=first) if args.end else None
        except ValueError as e:
            say_error("specwatch export", e, err)
            return EXIT_USAGE
        t0 = None if wall0 is None else reader.session_t(wall0)
        t1 = None if wall1 is None else reader.session_t(wall1)
        written = CountingWriter(out)
        progress = ExportProgress(err, reader, reader.id_span(t0, t1), written)

        slo = slo_of(args)
        rows = progress.watch(tidy_rows(reader, wall0, wall1, slo))
        try:
            (write_csv if args.csv else write_json_lines)(rows, cast(TextIO, written))
        except BrokenPipeError:  # `| head`: the reader has all it wants
            return 0
        finally:
            progress.finish()
        out.flush()
        if reader.stopped:
            say_error("specwatch export", reader.stopped, err)
        if reader.skipped:
            say_error("specwatch export", f"{reader.skipped} unreadable events skipped", err)
    return 0


__all__ = [
    "LateReads",
    "add_export_arguments",
    "add_record_arguments",
    "add_replay_arguments",
    "default_output",
    "run_export",
    "run_record",
    "run_replay",
]
