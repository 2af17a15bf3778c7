"""The ``specwatch probe`` subcommand: arguments and the entry point the CLI calls."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import orjson

from specwatch.commands.arguments import (
    add_dcgm_argument,
    add_fleet_arguments,
    add_server_arguments,
    add_slo_arguments,
    say_error,
    shared_help,
    slo_of,
)
from specwatch.sources.http.endpoint import parse_endpoint

if TYPE_CHECKING:
    from specwatch.session.fleet_probe import FleetOptions


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch probe``."""
    add_server_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--max-tokens", type=int, default=256, help=shared_help("--max-tokens", 256))
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help=shared_help("--timeout", 30),
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="S",
        help=shared_help("--wait", "no wait"),
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="S",
        help=shared_help("--deadline", 60),
    )
    # no default here: the probe module (httpx and the dialects) loads only when a probe runs
    p.add_argument(
        "--prompt", default=None, help="the prompt to stream (default: a question about hash maps)"
    )
    p.add_argument("--no-gpu", action="store_true", help=shared_help("--no-gpu"))
    p.add_argument(
        "--passive",
        nargs="?",
        type=float,
        const=1.0,
        default=None,
        metavar="S",
        help="send no completion: read the server's own figures over S seconds (default: 1)",
    )
    p.add_argument(
        "--stream",
        action="store_true",
        help="fleet: also stream one completion per server (default: passive, none sent)",
    )
    add_slo_arguments(p)
    add_fleet_arguments(p)
    add_dcgm_argument(p)


def run_probe(args: argparse.Namespace) -> int:
    """Run one probe; print the report (or JSON) on stdout.

    Returns:
        0 when all went well, 1 when the server cannot be reached (or is not ready), 2 for bad
        arguments, 3 when the server was reached but the stream failed.
    """
    import asyncio

    from specwatch.session.fleet_probe import fleet_options

    fleet = fleet_options(args, timeout_s=min(args.timeout, 10.0))
    if fleet.is_fleet:
        return _run_fleet_probe(args, fleet)
    # imported only now: a fleet probe has no use for them (60 ms of its start-up)
    from specwatch.commands.probe_text import render_text
    from specwatch.sources.probe import (
        DEFAULT_PROMPT,
        EXIT_USAGE,
        probe,
        probe_to_dict,
    )

    if not fleet.urls:
        print("specwatch probe: give --url URL (or --prometheus URL)", file=sys.stderr)
        return EXIT_USAGE
    from specwatch.sources.dcgm.parse import dcgm_url

    try:
        endpoint = parse_endpoint(fleet.urls[-1], getattr(args, "api_key", None))
        for spec in fleet.dcgm:  # a bad exporter address is said now, not as a traceback later
            dcgm_url(spec)
    except ValueError as exc:
        say_error("specwatch probe", exc)
        return EXIT_USAGE
    if args.max_tokens < 1:
        print("specwatch probe: --max-tokens must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.timeout <= 0:
        print("specwatch probe: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    passive = getattr(args, "passive", None)
    if passive is not None and not 0 < passive <= 600:
        print("specwatch probe: --passive takes 0 < S <= 600 seconds", file=sys.stderr)
        return EXIT_USAGE
    deadline = getattr(args, "deadline", None)
    if deadline is not None and not deadline > 0:
        print("specwatch probe: --deadline must be positive", file=sys.stderr)
        return EXIT_USAGE

    slo = slo_of(args)

    def status(line: str) -> None:
        say_error("specwatch probe", line)

    result = asyncio.run(
        probe(
            endpoint,
            max_tokens=args.max_tokens,
            timeout_s=args.timeout,
            wait_s=max(0.0, args.wait),
            prompt=DEFAULT_PROMPT if args.prompt is None else args.prompt,
            dcgm=tuple(getattr(args, "dcgm", None) or ()),
            read_gpus=not getattr(args, "no_gpu", False),
            on_status=status,
            passive_s=passive,
            **({} if deadline is None else {"deadline_s": deadline}),
        )
    )
    if args.json:
        from specwatch.session.verdict_report import probe_verdict_json

        doc = probe_to_dict(result, probe_verdict_json(result), slo)
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        print(render_text(result, slo))
    if result.error and not args.json:
        say_error("specwatch probe", result.error)
    return result.exit_code


def _run_fleet_probe(args: argparse.Namespace, fleet: FleetOptions) -> int:
    """Probe a fleet (passive unless ``--stream``); 0 when every server was read."""
    import asyncio

    from specwatch.session.fleet_probe import fleet_probe, fleet_text

    try:
        doc = asyncio.run(
            fleet_probe(
                fleet,
                stream=args.stream,
                max_tokens=args.max_tokens,
                prompt=args.prompt,
                gpu_entries=bool(args.json),
            )
        )
    except ValueError as exc:
        say_error("specwatch probe", exc)
        return 2
    if args.json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(fleet_text(doc))
    return 0 if doc["ok"] else 1


__all__ = ["add_probe_arguments", "run_probe"]
