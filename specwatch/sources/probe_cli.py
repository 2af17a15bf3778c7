"""The ``specwatch probe`` subcommand: arguments and the entry point the CLI calls."""

from __future__ import annotations

import argparse
import sys

import orjson

from specwatch.sources.endpoint import parse_endpoint


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--json``, ``--max-tokens``, ``--timeout``, ``--wait`` and ``--prompt``.

    The CLI adds ``--url`` and ``--api-key`` itself.
    """
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--max-tokens", type=int, default=256, help="tokens to stream (default 256)")
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for each answer from the server (default 30)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="S",
        help="wait up to S seconds for a server that is starting or loading (default: no wait)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="S",
        help="wall-clock limit of each request, the stream included (default 60)",
    )
    # no default here: the probe module (httpx and the dialects) loads only when a probe runs
    p.add_argument(
        "--prompt", default=None, help="the prompt to stream (default: a question about hash maps)"
    )


def run_probe(args: argparse.Namespace) -> int:
    """Run one probe; print the report (or JSON) on stdout.

    Returns:
        0 when all went well, 1 when the server cannot be reached (or is not ready), 2 for bad
        arguments, 3 when the server was reached but the stream failed.
    """
    import asyncio

    from specwatch.sources.probe import (
        DEFAULT_PROMPT,
        EXIT_USAGE,
        probe,
        probe_to_dict,
        render_text,
    )

    try:
        endpoint = parse_endpoint(args.url, getattr(args, "api_key", None))
    except ValueError as exc:
        print(f"specwatch probe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_tokens < 1:
        print("specwatch probe: --max-tokens must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.timeout <= 0:
        print("specwatch probe: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    deadline = getattr(args, "deadline", None)
    if deadline is not None and not deadline > 0:
        print("specwatch probe: --deadline must be positive", file=sys.stderr)
        return EXIT_USAGE

    def status(line: str) -> None:
        print(f"specwatch probe: {line}", file=sys.stderr)

    result = asyncio.run(
        probe(
            endpoint,
            max_tokens=args.max_tokens,
            timeout_s=args.timeout,
            wait_s=max(0.0, args.wait),
            prompt=DEFAULT_PROMPT if args.prompt is None else args.prompt,
            dcgm=tuple(getattr(args, "dcgm", None) or ()),
            on_status=status,
            **({} if deadline is None else {"deadline_s": deadline}),
        )
    )
    if args.json:
        sys.stdout.write(orjson.dumps(probe_to_dict(result), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        print(render_text(result))
    if result.error and not args.json:
        print(f"specwatch probe: {result.error}", file=sys.stderr)
    return result.exit_code


__all__ = ["add_probe_arguments", "run_probe"]
