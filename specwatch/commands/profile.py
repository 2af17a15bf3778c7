"""The ``specwatch profile`` subcommand: trigger the server's own profiler for a few decode steps,
wait for its traces, read them, say where the verify step's time goes and keep a profile JSON."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from specwatch.commands.arguments import (
    add_server_arguments,
    positive,
    positive_int,
    say_error,
    shared_help,
)

if TYPE_CHECKING:
    from specwatch.session.profile_job import Captured
    from specwatch.sources.profile.trigger import Phase

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch profile``."""
    add_server_arguments(p, fleet=False)
    p.add_argument(
        "--steps", type=positive_int, default=20, help="decode steps to profile (default: 20)"
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=None,
        help=shared_help("--out", "./specwatch-snapshots"),
    )
    p.add_argument("--json", action="store_true", help="print the profile JSON on stdout")
    p.add_argument(
        "--capture",
        type=positive,
        default=120.0,
        metavar="S",
        help="seconds to wait for the profiled steps; a server with no load runs none "
        "(default: 120)",
    )
    p.add_argument(
        "--wait-files",
        type=positive,
        default=300.0,
        metavar="S",
        help="seconds to wait for the server to finish writing its traces (default: 300)",
    )
    p.add_argument("--label", default=None, help="a label for the profile file's name")
    p.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where a vLLM server writes its traces (its torch_profiler_dir), when its command"
        " line cannot be read here",
    )


def run_profile_command(args: argparse.Namespace) -> int:
    """Run one profile; print the summary (or JSON) on stdout.

    Returns:
        0 when a profile was read, 1 when the server cannot be profiled (one line says why),
        2 for bad arguments, 3 when the server cannot be reached.
    """
    import asyncio

    from specwatch.sources.http.endpoint import parse_endpoint

    urls = args.url if isinstance(args.url, list) else [args.url]
    try:
        endpoint = parse_endpoint(urls[-1], getattr(args, "api_key", None))
    except ValueError as exc:
        say_error("specwatch profile", exc)
        return EXIT_USAGE
    out_dir = (args.out or Path("specwatch-snapshots")).absolute()
    runner = asyncio.Runner()
    try:
        return runner.run(_main(endpoint, args, out_dir, sys.stdout, sys.stderr))
    except KeyboardInterrupt:
        say_error("specwatch profile", "interrupted; the server's profiling session was stopped")
        return 130
    finally:
        runner.close()


async def _main(
    endpoint: Any, args: argparse.Namespace, out_dir: Path, out: TextIO, err: TextIO
) -> int:
    import asyncio

    from specwatch.session.profile_job import ProfileOptions, capture_profile
    from specwatch.sources.detect import detect
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.server_errors import ServerError
    from specwatch.sources.profile.trace import TraceError
    from specwatch.sources.profile.trigger import ProfileRefused

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    caught: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):

        def cancel(sig: signal.Signals = sig) -> None:
            caught.append(sig.name)
            if task is not None:
                task.cancel()

        loop.add_signal_handler(sig, cancel)

    def report(phase: Phase) -> None:
        print(f"specwatch profile: {phase.words}", file=err, flush=True)

    options = ProfileOptions(
        steps=args.steps,
        out_dir=out_dir,
        capture_s=args.capture,
        files_deadline_s=args.wait_files,
        trace_dir=args.trace_dir,
        label=args.label,
    )
    try:
        async with ServerClient(endpoint, timeout_s=10.0) as client:
            try:
                info = await detect(client)
            except ServerError as exc:
                say_error("specwatch profile", exc, err)
                return EXIT_UNREACHABLE
            try:
                captured = await capture_profile(client, info, options, report)
            except (ProfileRefused, TraceError) as exc:
                say_error("specwatch profile", exc, err)
                return EXIT_REFUSED
            except ServerError as exc:
                say_error("specwatch profile", exc, err)
                return EXIT_UNREACHABLE
    except asyncio.CancelledError:
        if caught:
            say_error(
                "specwatch profile",
                f"{caught[0]}: stopped; the server's profiling session was stopped",
                err,
            )
            return 128 + int(getattr(signal, caught[0]).value)
        raise
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    return _report(captured, args, out, err)


def _report(captured: Captured, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import orjson

    from specwatch.core.profile import summary_lines

    if captured.save_error is not None:
        say_error("specwatch profile", f"{captured.save_error}; the summary is printed below", err)
    if args.json:
        out.write(orjson.dumps(captured.doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for line in summary_lines(captured.summary):
            print(line, file=out)
        print(captured.words, file=out)
    if captured.path is not None:
        print(f"specwatch profile: saved {captured.path}", file=err)
    return EXIT_OK
