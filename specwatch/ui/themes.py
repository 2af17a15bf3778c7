"""Themes as JSON files, validated before they reach Textual.

A theme file holds the fields of :class:`textual.theme.Theme`, checked against
``theme.schema.json`` (every colour by :meth:`textual.color.Color.parse`), and the whole colour
system is generated once before the theme is registered: a bad colour would otherwise register
fine and crash the next refresh. A bad file is reported and skipped; the others still load.

Where themes come from, later directories overriding earlier ones by theme name:

1. ``specwatch/themes/`` inside the installed package (package data),
2. ``themes/`` at the root of a source checkout (the canonical files),
3. the user's ``$XDG_CONFIG_HOME/specwatch/themes`` (default ``~/.config/specwatch/themes``).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from textual.color import Color, ColorParseError
from textual.theme import Theme

SCHEMA_PATH = Path(__file__).with_name("theme.schema.json")
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


def _is_colour(value: object) -> bool:
    return not isinstance(value, str) or isinstance(Color.parse(value), Color)


@functools.cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


@functools.cache
def _validator() -> Draft202012Validator:
    checker = FormatChecker(formats=())
    checker.checks("textual-colour", raises=ColorParseError)(_is_colour)
    return Draft202012Validator(_schema(), format_checker=checker)


def _fault(error: ValidationError) -> str:
    """One line for the schema's complaint, worded for someone editing the file."""
    at = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "format":
        what = f"not a colour: {error.instance!r}"
    elif error.validator == "additionalProperties":
        given = cast("Mapping[str, Any]", error.instance)
        unknown = sorted(set(given) - set(_schema()["properties"]))
        what = f"unknown keys {', '.join(unknown)}"
    elif error.validator == "required":
        what = error.message.replace("is a required property", "is required")
    elif error.validator == "pattern":
        what = "must be lower-case letters, digits, '-' or '_'"
    else:
        what = error.message
    return f"{at}: {what}" if at else what


def theme_from_mapping(data: Mapping[str, Any], where: str = "theme") -> Theme:
    """Build and validate a :class:`Theme` from a decoded theme file (``theme.schema.json``).

    Raises:
        ThemeError: On a file the schema rejects (unknown keys, a missing name or primary colour, a
            bad colour) or a colour system Textual cannot generate.
    """
    error = best_match(_validator().iter_errors(data))
    if error is not None:
        raise ThemeError(f"{where}: {_fault(error)}")
    kwargs = {k: v for k, v in data.items() if k != "description" and v is not None}
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
