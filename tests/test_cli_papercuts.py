"""Issue 21, items 17-19: clean program names in subcommand usage and errors, ``--from -1m``,
plain words for a recording or half a range given to compare, ``sim --version`` and
``probe --no-gpu``."""

from __future__ import annotations

from pathlib import Path

import pytest

from specwatch.commands.main import SUBCOMMANDS, main, parse_args
from tests.record_world import record_story


@pytest.mark.parametrize("command", [c for c in SUBCOMMANDS if c != "dcgm-counters"])
def test_subcommand_errors_name_the_command_cleanly(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args([command, "--no-such-option-here"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "[options] [URL ...]" not in err, err
    assert err.startswith(f"usage: specwatch {command} "), err
    assert f"specwatch {command}: error:" in err, err


def test_compare_usage_is_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["compare"])
    err = capsys.readouterr().err
    assert err.startswith("usage: specwatch compare [-h]"), err
    assert "specwatch compare: error: the following arguments are required" in err, err


def test_export_from_takes_a_time_before_the_end() -> None:
    args = parse_args(["export", "--json", "--from", "-1m", "--to", "-10s", "x.sqlite"])
    assert (args.start, args.end) == ("-1m", "-10s")


def test_compare_says_a_range_needs_both_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    night = tmp_path / "night.sqlite"
    record_story(night)
    assert main(["compare", f"{night}@-1m", f"{night}@-2m/-1m"]) == 2
    err = capsys.readouterr().err
    assert "a range needs both ends" in err and "night.sqlite@-2h/-1h55m" in err, err


def test_compare_says_a_recording_is_a_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    night = tmp_path / "night.sqlite"
    record_story(night)
    b = tmp_path / "B.json"
    b.write_text("{}")
    assert main(["compare", str(night), str(b)]) == 2
    err = capsys.readouterr().err
    assert "is a recording" in err and "surrogates" not in err and "JSON" not in err, err


def test_sim_version_is_specwatchs_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["sim", "--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("specwatch ")
    assert parse_args(["sim", "--version", "0.5.4"]).sim_version_old == "0.5.4"


def test_subcommands_take_no_abbreviations() -> None:
    with pytest.raises(SystemExit):
        parse_args(["sim", "--server-ver", "1.0"])


def test_probe_takes_no_gpu() -> None:
    assert parse_args(["probe", "--no-gpu", "localhost:8000"]).no_gpu is True
