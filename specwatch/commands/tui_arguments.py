"""The live monitor's command-line options (``add_tui_arguments``): argparse only.

``specwatch --help`` imports this and nothing heavier; the monitor itself lives in
:mod:`specwatch.commands.tui`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specwatch.core.windows import WINDOWS


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
    return value


def _interval(text: str) -> float:
    value = _positive(text)
    if value < 0.1:
        raise argparse.ArgumentTypeError(
            "sampling faster than every 0.1 s would cost more than it shows"
        )
    return value


def add_tui_arguments(p: argparse.ArgumentParser) -> None:
    """Add the TUI's options to the top-level parser."""
    g = p.add_argument_group("live monitor (the default command)")
    g.add_argument(
        "-u",
        "--url",
        action="append",
        help="server address: localhost:8000, host:port, http://... or https://... (default: "
        "$SPECWATCH_URL, the config file's url, else http://localhost:8000; repeatable: more "
        "than one opens the fleet screen)",
    )
    g.add_argument(
        "--api-key",
        default=None,
        help="Bearer token (default: env SPECWATCH_API_KEY, else OPENAI_API_KEY); never stored",
    )
    g.add_argument(
        "--demo",
        action="store_true",
        help="watch a simulated server with 8 simulated GPUs (started in-process, over HTTP)",
    )
    g.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="SNAPSHOT.json",
        help="judge the live verdict against this benchmark snapshot (default: the first "
        "steady 30 s after warmup; the r key marks a new one)",
    )
    g.add_argument(
        "--screenshot-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the s key saves SVG screenshots (default: "
        "$XDG_DATA_HOME/specwatch/screenshots)",
    )
    from specwatch.commands.source_arguments import add_source_arguments

    add_source_arguments(g, "watch the server only")
    g.add_argument(
        "--theme",
        default=None,
        help="dark, light, high-contrast, ansi-16, or a theme file's name from "
        "~/.config/specwatch/themes (default: the config file's theme, else the one last "
        "chosen with the t key, else dark)",
    )
    g.add_argument(
        "-i",
        "--interval",
        type=_interval,
        default=None,
        metavar="S",
        help="seconds between GPU samples (default: 1)",
    )
    g.add_argument(
        "--metrics-interval",
        type=_interval,
        default=None,
        metavar="S",
        help="seconds between /metrics scrapes (default: 1)",
    )
    g.add_argument(
        "--baseline-itl",
        type=_positive,
        default=None,
        metavar="MS",
        help="per-token latency without speculation, ms (for the verify-latency verdict)",
    )
    g.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="SNAPSHOT.json",
        help="a benchmark snapshot taken without speculation, as the verdict's baseline",
    )
    g.add_argument(
        "--sweep",
        nargs="+",
        type=Path,
        default=None,
        metavar="SNAP.json",
        help="benchmark snapshots at several draft lengths: the advisor view (a) shows them "
        "beside its prediction",
    )
    g.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help="also record the session into FILE (replay it with: specwatch replay FILE)",
    )
    g.add_argument(
        "--window",
        choices=tuple(WINDOWS),
        default="5m",
        help="token-rate graph window (default: 5m; the w key cycles)",
    )


__all__ = ["add_tui_arguments"]
