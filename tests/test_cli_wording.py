"""One name and one wording per concept across the commands' ``--help``: an option that several
commands take says the same there (its default aside), every default is written
``(default: X)``, and an option named alike for different things is listed here with why."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest

from specwatch.commands.arguments import SHARED_HELP
from specwatch.commands.main import COMMANDS, _parsers, main

DIFFERENT = {
    "--url": "the monitor's says what several open (the fleet screen), others whether a fleet",
    "--demo": "each command's demo is its own: bench's takes how the GPUs are held",
    "--json": "each prints its own document (export: a format beside --csv)",
    "--seed": "the simulator's random seed; bench's order of the built-in prompts",
    "--label": "what the label names: a benchmark, a profile",
    "--baseline": "the monitor takes a snapshot; advise also a recording's range",
    "--sweep": "advise ranks with them in place of its model; the monitor shows them beside",
    "--theme": "replay refers to the monitor's list",
}
DEFAULT = re.compile(r"\s*\(default: [^()]*\)$")
BAD_DEFAULT = re.compile(r"\(default [^:]|\bdefault \d|\(\d[\d.,]*(?: ?s)?\)|;\s*default [^:]")


def _options() -> dict[str, list[tuple[str, str]]]:
    """Each option by its first long name: (command, help) wherever it is taken."""
    top, subs = _parsers()
    out: dict[str, list[tuple[str, str]]] = {}
    for name, parser in {"(monitor)": top, **subs}.items():
        for action in parser._actions:
            if not action.option_strings or action.help in (None, argparse.SUPPRESS):
                continue
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            longs = [o for o in action.option_strings if o.startswith("--")]
            out.setdefault(longs[0] if longs else action.option_strings[0], []).append(
                (name, action.help)
            )
    return out


def test_every_command_has_a_help_that_parses() -> None:
    for name in COMMANDS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0 and f"usage: specwatch {name}" in out.getvalue()


def test_an_option_several_commands_take_is_worded_alike() -> None:
    options = _options()
    shared = {k: v for k, v in options.items() if len({c for c, _ in v}) > 1}
    assert set(DIFFERENT) <= set(shared), set(DIFFERENT) - set(shared)
    for option, takers in shared.items():
        if option in DIFFERENT:
            continue
        words = {DEFAULT.sub("", text) for _, text in takers}
        assert len(words) == 1, (option, takers)
        assert words == {SHARED_HELP.get(option, *words)}, (option, takers)
    # The concepts the issue named, each under one name wherever it is taken.
    assert {c for c, _ in options["--baseline-itl"]} == {"(monitor)", "advise", "exporter"}
    assert {c for c, _ in options["--gpu-interval"]} == {"(monitor)", "bench"}
    assert {c for c, _ in options["--metrics-interval"]} == {"(monitor)", "advise"}
    assert {c for c, _ in options["--interval"]} == {"record", "exporter"}


def test_every_default_is_written_one_way() -> None:
    bad = [
        (option, command, text)
        for option, takers in _options().items()
        for command, text in takers
        if BAD_DEFAULT.search(text)
    ]
    assert bad == []


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["-i", "2"], "interval", 2.0),  # the spellings users already type still work
        (["--interval", "2"], "interval", 2.0),
        (["--gpu-interval", "2"], "interval", 2.0),
        (["advise", "x.sqlite", "--interval", "2"], "interval", 2.0),
        (["advise", "x.sqlite", "--metrics-interval", "2"], "interval", 2.0),
    ],
)
def test_old_spellings_stay_aliases(argv: list[str], dest: str, value: float) -> None:
    from specwatch.commands.main import parse_args

    assert getattr(parse_args(argv, env={"XDG_CONFIG_HOME": "/nonexistent"}), dest) == value
