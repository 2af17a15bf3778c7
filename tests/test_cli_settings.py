"""Command-line conventions: positional URL, -u/-i/-V, SPECWATCH_URL, the config file, the kept
theme, and their precedence (command line > environment > config file > defaults)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specwatch import __version__
from specwatch.commands.main import main, parse_args
from specwatch.commands.settings import (
    ConfigError,
    config_path,
    keep_theme,
    last_theme,
    load_config,
    parse_config,
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s")}


def _config(env: dict[str, str], text: str) -> Path:
    path = config_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", [[], ["probe"], ["bench"]])
def test_positional_url_beside_dash_u(command: list[str], env: dict[str, str]) -> None:
    assert parse_args([*command, "localhost:8000"], env).url == ["localhost:8000"]
    assert parse_args([*command, "-u", "a:1"], env).url == ["a:1"]
    assert parse_args([*command, "a:1", "--url", "b:2"], env).url == ["a:1", "b:2"]


def test_record_takes_one_positional_url(env: dict[str, str]) -> None:
    assert parse_args(["record", "localhost:9", "-o", "x.db"], env).url == "localhost:9"


def test_probe_keeps_repeated_url_for_a_fleet(env: dict[str, str]) -> None:
    args = parse_args(["probe", "--url", "a:1", "--url", "b:2", "--json"], env)
    assert args.url == ["a:1", "b:2"] and args.json


def test_tui_options_before_the_positional_url(env: dict[str, str]) -> None:
    args = parse_args(["--theme", "light", "-i", "2", "gpu-box:8000"], env)
    assert (args.url, args.theme, args.interval) == (["gpu-box:8000"], "light", 2.0)
    assert args.command is None


def test_default_url_only_without_any_server_source(env: dict[str, str]) -> None:
    args = parse_args([], env)
    assert (args.url, args.url_source) == (["http://localhost:8000"], "default")
    assert parse_args(["--demo"], env).url == []
    assert parse_args(["probe", "--prometheus", "http://prom:9090"], env).url == []
    assert parse_args(["record", "--demo", "-o", "x.db"], env).url is None


def test_precedence_command_line_env_config_default(env: dict[str, str]) -> None:
    _config(env, 'url = "from-file:1"\ninterval = 2.5\ntheme = "light"\n')
    assert parse_args([], env).url == ["from-file:1"]
    with_env = {**env, "SPECWATCH_URL": "from-env:2"}
    assert parse_args([], with_env).url == ["from-env:2"]
    assert parse_args(["probe"], with_env).url_source == "$SPECWATCH_URL"
    assert parse_args(["cli:3"], with_env).url == ["cli:3"]
    assert parse_args(["--demo"], with_env).url == []
    args = parse_args([], env)
    assert (args.interval, args.metrics_interval, args.theme) == (2.5, 1.0, "light")
    args = parse_args(["--interval", "3", "--theme", "dark"], env)
    assert (args.interval, args.theme) == (3.0, "dark")


def test_config_baseline_number_or_snapshot_and_reference(env: dict[str, str]) -> None:
    path = _config(env, 'baseline = 11.5\nreference = "before.json"\nmetrics_interval = 0.5\n')
    args = parse_args([], env)
    assert (args.baseline_itl, args.baseline) == (11.5, None)
    assert args.reference == path.parent / "before.json"
    assert args.metrics_interval == 0.5
    _config(env, 'baseline = "/abs/plain.json"\n')
    args = parse_args([], env)
    assert (args.baseline_itl, args.baseline) == (None, Path("/abs/plain.json"))
    # The command line's baseline wins over the file's, whichever kind.
    assert parse_args(["--baseline-itl", "7"], env).baseline is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("url = ", "not valid TOML"),
        ("colour = 'x'", "unknown setting 'colour'"),
        ("interval = 'fast'", "interval must be a number"),
        ("interval = 0.01", "interval must be at least 0.1"),
        ("metrics_interval = inf", "metrics_interval must be a number"),
        ("reference = ''", "reference must be a non-empty string"),
        ("baseline = true", "baseline must be ms per token or a snapshot file"),
        ("baseline = -3", "baseline must be above 0"),
        ("url = 3", "url must be a non-empty string"),
    ],
)
def test_a_bad_config_file_is_one_line(text: str, message: str, env: dict[str, str]) -> None:
    path = _config(env, text)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(env)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_main_reports_a_bad_config_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "specwatch").mkdir()
    (tmp_path / "specwatch" / "config.toml").write_text("interval = [")
    assert main(["probe"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specwatch: ") and "config.toml: not valid TOML" in err
    assert "\n" not in err
    # Commands that do not use it never read it.
    assert main(["dcgm-counters"]) == 0


def test_config_file_is_never_written(env: dict[str, str]) -> None:
    path = _config(env, 'theme = "light"\n')
    before = path.stat().st_mtime_ns, path.read_text()
    parse_args(["--theme", "dark"], env)
    assert (path.stat().st_mtime_ns, path.read_text()) == before
    assert parse_config("", path).url is None


def test_the_kept_theme_is_used_unless_named(env: dict[str, str]) -> None:
    assert last_theme(env) is None
    assert parse_args([], env).theme == "dark"
    assert keep_theme("high-contrast", env)
    assert (Path(env["XDG_STATE_HOME"]) / "specwatch" / "theme").read_text() == "high-contrast\n"
    args = parse_args([], env)
    assert (args.theme, args.theme_source) == ("high-contrast", "state")
    assert parse_args(["--theme", "light"], env).theme == "light"
    _config(env, 'theme = "ansi-16"\n')
    assert parse_args([], env).theme == "ansi-16"
    assert parse_args(["replay", "x.db"], env).theme == "ansi-16"


def test_keep_chosen_theme_only_when_it_changed() -> None:
    from specwatch.commands.tui import keep_chosen_theme

    assert not keep_chosen_theme("dark", "dark")
    assert last_theme() is None
    assert keep_chosen_theme("dark", "light")
    assert last_theme() == "light"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([flag])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"specwatch {__version__}"


def test_sim_server_version_and_the_hidden_old_spelling(env: dict[str, str]) -> None:
    args = parse_args(["sim", "--server-version", "0.11.0"], env)
    assert args.sim_version == "0.11.0"
    assert parse_args(["sim", "--version", "0.4"], env).sim_version_old == "0.4"


def test_help_names_the_positional_url(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "specwatch [options] [URL ...]" in out and "SPECWATCH_URL" in out
    assert "-i S, --interval S" in out and "-u URL, --url URL" in out


def test_several_urls_in_the_tui_open_the_fleet_screen(env: dict[str, str]) -> None:
    from specwatch.commands.tui import _is_fleet, first_url

    several = parse_args(["a:1", "b:2"], env)
    assert _is_fleet(several) and several.url == ["a:1", "b:2"]
    one = parse_args(["-u", "a:1"], env)
    assert not _is_fleet(one) and first_url(one) == "a:1"


def test_demo_has_a_simulated_plain_baseline(env: dict[str, str]) -> None:
    from specwatch.commands.tui import _baseline
    from specwatch.sim.presets import preset

    ms, source, error = _baseline(parse_args(["--demo"], env))
    assert (ms, source, error) == (preset("sglang").plain_step_ms, "simulated", None)
    ms, source, _ = _baseline(parse_args(["--demo", "--baseline-itl", "4"], env))
    assert (ms, source) == (4.0, "--baseline-itl")
    assert _baseline(parse_args(["localhost:1"], env))[0] is None
