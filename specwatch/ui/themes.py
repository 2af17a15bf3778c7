"""Themes as JSON files, validated before they reach Textual.

A theme file holds the fields of :class:`textual.theme.Theme`. Every colour is parsed with
:meth:`textual.color.Color.parse` and the whole colour system is generated once before the theme is
registered: a bad colour would otherwise register fine and crash the next refresh. A bad file is
reported and skipped; the others still load.

Where themes come from, later directories overriding earlier ones by theme name:

1. ``specwatch/themes/`` inside the installed package (package data),
2. ``themes/`` at the root of a source checkout (the canonical files),
3. the user's ``$XDG_CONFIG_HOME/specwatch/themes`` (default ``~/.config/specwatch/themes``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

COLOR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
OTHER_FIELDS = {"name": str, "dark": bool, "luminosity_spread": float, "text_alpha": float}
ALLOWED = {*COLOR_FIELDS, *OTHER_FIELDS, "variables", "ansi", "description"}
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
MAX_FILE_BYTES = 64 * 1024
BUILTIN_ORDER = ("dark", "light", "high-contrast", "ansi-16")
"""The shipped themes, in the order the theme key cycles through them."""


class ThemeError(ValueError):
    """A theme file that cannot be used; ``str()`` is one line naming the file and the fault."""


@dataclass(frozen=True, slots=True)
class ThemeLoad:
    """The themes that loaded, and one line per file that did not."""

    themes: dict[str, Theme] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def package_theme_dir() -> Path:
    """``specwatch/themes`` next to the installed package."""
    return Path(__file__).resolve().parent.parent / "themes"


def repo_theme_dir() -> Path:
    """``themes/`` at the root of a source checkout."""
    return Path(__file__).resolve().parent.parent.parent / "themes"


def user_theme_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's theme directory (``$XDG_CONFIG_HOME/specwatch/themes``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "specwatch" / "themes"


def default_theme_dirs() -> list[Path]:
    """Where themes are looked for, lowest precedence first."""
    return [package_theme_dir(), repo_theme_dir(), user_theme_dir()]


def _colour(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{where}: expected a colour string, got {type(value).__name__}")
    try:
        Color.parse(value)
    except ColorParseError as e:
        raise ThemeError(f"{where}: not a colour: {value!r}") from e
    return value


def theme_from_mapping(data: Mapping[str, Any], where: str = "theme") -> Theme:
    """Build and validate a :class:`Theme` from a decoded theme file.

    Raises:
        ThemeError: On unknown keys, a missing name or primary colour, a bad colour, or a colour
            system Textual cannot generate.
    """
    unknown = sorted(set(data) - ALLOWED)
    if unknown:
        raise ThemeError(f"{where}: unknown keys {', '.join(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ThemeError(f"{where}: 'name' must be lower-case letters, digits, '-' or '_'")
    if "primary" not in data:
        raise ThemeError(f"{where}: 'primary' colour is required")
    kwargs: dict[str, Any] = {"name": name}
    for key in COLOR_FIELDS:
        if key in data and data[key] is not None:
            kwargs[key] = _colour(data[key], f"{where}: {key}")
    if "dark" in data:
        if not isinstance(data["dark"], bool):
            raise ThemeError(f"{where}: 'dark' must be true or false")
        kwargs["dark"] = data["dark"]
    if "ansi" in data:
        if not isinstance(data["ansi"], bool):
            raise ThemeError(f"{where}: 'ansi' must be true or false")
        kwargs["ansi"] = data["ansi"]
    for key in ("luminosity_spread", "text_alpha"):
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ThemeError(f"{where}: {key!r} must be a number from 0 to 1")
            kwargs[key] = float(value)
    variables = data.get("variables", {})
    if not isinstance(variables, Mapping):
        raise ThemeError(f"{where}: 'variables' must be an object")
    checked: dict[str, str] = {}
    for key, value in variables.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ThemeError(f"{where}: variables must map names to strings")
        if key.endswith("text-style") or key.endswith("-style"):
            checked[key] = value
        else:
            checked[key] = _colour(value, f"{where}: variables.{key}")
    kwargs["variables"] = checked
    theme = Theme(**kwargs)
    try:
        theme.to_color_system().generate()
    except Exception as e:  # any failure here would otherwise surface mid-refresh
        raise ThemeError(f"{where}: Textual cannot use these colours: {e}") from e
    return theme


def load_theme_file(path: Path) -> Theme:
    """Read, decode and validate one theme file.

    Raises:
        ThemeError: If the file is unreadable, too large, not JSON, or not a valid theme.
    """
    where = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ThemeError(f"{where}: larger than {MAX_FILE_BYTES} bytes")
        raw = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ThemeError(f"{where}: cannot read: {e.strerror or e}") from e
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ThemeError(f"{where}: not JSON: {e.msg} at line {e.lineno}") from e
    if not isinstance(data, dict):
        raise ThemeError(f"{where}: expected a JSON object")
    return theme_from_mapping(data, where)


def load_themes(dirs: Iterable[Path] | None = None) -> ThemeLoad:
    """Load every ``*.json`` theme in ``dirs`` (missing directories are skipped).

    Later directories override earlier ones by theme name; files that fail are reported in
    ``errors`` and skipped.
    """
    result = ThemeLoad()
    seen_dirs: set[Path] = set()
    for d in default_theme_dirs() if dirs is None else dirs:
        try:
            resolved = d.resolve()
            if resolved in seen_dirs or not d.is_dir():
                continue
            seen_dirs.add(resolved)
            files = sorted(d.glob("*.json"))
        except OSError as e:
            result.errors.append(f"{d}: cannot list: {e.strerror or e}")
            continue
        for path in files:
            try:
                theme = load_theme_file(path)
            except ThemeError as e:
                result.errors.append(str(e))
                continue
            result.themes[theme.name] = theme
    return result


def cycle_order(names: Iterable[str]) -> list[str]:
    """The shipped themes in their fixed order, then any others alphabetically."""
    names = set(names)
    return [n for n in BUILTIN_ORDER if n in names] + sorted(names - set(BUILTIN_ORDER))
