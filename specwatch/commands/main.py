"""Command line: the TUI (``specwatch [URL]``, ``-u URL`` or ``--demo``) and the sim, probe,
bench, record, replay, export, compare, advise and dcgm-counters tools."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specwatch import __version__

SUBCOMMANDS = (
    "sim",
    "probe",
    "bench",
    "compare",
    "advise",
    "record",
    "replay",
    "export",
    "scrub",
    "dcgm-counters",
    "clocks",
    "exporter",
    "alert-rules",
    "dashboard",
)
COMMAND_METAVAR = "{" + ",".join(SUBCOMMANDS) + "}"


class _LazyParser(argparse.ArgumentParser):
    """A subcommand parser whose arguments are added only when it is used.

    A command's options live next to its ``run`` (``probe``, ``compare``, ``record``), whose
    imports ``specwatch --help`` and every other command must not pay for.
    """

    def __init__(
        self,
        *args: Any,
        fill: Callable[[argparse.ArgumentParser], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._fill = fill

    def _filled(self) -> None:
        fill, self._fill = self._fill, None
        if fill is not None:
            fill(self)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._filled()
        known, extras = super().parse_known_args(args, namespace)
        if extras:  # said here, with this command's usage, not the top level's two-line one
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return known, extras

    def format_help(self) -> str:
        self._filled()
        return super().format_help()

    def format_usage(self) -> str:
        self._filled()
        return super().format_usage()


def _add_sim_arguments(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.sim_arguments import add_sim_arguments

    add_sim_arguments(p)


def _add_server_args(p: argparse.ArgumentParser, fleet: bool = True) -> None:
    more = " (several: a fleet)" if fleet else ""
    p.add_argument(
        "target",
        nargs="*",
        metavar="URL",
        help="server address: localhost:8000, host:port, http://... or https://..."
        f"{more}; default: $SPECWATCH_URL, the config file's url, else http://localhost:8000",
    )
    p.add_argument(
        "-u",
        "--url",
        action="append",
        help=f"server address, as URL (repeatable{more})",
    )
    p.add_argument(
        "--api-key",
        default=None,
        help="Bearer token (default: env SPECWATCH_API_KEY, else OPENAI_API_KEY); never stored",
    )


DESCRIPTION = "Live GPU state, token rate and speculative decoding for an inference server."
USAGE = (
    "specwatch [options] [URL ...]\n       specwatch {" + ",".join(SUBCOMMANDS) + "} [options] ..."
)
EPILOG = (
    "URL defaults to $SPECWATCH_URL, then the url in $XDG_CONFIG_HOME/specwatch/config.toml, "
    "then http://localhost:8000. Run 'specwatch COMMAND --help' for a command's options."
)


def _add_version(p: argparse.ArgumentParser) -> None:
    p.add_argument("-V", "--version", action="version", version=f"specwatch {__version__}")


def _fill_probe(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.dcgm_counters import add_dcgm_argument
    from specwatch.commands.probe import add_probe_arguments

    _add_server_args(p)
    add_probe_arguments(p)
    add_dcgm_argument(p)


def _fill_bench(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.bench_arguments import add_bench_arguments
    from specwatch.commands.dcgm_counters import add_dcgm_argument

    _add_server_args(p, fleet=False)
    add_bench_arguments(p)
    add_dcgm_argument(p)


def _fill_compare(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.compare import add_compare_arguments

    add_compare_arguments(p)


def _fill_advise(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.advise import add_advise_arguments

    add_advise_arguments(p)


def _fill_record(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.record import add_record_arguments
    from specwatch.commands.source_arguments import add_source_arguments

    _add_server_args(p, fleet=False)
    add_record_arguments(p)
    add_source_arguments(p, "record the server only")


def _fill_exporter(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.exporter import add_exporter_arguments
    from specwatch.commands.source_arguments import add_source_arguments

    _add_server_args(p)
    add_exporter_arguments(p)
    add_source_arguments(p, "export the server only")


def _fill_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a recording")
    p.add_argument("--theme", default=None, help="as for the live monitor")
    p.add_argument(
        "--speed", type=float, default=1.0, metavar="X", help="replay speed (1..60; default 1)"
    )


def _fill_export(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.record import add_export_arguments

    add_export_arguments(p)


def _fill_clocks(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.clocks import fill_clocks

    fill_clocks(p)


def _fill_scrub(p: argparse.ArgumentParser) -> None:
    from specwatch.commands.scrub import add_scrub_arguments

    add_scrub_arguments(p)


def build_tui_parser() -> argparse.ArgumentParser:
    """The live monitor's parser, with its positional ``URL`` (``specwatch localhost:8000``)."""
    from specwatch.commands.tui_arguments import add_tui_arguments

    parser = argparse.ArgumentParser(
        prog="specwatch", usage=USAGE, description=DESCRIPTION, epilog=EPILOG
    )
    _add_version(parser)
    parser.add_argument("target", nargs="*", metavar="URL", help="server address (as -u/--url)")
    add_tui_arguments(parser)
    parser.set_defaults(command=None)
    return parser


def build_parser(exit_on_error: bool = True) -> argparse.ArgumentParser:
    """The full argument parser (the TUI's options at top level, tools as subcommands).

    A positional ``URL`` for the TUI is parsed by :func:`build_tui_parser` instead (argparse
    cannot tell a URL from a subcommand); :func:`parse_args` picks the right one.
    """
    parser = argparse.ArgumentParser(
        prog="specwatch",
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EPILOG,
        exit_on_error=exit_on_error,
    )
    _add_version(parser)
    sub = parser.add_subparsers(dest="command", metavar=COMMAND_METAVAR, parser_class=_LazyParser)

    from specwatch.commands.tui_arguments import add_tui_arguments

    add_tui_arguments(parser)

    def add(name: str, help: str, fill: Callable[[argparse.ArgumentParser], None]) -> None:
        # prog named here: argparse derives it from the parent's two-line usage otherwise. No
        # abbreviations: ``sim --version`` is not ``--server-version``.
        sub.add_parser(name, help=help, fill=fill, prog=f"specwatch {name}", allow_abbrev=False)

    add("sim", "run the simulated server standalone", _add_sim_arguments)
    add("probe", "detect a server, stream once, read the GPUs, print", _fill_probe)
    add("bench", "benchmark: warmup runs, then N streamed runs", _fill_bench)
    add("compare", "compare two snapshots: is it the GPUs or the code?", _fill_compare)
    add("advise", "which draft length pays, at which batch (live, recording, sweep)", _fill_advise)
    add("record", "record the live session into a SQLite file", _fill_record)
    add("replay", "watch a recording in the TUI, with time controls", _fill_replay)
    add("export", "a recording as a tidy time series (CSV or JSON Lines)", _fill_export)
    add("scrub", "withhold secrets in snapshots written by an older specwatch", _fill_scrub)
    add(
        "dcgm-counters",
        "print the dcgm-exporter counters CSV specwatch reads (run the exporter with -f FILE)",
        lambda p: None,
    )
    add("clocks", "restore GPU clocks a bench --lock-clocks left locked", _fill_clocks)
    add("exporter", "serve the live verdict and figures on /metrics for Prometheus", _fill_exporter)
    add("alert-rules", "print the Prometheus alert rules for the exporter's series", lambda p: None)
    add("dashboard", "print a Grafana dashboard JSON for the exporter's series", lambda p: None)
    return parser


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
    try:
        args = build_parser(exit_on_error=False).parse_args(argv)
    except argparse.ArgumentError as e:
        # The first positional is not a command: a server address for the monitor
        # (``specwatch localhost:8000``). Any other mistake is said by the parser that has it.
        not_a_command = e.argument_name == COMMAND_METAVAR
        args = (build_tui_parser() if not_a_command else build_parser()).parse_args(argv)
    from specwatch.commands.settings import settle

    return settle(args, os.environ if env is None else env)


def _restore_stale_clocks(command: str | None) -> None:
    """Clocks a killed ``bench --lock-clocks`` left locked are restored at the next start."""
    if command == "clocks":
        return  # it says what it restores itself
    from specwatch.core.clock_state import state_path

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
        from specwatch.core.config import ConfigError  # not imported for ``--help``

        if not isinstance(e, ConfigError):
            raise
        from specwatch.commands.error_line import say_error

        say_error("specwatch", e)
        return 2
    _restore_stale_clocks(args.command)
    if args.command == "clocks":
        from specwatch.commands.clocks import run_clocks

        return run_clocks(args)
    if args.command == "sim":
        from specwatch.commands.sim import run_sim

        return run_sim(args)
    if args.command == "probe":
        from specwatch.commands.probe import run_probe

        return run_probe(args)
    if args.command == "bench":
        from specwatch.commands.bench import run_bench

        return run_bench(args)
    if args.command == "dcgm-counters":
        from specwatch.commands.dcgm_counters import main as counters_main

        return counters_main([])
    if args.command == "compare":
        from specwatch.commands.compare import run_compare

        return run_compare(args)
    if args.command == "advise":
        from specwatch.commands.advise import run_advise

        return run_advise(args)
    if args.command == "record":
        from specwatch.commands.record import run_record

        return run_record(args)
    if args.command == "export":
        from specwatch.commands.record import run_export

        return run_export(args)
    if args.command == "scrub":
        from specwatch.commands.scrub import run_scrub

        return run_scrub(args)
    if args.command == "exporter":
        from specwatch.commands.exporter import run_exporter

        return run_exporter(args)
    if args.command == "alert-rules":
        from specwatch.commands.exporter import run_alert_rules

        return run_alert_rules()
    if args.command == "dashboard":
        from specwatch.commands.exporter import run_dashboard

        return run_dashboard()
    if args.command == "replay":
        from specwatch.ui.replay_app import run_replay

        return run_replay(args)
    from specwatch.commands.tui import run_tui

    return run_tui(args)


__all__ = ["SUBCOMMANDS", "build_parser", "build_tui_parser", "main", "parse_args"]
