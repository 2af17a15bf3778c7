"""The user's settings and their precedence: the command line, then the environment
(``SPECWATCH_URL``), then ``$XDG_CONFIG_HOME/specwatch/config.toml``, then the defaults.

The config file is read, never written. It may set::

    url = "gpu-box:8000"            # the server, when none is given on the command line
    theme = "light"
    baseline = 11.5                 # ms per token without speculation (--baseline-itl) …
    # baseline = "plain.json"       # … or a snapshot taken without speculation (--baseline)
    reference = "before.json"       # the live verdict's reference snapshot (--reference)
    interval = 1.0                  # seconds between GPU samples (-i/--interval)
    metrics_interval = 1.0          # seconds between /metrics scrapes
    slo_ttft = 1000                 # goodput: ms to the first token (--slo-ttft; 0: none)
    slo_tpot = 50                   # goodput: ms per output token after the first (--slo-tpot)

Each key is a field of :class:`Config` whose metadata names the reader that checks its value, so
one loader reads the file. Without a server on the command line (nor ``--demo`` or
``--prometheus``) ``$SPECWATCH_URL``, then the file's ``url``, then ``http://localhost:8000`` is
watched. The theme last chosen in the TUI is kept in ``$XDG_STATE_HOME/specwatch/theme`` and
used when neither the command line nor the file names one.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specwatch.commands.arguments import MIN_INTERVAL_S

DEFAULT_URL = "http://localhost:8000"
URL_ENV = "SPECWATCH_URL"
DEFAULT_THEME = "dark"
DEFAULT_INTERVAL_S = 1.0
URL_COMMANDS = (None, "probe", "bench", "record", "exporter", "profile")
"""The commands that watch or query a server."""
CONFIG_COMMANDS = (*URL_COMMANDS, "replay")
"""The commands the config file applies to (the others never read it)."""


class ConfigError(ValueError):
    """The config file cannot be used; the message is one line naming the file."""


def _text(key: str, value: object, base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty string, not {value!r}")
    return value.strip()


def _file(key: str, value: object, base: Path) -> Path:
    """A snapshot's path; a relative one is taken from the config file's directory."""
    p = Path(_text(key, value, base)).expanduser()
    return p if p.is_absolute() else base / p


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _seconds(key: str, value: object, base: Path) -> float:
    seconds = _number(value)
    if seconds is None:
        raise ValueError(f"{key} must be a number of seconds, not {value!r}")
    if seconds < MIN_INTERVAL_S:
        raise ValueError(f"{key} must be at least {MIN_INTERVAL_S:g}, not {value!r}")
    return seconds


def _slo_ms(key: str, value: object, base: Path) -> float:
    ms = _number(value)
    if ms is None or ms < 0:
        raise ValueError(f"{key} must be a number of ms (0: no objective), not {value!r}")
    return ms


def _baseline(key: str, value: object, base: Path) -> float | Path:
    if isinstance(value, str):
        return _file(key, value, base)
    ms = _number(value)
    if ms is None:
        raise ValueError(f"{key} must be ms per token or a snapshot file, not {value!r}")
    if ms <= 0:
        raise ValueError(f"{key} must be above 0 ms, not {value!r}")
    return ms


@dataclass(frozen=True, slots=True)
class Config:
    """What the config file sets; ``None`` where it sets nothing."""

    url: str | None = field(default=None, metadata={"read": _text})
    theme: str | None = field(default=None, metadata={"read": _text})
    baseline: float | Path | None = field(default=None, metadata={"read": _baseline})
    """Plain per-token latency (ms), or a snapshot taken without speculation."""
    reference: Path | None = field(default=None, metadata={"read": _file})
    interval: float | None = field(default=None, metadata={"read": _seconds})
    metrics_interval: float | None = field(default=None, metadata={"read": _seconds})
    slo_ttft: float | None = field(default=None, metadata={"read": _slo_ms})
    slo_tpot: float | None = field(default=None, metadata={"read": _slo_ms})
    """Goodput's objectives, ms (the command line's ``--slo-ttft`` / ``--slo-tpot`` win)."""
    path: Path | None = None
    """The file read (``None``: there was none)."""


READERS: dict[str, Callable[[str, object, Path], Any]] = {
    f.name: f.metadata["read"] for f in dataclasses.fields(Config) if f.metadata
}
"""Each key's reader: its value checked and converted, or ``ValueError`` with one line."""
KEYS = tuple(READERS)


def _xdg(env: Mapping[str, str] | None, variable: str, *default: str) -> Path:
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or str(Path.home()))
    return Path(env.get(variable) or home.joinpath(*default)) / "specwatch"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/specwatch/config.toml`` (``~/.config/...`` by default)."""
    return _xdg(env, "XDG_CONFIG_HOME", ".config") / "config.toml"


def parse_config(text: str, path: Path) -> Config:
    """A config file's contents.

    Raises:
        ConfigError: Not TOML, an unknown key or a value of the wrong kind (one line).
    """
    # Imported here: without a config file (most starts) TOML is never read.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(KEYS)})")
    try:
        values = {key: READERS[key](key, value, path.parent) for key, value in data.items()}
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None
    return Config(**values, path=path)


def load_config(env: Mapping[str, str] | None = None) -> Config:
    """The user's config file, or an empty :class:`Config` when there is none.

    Raises:
        ConfigError: The file exists but cannot be read or used (one line).
    """
    path = config_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    return parse_config(text, path)


def last_theme(env: Mapping[str, str] | None = None) -> str | None:
    """The theme last chosen in the TUI, ``None`` when none was kept (or it is unreadable)."""
    try:
        name = (_xdg(env, "XDG_STATE_HOME", ".local", "state") / "theme").read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    name = name.strip()
    return name if name and len(name) < 100 and name.isprintable() else None


def keep_theme(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Keep ``name`` as the last chosen theme; ``False`` when it cannot be written."""
    directory = _xdg(env, "XDG_STATE_HOME", ".local", "state")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / "theme.tmp"
        tmp.write_text(name + "\n", encoding="utf-8")
        tmp.replace(directory / "theme")
    except OSError:
        return False
    return True


def _urls(
    args: argparse.Namespace, env: Mapping[str, str], config: Config
) -> tuple[list[str], str]:
    """The servers to watch and where they came from (``""``: another source was named)."""
    given: list[str] = []
    for key in ("target", "url"):  # the positional URLs, then the -u/--url ones
        value = getattr(args, key, None)
        given.extend([value] if isinstance(value, str) else (str(v) for v in value or ()))
    if given:
        return given, "command line"
    if getattr(args, "demo", None) or getattr(args, "prometheus", None):
        return [], ""
    from_env = env.get(URL_ENV, "").strip()
    if from_env:
        return [from_env], f"${URL_ENV}"
    if config.url:
        return [config.url], str(config.path)
    return [DEFAULT_URL], "default"


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
    config = load_config(env) if config is None else config
    for key in ("slo_ttft", "slo_tpot"):
        if hasattr(args, key) and getattr(args, key) is None:
            setattr(args, key, getattr(config, key))
    if command in URL_COMMANDS:
        urls, args.url_source = _urls(args, env, config)
        args.url = (urls[0] if urls else None) if command == "record" else urls
    if command in (None, "replay"):
        if getattr(args, "theme", None):
            args.theme_source = "command line"
        elif config.theme:
            args.theme, args.theme_source = config.theme, str(config.path)
        else:
            kept = last_theme(env)
            args.theme = kept or DEFAULT_THEME
            args.theme_source = "state" if kept else "default"
    if command is None:
        args.interval = args.interval or config.interval or DEFAULT_INTERVAL_S
        args.metrics_interval = (
            args.metrics_interval or config.metrics_interval or DEFAULT_INTERVAL_S
        )
        if args.baseline_itl is None and args.baseline is None:
            if isinstance(config.baseline, Path):
                args.baseline = config.baseline
            else:
                args.baseline_itl = config.baseline
        args.reference = args.reference or config.reference
    return args


__all__ = [
    "CONFIG_COMMANDS",
    "KEYS",
    "URL_COMMANDS",
    "Config",
    "ConfigError",
    "config_path",
    "keep_theme",
    "last_theme",
    "load_config",
    "parse_config",
    "settle",
]
