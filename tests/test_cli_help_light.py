"""``specwatch --help`` stays light: argparse and specwatch's argument modules, nothing more."""

from __future__ import annotations

import json
import subprocess
import sys

from specwatch.commands.arguments import DIALECTS
from specwatch.core.server import Dialect
from specwatch.core.windows import WINDOWS
from specwatch.ui.model import WINDOWS as MODEL_WINDOWS

ALLOWED = {
    "specwatch",
    "specwatch.__main__",
    "specwatch.commands",
    "specwatch.commands.main",
    "specwatch.commands.tui",
    "specwatch.commands.arguments",
    "specwatch.core",
    "specwatch.core.sanitize",
    "specwatch.core.windows",
}
HEAVY = ("httpx", "asyncio", "dataclasses", "tomllib", "prometheus_client", "textual", "rich")


def _loaded_by_help(argv: list[str]) -> list[str]:
    code = (
        "import contextlib, io, json, sys\n"
        "from specwatch.commands.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_help_imports_only_the_argument_modules() -> None:
    loaded = _loaded_by_help(["--help"])
    ours = {m for m in loaded if m == "specwatch" or m.startswith("specwatch.")}
    assert ours - ALLOWED == set()
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []


def test_a_subcommand_help_fills_only_its_own_parser() -> None:
    loaded = _loaded_by_help(["compare", "--help"])
    assert "specwatch.commands.compare" in loaded
    assert "specwatch.commands.record" not in loaded and "specwatch.commands.probe" not in loaded


def test_the_bench_help_loads_neither_the_runner_nor_the_snapshot_writer() -> None:
    loaded = _loaded_by_help(["bench", "--help"])
    assert "specwatch.commands.bench" in loaded
    heavy = ("specwatch.bench", "specwatch.sources", "specwatch.session", "httpx", "asyncio")
    assert [m for m in loaded if m.startswith(heavy)] == []


def test_the_simulator_help_does_not_load_the_simulated_server() -> None:
    loaded = _loaded_by_help(["sim", "--help"])
    assert "specwatch.commands.sim" in loaded
    assert [m for m in loaded if m.startswith("specwatch.sim") or m == "aiohttp"] == []


def test_the_simulator_options_offer_what_the_simulator_has() -> None:
    from specwatch.commands.sim import DCGM_DEFAULT_PORT, DEFAULT_VERSIONS
    from specwatch.sim.presets import DEFAULT_VERSIONS as SIM_VERSIONS
    from specwatch.sources.dcgm.parse import DEFAULT_PORT

    assert DCGM_DEFAULT_PORT == DEFAULT_PORT
    assert {d.value: v for d, v in SIM_VERSIONS.items()} == DEFAULT_VERSIONS


def test_the_demo_dialects_are_every_dialect() -> None:
    assert tuple(d.value for d in Dialect) == DIALECTS


def test_the_model_uses_the_windows_the_options_offer() -> None:
    assert MODEL_WINDOWS is WINDOWS


def test_the_advise_help_loads_neither_the_watch_nor_the_recording_reader() -> None:
    loaded = _loaded_by_help(["advise", "--help"])
    assert "specwatch.commands.advise" in loaded
    heavy = ("specwatch.session", "specwatch.record", "specwatch.sources", "httpx", "asyncio")
    assert [m for m in loaded if m.startswith(heavy)] == []
