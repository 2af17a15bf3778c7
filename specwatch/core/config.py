"""The user's settings: ``$XDG_CONFIG_HOME/specwatch/config.toml`` and the last chosen theme.

The config file is read, never written. It may set::

    url = "gpu-box:8000"            # the server, when none is given on the command line
    theme = "light"
    baseline = 11.5                 # ms per token without speculation (--baseline-itl) …
    # baseline = "plain.json"       # … or a snapshot taken without speculation (--baseline)
    reference = "before.json"       # the live verdict's reference snapshot (--reference)
    interval = 1.0                  # seconds between GPU samples (-i/--interval)
    metrics_interval = 1.0          # seconds between /metrics scrapes

Precedence: the command line, then the environment (``SPECWATCH_URL``), then this file, then the
defaults. The theme last chosen in the TUI is kept in ``$XDG_STATE_HOME/specwatch/theme`` and
used when neither the command line nor the file names one.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://localhost:8000"
"""The server watched when no server source is given anywhere."""
URL_ENV = "SPECWATCH_URL"
"""The environment variable naming the server."""
MIN_INTERVAL_S = 0.1
"""Sampling faster than this costs more than it shows."""
KEYS = ("url", "theme", "baseline", "reference", "interval", "metrics_interval")
"""The keys a config file may set."""


class ConfigError(ValueError):
    """The config file cannot be used; the message is one line naming the file."""


@dataclass(frozen=True, slots=True)
class Config:
    """What the config file sets; ``None`` where it sets nothing."""

    url: str | None = None
    theme: str | None = None
    baseline_ms: float | None = None
    """``baseline`` as a number: plain per-token latency, ms."""
    baseline: Path | None = None
    """``baseline`` as a string: a snapshot taken without speculation."""
    reference: Path | None = None
    interval: float | None = None
    metrics_interval: float | None = None
    path: Path | None = None
    """The file read (``None``: there was none)."""


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or str(Path.home()))


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/specwatch/config.toml`` (``~/.config/...`` by default)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(_home(env) / ".config")
    return Path(base) / "specwatch" / "config.toml"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/specwatch`` (``~/.local/state/specwatch`` by default)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(_home(env) / ".local" / "state")
    return Path(base) / "specwatch"


def _number(data: Mapping[str, object], key: str, where: str, floor: float) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number of seconds, not {value!r}")
    if not math.isfinite(value) or value < floor:
        raise ConfigError(f"{where}: {key} must be at least {floor:g}, not {value!r}")
    return float(value)


def _text(data: Mapping[str, object], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key} must be a non-empty string, not {value!r}")
    return value.strip()


def _relative_to(path: str | None, base: Path) -> Path | None:
    if path is None:
        return None
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def parse_config(text: str, path: Path) -> Config:
    """A config file's contents; relative snapshot paths are taken from the file's directory.

    Raises:
        ConfigError: Not TOML, an unknown key or a value of the wrong kind (one line).
    """
    # Imported here: without a config file (most starts) TOML is never read.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown setting {unknown[0]!r} (known: {', '.join(KEYS)})")
    baseline = data.get("baseline")
    baseline_ms: float | None = None
    baseline_file: Path | None = None
    if isinstance(baseline, str):
        baseline_file = _relative_to(_text(data, "baseline", where), path.parent)
    elif baseline is not None:
        if isinstance(baseline, bool) or not isinstance(baseline, (int, float)):
            raise ConfigError(
                f"{where}: baseline must be ms per token or a snapshot file, not {baseline!r}"
            )
        if not math.isfinite(baseline) or baseline <= 0:
            raise ConfigError(f"{where}: baseline must be above 0 ms, not {baseline!r}")
        baseline_ms = float(baseline)
    return Config(
        url=_text(data, "url", where),
        theme=_text(data, "theme", where),
        baseline_ms=baseline_ms,
        baseline=baseline_file,
        reference=_relative_to(_text(data, "reference", where), path.parent),
        interval=_number(data, "interval", where, MIN_INTERVAL_S),
        metrics_interval=_number(data, "metrics_interval", where, MIN_INTERVAL_S),
        path=path,
    )


def load_config(env: Mapping[str, str] | None = None, path: Path | None = None) -> Config:
    """The user's config file, or an empty :class:`Config` when there is none.

    Raises:
        ConfigError: The file exists but cannot be read or used (one line).
    """
    path = config_path(env) if path is None else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    return parse_config(text, path)


def resolve_urls(
    given: list[str], env: Mapping[str, str], config: Config, other_source: bool
) -> tuple[list[str], str]:
    """The servers to watch and where they came from.

    Args:
        given: The command line's URLs (positional first, then ``-u/--url``).
        env: The environment (for ``SPECWATCH_URL``).
        config: The config file's settings.
        other_source: The command line names another server source (``--demo``,
            ``--prometheus``): the environment, the file and the default then give none.

    Returns:
        The URLs and ``"command line"``, ``"$SPECWATCH_URL"``, the config file's path,
        ``"default"`` or ``""`` (none: another source).
    """
    if given:
        return given, "command line"
    if other_source:
        return [], ""
    from_env = env.get(URL_ENV, "").strip()
    if from_env:
        return [from_env], f"${URL_ENV}"
    if config.url:
        return [config.url], str(config.path)
    return [DEFAULT_URL], "default"


def last_theme(env: Mapping[str, str] | None = None) -> str | None:
    """The theme last chosen in the TUI, ``None`` when none was kept (or it is unreadable)."""
    try:
        name = (state_dir(env) / "theme").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name if name and len(name) < 100 and name.isprintable() else None


def keep_theme(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Keep ``name`` as the last chosen theme; ``False`` when it cannot be written."""
    directory = state_dir(env)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / "theme.tmp"
        tmp.write_text(name + "\n", encoding="utf-8")
        tmp.replace(directory / "theme")
    except OSError:
        return False
    return True


__all__ = [
    "DEFAULT_URL",
    "KEYS",
    "MIN_INTERVAL_S",
    "URL_ENV",
    "Config",
    "ConfigError",
    "config_path",
    "keep_theme",
    "last_theme",
    "load_config",
    "parse_config",
    "resolve_urls",
    "state_dir",
]
