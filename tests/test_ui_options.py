"""The TUI's command line: clear one-line errors before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from specwatch.commands.main import build_parser
from specwatch.commands.tui import run_tui


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give a server with --url"),
        (["--url", "localhost:1", "--demo"], "exclusive"),
        # The live monitor builds its session after the first frame; a bad address is still
        # refused before the UI starts.
        (["--url", "ftp://x"], "unsupported scheme 'ftp'"),
        (["--url", "localhost:99999", "--no-gpu"], "bad port"),
        (["--demo", "--theme", "no-such-theme"], "no theme 'no-such-theme'"),
        (["--demo", "--baseline", "/nonexistent.json"], "--baseline /nonexistent.json"),
    ],
)
def test_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_tui(build_parser().parse_args(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_defaults_and_validation(tmp_path: Path) -> None:
    from specwatch.commands.main import parse_args

    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s")}
    args = parse_args(["--demo"], env)
    assert (args.interval, args.metrics_interval, args.window, args.theme) == (
        1.0,
        1.0,
        "5m",
        "dark",
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--demo", "--interval", "0.01"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--demo", "--window", "2m"])


def test_baseline_taken_with_speculation_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specwatch.bench.snapshot import write_snapshot
    from tests.test_snapshot import story_snapshot

    path = write_snapshot(story_snapshot(), tmp_path)
    assert run_tui(build_parser().parse_args(["--demo", "--baseline", str(path)])) == 2
    err = capsys.readouterr().err.strip()
    assert "taken with speculation on (EAGLE3)" in err and "\n" not in err


def test_bad_theme_file_is_named_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    themes = tmp_path / "specwatch" / "themes"
    themes.mkdir(parents=True)
    (themes / "broken.json").write_text('{"name": "broken", "primary": "notacolour"}')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert run_tui(build_parser().parse_args(["--demo", "--theme", "broken"])) == 2
    err = capsys.readouterr().err.strip()
    assert "theme 'broken' skipped" in err and "not a colour" in err and "\n" not in err
