"""Command line: the monitor (``specwatch [URL]``, ``-u URL`` or ``--demo``) and the tools,
dispatched from :data:`COMMANDS`: each command's module holds its options and its ``run``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from specwatch import __version__

COMMANDS: dict[str, tuple[str, str, str | None, str]] = {
    # name: (help, module in specwatch.commands, its function adding the options, its run)
    "sim": ("run the simulated server standalone", "sim", "add_sim_arguments", "run_sim"),
    "probe": (
        "detect a server, stream once, read the GPUs, print",
        "probe",
        "add_probe_arguments",
        "run_probe",
    ),
    "bench": (
        "benchmark: warmup runs, then N streamed runs",
        "bench",
        "add_bench_arguments",
        "run_bench",
    ),
    "profile": (
        "trigger the server's own profiler: where the verify step's time goes",
        "profile",
        "add_profile_arguments",
        "run_profile_command",
    ),
    "compare": (
        "compare two snapshots: is it the GPUs or the code?",
        "compare",
        "add_compare_arguments",
        "run_compare",
    ),
    "advise": (
        "which draft length pays, at which batch (live, recording, sweep)",
        "advise",
        "add_advise_arguments",
        "run_advise",
    ),
    "record": (
        "record the live session into a SQLite file",
        "record",
        "add_record_arguments",
        "run_record",
    ),
    "replay": (
        "watch a recording in the TUI, with time controls",
        "record",
        "add_replay_arguments",
        "run_replay",
    ),
    "export": (
        "a recording as a tidy time series (CSV or JSON Lines)",
        "record",
        "add_export_arguments",
        "run_export",
    ),
    "scrub": (
        "withhold secrets in snapshots written by an older specwatch",
        "scrub",
        "add_scrub_arguments",
        "run_scrub",
    ),
    "dcgm-counters": (
        "print the dcgm-exporter counters CSV specwatch reads (run the exporter with -f FILE)",
        "exporter",
        None,
        "run_dcgm_counters",
    ),
    "clocks": (
        "show (status) or restore GPU clocks a bench --lock-clocks locked",
        "clocks",
        "add_clocks_arguments",
        "run_clocks",
    ),
    "exporter": (
        "serve the live verdict and figures on /metrics for Prometheus",
        "exporter",
        "add_exporter_arguments",
        "run_exporter",
    ),
    "alert-rules": (
        "print the Prometheus alert rules for the exporter's series",
        "exporter",
        None,
        "run_alert_rules",
    ),
    "dashboard": (
        "print a Grafana dashboard JSON for the exporter's series",
        "exporter",
        None,
        "run_dashboard",
    ),
}
"""Every subcommand; its module is imported only when the command is named on the command
line (``specwatch --help`` imports none of them)."""
SUBCOMMANDS = tuple(COMMANDS)
COMMAND_METAVAR = "{" + ",".join(SUBCOMMANDS) + "}"
DESCRIPTION = "Live GPU state, token rate and speculative decoding for an inference server."
USAGE = "specwatch [options] [URL ...]\n       specwatch " + COMMAND_METAVAR + " [options] ..."
EPILOG = (
    "URL defaults to $SPECWATCH_URL, then the url in $XDG_CONFIG_HOME/specwatch/config.toml, "
    "then http://localhost:8000. Run 'specwatch COMMAND --help' for a command's options."
)


def _function(module: str, name: str) -> Callable[..., Any]:
    from importlib import import_module

    return cast("Callable[..., Any]", getattr(import_module(f"specwatch.commands.{module}"), name))


def _top_parser(exit_on_error: bool = True) -> argparse.ArgumentParser:
    from specwatch.commands.tui import add_tui_arguments

    parser = argparse.ArgumentParser(
        prog="specwatch",
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EPILOG,
        exit_on_error=exit_on_error,
    )
    parser.add_argument("-V", "--version", action="version", version=f"specwatch {__version__}")
    add_tui_arguments(parser)
    return parser


def build_tui_parser() -> argparse.ArgumentParser:
    """The live monitor's parser, with its positional ``URL`` (``specwatch localhost:8000``)."""
    parser = _top_parser()
    parser.add_argument("target", nargs="*", metavar="URL", help="server address (as -u/--url)")
    parser.set_defaults(command=None)
    return parser


def _parsers(
    exit_on_error: bool = True, commands: Iterable[str] | None = None
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = _top_parser(exit_on_error)
    sub = parser.add_subparsers(dest="command", metavar=COMMAND_METAVAR)
    filled = set(COMMANDS if commands is None else commands)
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, (help_text, module, add, _run) in COMMANDS.items():
        # prog named here: argparse derives it from the parent's two-line usage otherwise. No
        # abbreviations: ``sim --version`` is not ``--server-version``.
        p = sub.add_parser(name, help=help_text, prog=f"specwatch {name}", allow_abbrev=False)
        if add is not None and name in filled:
            _function(module, add)(p)
        parsers[name] = p
    return parser, parsers


def build_parser(
    exit_on_error: bool = True, commands: Iterable[str] | None = None
) -> argparse.ArgumentParser:
    """The full argument parser (the monitor's options at top level, the tools as
    subcommands), with the options of ``commands`` (default: every command; the others parse
    nothing).

    A positional ``URL`` for the monitor is parsed by :func:`build_tui_parser` instead
    (argparse cannot tell a URL from a subcommand); :func:`parse_args` picks the right one.
    """
    return _parsers(exit_on_error, commands)[0]


DASH_VALUED = ("--from", "--to")
"""Options whose value may start with a dash (``--from -1m``: a time before the end)."""


def _dash_values(argv: list[str]) -> list[str]:
    """``--from -1m`` as ``--from=-1m``: argparse reads a value starting with ``-`` (other than
    a plain negative number) as the next option and says "expected one argument"."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in DASH_VALUED and i + 1 < len(argv) and argv[i + 1][:2].lstrip("-").isdigit():
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def parse_args(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> argparse.Namespace:
    """Parse ``argv`` and settle it (:func:`specwatch.commands.settings.settle`).

    Raises:
        SystemExit: Bad arguments (argparse's message and status 2).
        ConfigError: The config file cannot be used.
    """
    argv = _dash_values(list(sys.argv[1:] if argv is None else argv))
    named = set(argv) & set(COMMANDS)  # the command is among them: only theirs are filled
    parser, parsers = _parsers(exit_on_error=False, commands=named)
    try:
        args, extras = parser.parse_known_args(argv)
    except argparse.ArgumentError as e:
        # The first positional is not a command: a server address for the monitor
        # (``specwatch localhost:8000``). Any other mistake is said by the parser that has it.
        not_a_command = e.argument_name == COMMAND_METAVAR
        if not_a_command:
            args = build_tui_parser().parse_args(argv)
        else:
            args = build_parser(commands=named).parse_args(argv)
        extras = []
    if extras:  # said with the command's usage, not the top level's two-line one
        command = parser if args.command is None else parsers[args.command]
        command.error(f"unrecognized arguments: {' '.join(extras)}")
    from specwatch.commands.settings import settle

    return settle(args, os.environ if env is None else env)


def _restore_stale_clocks(command: str | None) -> None:
    """Clocks a killed ``bench --lock-clocks`` left locked are restored at the next start."""
    if command == "clocks":
        return  # it says what it restores itself
    from specwatch.core.clocks import state_path

    if state_path().exists():
        from specwatch.commands.clocks import restore_stale

        restore_stale(sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    try:
        status = _main(argv)
    except KeyboardInterrupt:  # also while the arguments are read, before any command
        print("specwatch: interrupted", file=sys.stderr)
        status = 130
    if argv is None and status > 128:  # this process's own command line, stopped by a signal
        from specwatch.bench.shield import ignore_late_stop_signals

        ignore_late_stop_signals(status)
    return status


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = parse_args(argv)
    except Exception as e:
        from specwatch.commands.settings import ConfigError  # not imported for ``--help``

        if not isinstance(e, ConfigError):
            raise
        from specwatch.commands.arguments import say_error

        say_error("specwatch", e)
        return 2
    _restore_stale_clocks(args.command)
    if args.command is None:
        from specwatch.commands.tui import run_tui

        return run_tui(args)
    _help, module, _add, run = COMMANDS[args.command]
    return int(_function(module, run)(args))


__all__ = ["COMMANDS", "SUBCOMMANDS", "build_parser", "build_tui_parser", "main", "parse_args"]
