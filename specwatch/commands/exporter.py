"""``specwatch exporter`` (the live session's verdict and figures on ``/metrics``) and the
files for the tools around it, printed as shipped: ``specwatch alert-rules`` (Prometheus,
``specwatch/exporter/alert_rules.yml``), ``specwatch dashboard`` (Grafana,
``specwatch/exporter/dashboard.json``) and ``specwatch dcgm-counters`` (dcgm-exporter's
counters CSV, ``specwatch/sources/dcgm/dcgm-counters.csv``)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TextIO

from specwatch.commands.arguments import (
    add_server_arguments,
    add_slo_arguments,
    add_source_arguments,
    duration,
    listen,
    shared_help,
    slo_of,
    source_options,
)

EXIT_USAGE = 2
RULES_FILE = ("specwatch.exporter", "alert_rules.yml")
DASHBOARD_FILE = ("specwatch.exporter", "dashboard.json")
COUNTERS_FILE = ("specwatch.sources.dcgm", "dcgm-counters.csv")


def add_exporter_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch exporter``."""
    add_server_arguments(p)
    p.add_argument(
        "--listen",
        type=listen,
        default=("127.0.0.1", 9877),
        metavar="HOST:PORT",
        help="where /metrics is served (default: 127.0.0.1:9877; 0.0.0.0:9877 for every interface)",
    )
    p.add_argument(
        "--interval",
        type=duration,
        default=1.0,
        metavar="S",
        help=shared_help("--interval", 1),
    )
    p.add_argument(
        "--baseline-itl",
        type=float,
        default=None,
        metavar="MS",
        help=shared_help("--baseline-itl"),
    )
    p.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help=shared_help("--record"),
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="export a simulated server with 8 simulated GPUs instead of URL",
    )
    add_slo_arguments(p)
    p.add_argument("--duration", type=duration, default=None, help=argparse.SUPPRESS)
    add_source_arguments(p)


def run_exporter(args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Serve ``/metrics`` until a signal arrives; returns the exit status."""
    err = err or sys.stderr
    import asyncio

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
    slo = slo_of(args)
    exporter = Exporter.of(session, plain_s, slo)
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


def package_file(where: tuple[str, str]) -> str:
    """A text file shipped in a package: ``(package, file name)``."""
    from importlib import resources

    package, name = where
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def rules_text(for_override: str | None = None) -> str:
    """The alert rules file (``for_override``: every rule's ``for`` set to it, e.g. in tests)."""
    text = package_file(RULES_FILE)
    if for_override is None:
        return text
    return re.sub(r"(?m)^(\s+for: ).*$", lambda m: m.group(1) + for_override, text)


def expressions() -> list[str]:
    """Every PromQL expression of the dashboard, as written (with Grafana's variables)."""
    import json

    board = json.loads(package_file(DASHBOARD_FILE))
    return [t["expr"] for panel in board["panels"] for t in panel["targets"]]


def run_alert_rules(args: argparse.Namespace | None = None, out: TextIO | None = None) -> int:
    """Print the Prometheus rules file."""
    (out or sys.stdout).write(rules_text())
    return 0


def run_dashboard(args: argparse.Namespace | None = None, out: TextIO | None = None) -> int:
    """Print the Grafana dashboard JSON (Grafana: Import)."""
    (out or sys.stdout).write(package_file(DASHBOARD_FILE))
    return 0


def run_dcgm_counters(args: argparse.Namespace | None = None, out: TextIO | None = None) -> int:
    """Print the counters CSV with every field specwatch reads (run dcgm-exporter with
    ``-f FILE`` or ``DCGM_EXPORTER_COLLECTORS=FILE``, and ``-c 1000``)."""
    (out or sys.stdout).write(package_file(COUNTERS_FILE))
    return 0


__all__ = [
    "add_exporter_arguments",
    "expressions",
    "package_file",
    "rules_text",
    "run_alert_rules",
    "run_dashboard",
    "run_dcgm_counters",
    "run_exporter",
]
