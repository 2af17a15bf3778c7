"""``specwatch exporter`` (the live session's verdict and figures on ``/metrics``),
``specwatch alert-rules`` and ``specwatch dashboard``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

EXIT_USAGE = 2


def _listen(text: str) -> tuple[str, int]:
    from specwatch.exporter.listen import parse_listen

    try:
        return parse_listen(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> float:
    from specwatch.commands.record import _duration

    return _duration(text)


def add_exporter_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch exporter`` (the server arguments are added by the caller)."""
    p.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 9877),
        metavar="HOST:PORT",
        help="where /metrics is served (default: 127.0.0.1:9877; 0.0.0.0:9877 for every interface)",
    )
    p.add_argument(
        "--interval",
        type=_positive,
        default=1.0,
        metavar="S",
        help="seconds between GPU samples and /metrics scrapes of the server (default: 1)",
    )
    p.add_argument(
        "--baseline-itl",
        type=float,
        default=None,
        metavar="MS",
        help="per-token latency without speculation, ms: exports the break-even accept length "
        "and the speculative gain",
    )
    p.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help="record the session into this SQLite file at the same time",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="export a simulated server with 8 simulated GPUs instead of URL",
    )
    p.add_argument("--duration", type=_positive, default=None, help=argparse.SUPPRESS)


def run_exporter(args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Serve ``/metrics`` until a signal arrives; returns the exit status."""
    err = err or sys.stderr
    import asyncio

    from specwatch.commands.source_arguments import source_options
    from specwatch.exporter.serve import Exporter, run_until_signal
    from specwatch.session.factory import live_session

    options = source_options(args, args.interval, args.interval)
    if bool(options.urls) == options.demo:
        print("specwatch exporter: give a server URL, or --demo", file=err)
        return EXIT_USAGE
    try:
        session = live_session(options)
    except ValueError as e:
        print(f"specwatch exporter: {e}", file=err)
        return EXIT_USAGE
    plain_s = args.baseline_itl / 1000.0 if args.baseline_itl else None
    exporter = Exporter.of(session, plain_s)
    recorder = None
    if args.record is not None:
        from specwatch.record.recorder import Recorder

        recorder = Recorder(args.record, session.endpoints, clock=session.clock)
        try:
            recorder.start()
        except Exception as e:  # not a database, no permission: one line
            session.stop()
            print(f"specwatch exporter: cannot record into {args.record}: {e}", file=err)
            return EXIT_USAGE
        session.subscribe(recorder)
    host, port = args.listen
    try:
        http, bound = exporter.serve(host, port)
    except OSError as e:
        session.stop()
        if recorder is not None:
            recorder.stop()
        print(f"specwatch exporter: cannot listen on {host}:{port}: {e.strerror}", file=err)
        return EXIT_USAGE
    shown = f"[{host}]" if ":" in host else host
    servers = ", ".join(str(e) for e in session.endpoints)
    print(
        f"specwatch exporter: {servers} on http://{shown}:{bound}/metrics; SIGTERM to stop",
        file=err,
        flush=True,
    )
    why = "stopped"
    try:
        why = asyncio.run(run_until_signal(session, duration_s=args.duration))
    finally:
        session.stop()
        http.shutdown()
        http.server_close()
        if recorder is not None:
            recorder.stop()
    print(f"specwatch exporter: stopped ({why})", file=err)
    return 0


def run_alert_rules(out: TextIO | None = None) -> int:
    """Print the Prometheus rules file."""
    from specwatch.exporter.rules import rules_text

    (out or sys.stdout).write(rules_text())
    return 0


def run_dashboard(out: TextIO | None = None) -> int:
    """Print the Grafana dashboard JSON."""
    from specwatch.exporter.dashboard import dashboard_text

    (out or sys.stdout).write(dashboard_text())
    return 0


__all__ = ["add_exporter_arguments", "run_alert_rules", "run_dashboard", "run_exporter"]
