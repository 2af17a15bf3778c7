"""Settling parsed arguments: the command line, then the environment, the config file, defaults.

``specwatch localhost:8000`` and ``-u/--url`` name servers on the command line; without either
(and without ``--demo`` or ``--prometheus``) ``$SPECWATCH_URL``, then the config file's ``url``,
then ``http://localhost:8000`` is watched. The TUI's theme, intervals, baseline and reference
come from the command line, else the config file (the theme: else the one last chosen in the
TUI), else their defaults.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from specwatch.core.config import Config, last_theme, load_config, resolve_urls

DEFAULT_THEME = "dark"
DEFAULT_INTERVAL_S = 1.0
URL_COMMANDS = (None, "probe", "bench", "record", "exporter")
"""The commands that watch or query a server."""
CONFIG_COMMANDS = (*URL_COMMANDS, "replay")
"""The commands the config file applies to (the others never read it)."""


def _other_source(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "demo", None)) or bool(getattr(args, "prometheus", None))


def command_line_urls(args: argparse.Namespace) -> list[str]:
    """The positional URLs, then the ``-u/--url`` ones (either may be a string or absent)."""
    out: list[str] = []
    for key in ("target", "url"):
        value = getattr(args, key, None)
        if isinstance(value, str):
            out.append(value)
        elif value:
            out.extend(str(v) for v in value)
    return out


def settle(
    args: argparse.Namespace, env: Mapping[str, str], config: Config | None = None
) -> argparse.Namespace:
    """Fill what the command line left open from ``env``, the config file and the defaults.

    Sets ``args.url`` to a list (``record``: one address), ``args.url_source`` to where it came
    from and, for the TUI, ``args.theme_source`` (``"state"`` when the last chosen theme is
    used, so the TUI knows to keep a new choice).

    Raises:
        ConfigError: The config file cannot be used (one line).
    """
    command = getattr(args, "command", None)
    if command not in CONFIG_COMMANDS:
        return args
    if config is None:
        config = load_config(env)
    if command in URL_COMMANDS:
        urls, source = resolve_urls(command_line_urls(args), env, config, _other_source(args))
        args.url = urls
        args.url_source = source
        if command == "record":
            args.url = urls[0] if urls else None
    if command in (None, "replay"):
        _settle_theme(args, env, config)
    if command is None:
        _settle_tui(args, config)
    return args


def _settle_theme(args: argparse.Namespace, env: Mapping[str, str], config: Config) -> None:
    if getattr(args, "theme", None):
        args.theme_source = "command line"
    elif config.theme:
        args.theme, args.theme_source = config.theme, str(config.path)
    else:
        kept = last_theme(env)
        args.theme = kept or DEFAULT_THEME
        args.theme_source = "state" if kept else "default"


def _settle_tui(args: argparse.Namespace, config: Config) -> None:
    if args.interval is None:
        args.interval = config.interval or DEFAULT_INTERVAL_S
    if args.metrics_interval is None:
        args.metrics_interval = config.metrics_interval or DEFAULT_INTERVAL_S
    if args.baseline_itl is None and args.baseline is None:
        args.baseline_itl = config.baseline_ms
        args.baseline = config.baseline
    if args.reference is None and config.reference is not None:
        args.reference = Path(config.reference)


__all__ = ["CONFIG_COMMANDS", "URL_COMMANDS", "command_line_urls", "settle"]
