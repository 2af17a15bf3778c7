"""Theme files: shipped ones load, bad ones are reported and skipped, user ones override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specwatch.ui.themes import (
    BUILTIN_ORDER,
    SCHEMA_PATH,
    ThemeError,
    cycle_order,
    load_themes,
    repo_theme_dir,
    theme_from_mapping,
    user_theme_dir,
)


def test_shipped_themes_load_cleanly() -> None:
    loaded = load_themes([repo_theme_dir()])
    assert loaded.errors == []
    assert set(BUILTIN_ORDER) <= set(loaded.themes)
    assert loaded.themes["ansi-16"].ansi is True
    assert loaded.themes["light"].dark is False


def test_ansi_16_uses_only_ansi_colours() -> None:
    data = json.loads((repo_theme_dir() / "ansi-16.json").read_text())
    colours = [
        v for k, v in data.items() if k not in ("name", "description", "dark", "ansi", "variables")
    ]
    colours += [v for k, v in data["variables"].items() if not k.endswith("-style")]
    assert colours and all(c.startswith("ansi_") for c in colours)


def write(d: Path, name: str, data: object) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_bad_files_are_reported_and_skipped(tmp_path: Path) -> None:
    write(tmp_path, "good", {"name": "good", "primary": "#112233"})
    write(tmp_path, "badcolour", {"name": "badcolour", "primary": "#11223"})
    write(tmp_path, "badvar", {"name": "badvar", "primary": "red", "variables": {"border": "nope"}})
    write(tmp_path, "notjson", "{ nope")
    write(tmp_path, "noprimary", {"name": "noprimary"})
    write(tmp_path, "extra", {"name": "extra", "primary": "red", "colour": "blue"})
    write(tmp_path, "list", [1, 2])
    loaded = load_themes([tmp_path])
    assert list(loaded.themes) == ["good"]
    text = "\n".join(loaded.errors)
    assert len(loaded.errors) == 6
    assert "badcolour.json: primary: not a colour: '#11223'" in text
    assert "variables.border" in text and "not JSON" in text and "unknown keys colour" in text


def test_user_dir_overrides_by_name(tmp_path: Path) -> None:
    user = tmp_path / "user"
    write(user, "dark", {"name": "dark", "primary": "#ff0000"})
    loaded = load_themes([repo_theme_dir(), user])
    assert loaded.themes["dark"].primary == "#ff0000"


def test_user_theme_dir_follows_xdg() -> None:
    assert user_theme_dir({"XDG_CONFIG_HOME": "/x"}) == Path("/x/specwatch/themes")
    assert user_theme_dir({"HOME": "/home/u"}) == Path("/home/u/.config/specwatch/themes")


def test_validation_rejects_wrong_types() -> None:
    with pytest.raises(ThemeError, match="dark"):
        theme_from_mapping({"name": "x", "primary": "red", "dark": "yes"})
    with pytest.raises(ThemeError, match="name"):
        theme_from_mapping({"name": "Bad Name", "primary": "red"})
    with pytest.raises(ThemeError, match="text_alpha"):
        theme_from_mapping({"name": "x", "primary": "red", "text_alpha": 3})


def test_cycle_order_puts_shipped_first() -> None:
    assert cycle_order(["zeta", "light", "dark", "alpha"]) == ["dark", "light", "alpha", "zeta"]


def test_the_schema_is_a_valid_json_schema_and_names_the_faulty_field() -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    # an optional colour may be null; when given it is parsed like the others.
    assert theme_from_mapping({"name": "x", "primary": "red", "secondary": None}).secondary is None
    with pytest.raises(ThemeError, match="secondary: not a colour: 'nope'"):
        theme_from_mapping({"name": "x", "primary": "red", "secondary": "nope"})
    with pytest.raises(ThemeError, match="luminosity_spread"):
        theme_from_mapping({"name": "x", "primary": "red", "luminosity_spread": True})
    styled = {"name": "x", "primary": "red", "variables": {"footer-key-style": "bold"}}
    assert theme_from_mapping(styled).variables == {"footer-key-style": "bold"}
