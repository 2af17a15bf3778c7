"""Import contracts. The static ones (the folders are layers, the headless core never imports
textual or rich, only the NVML binding imports pynvml) are import-linter contracts in
``pyproject.toml``, run by ``.ci/run`` and once here. What the static graph cannot see is
checked at run time, one fresh interpreter per entry point: a headless command loads no UI
toolkit, and the monitor's deferred imports really wait for its first frame."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import specwatch

ROOT = Path(specwatch.__file__).resolve().parent.parent


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_import_contracts_hold() -> None:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:]


HEADLESS_ENTRY_POINTS = (
    "specwatch.commands.probe",
    "specwatch.commands.bench",
    "specwatch.commands.compare",
    "specwatch.commands.record",
    "specwatch.commands.sim",
    "specwatch.commands.exporter",
    "specwatch.commands.advise",
)


@pytest.mark.parametrize("module", HEADLESS_ENTRY_POINTS)
def test_a_headless_command_loads_no_textual(module: str) -> None:
    # httpx loads rich for its own command line when click is installed (import-linter brings
    # click), so rich is held to the static contract only.
    loaded = _loaded_after(f"import {module}")
    assert [m for m in loaded if m.split(".")[0] == "textual"] == []


def test_the_simulator_help_lists_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    from specwatch.commands.main import main

    with contextlib.suppress(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        main(["sim", "--help"])
    out = capsys.readouterr().out
    assert "--dialect" in out and "--load-time" in out


def test_the_session_package_defers_its_pollers() -> None:
    """Importing one module of ``specwatch.session`` (as the monitor's model does before its
    first frame) loads neither the session's pollers nor the NVML binding."""
    loaded = _loaded_after("import specwatch.session.events")
    assert [m for m in loaded if _within(m, ("specwatch.session.live", "pynvml"))] == []


# --- what the live monitor's first frame imports ----------------------------------------------

FIRST_FRAME_PROBE = """
import json, sys
from specwatch.ui import app as ui_app

run = ui_app.SpecwatchApp.run


def headless_run(self, *args, **kwargs):
    return run(self, headless=True, size=(160, 48))


def first_frame(self):
    print(json.dumps(sorted(sys.modules)))
    self.exit(0)


ui_app.SpecwatchApp.run = headless_run
ui_app.SpecwatchApp._after_first_frame = first_frame
from specwatch.commands.main import main
raise SystemExit(main(["--url", "http://127.0.0.1:9"]))
"""
"""Runs ``specwatch --url URL`` headless and prints ``sys.modules`` where the session would
start: right after the first frame (``SpecwatchApp._after_first_frame``)."""
NOT_BEFORE_FIRST_FRAME = (
    # The session and what it reads with: built after the first frame.
    "specwatch.session.live",
    "specwatch.session.events",
    "specwatch.session.gpu_source",
    "specwatch.session.bench_job",
    "specwatch.sources.http.client",
    "specwatch.sources.nvml",
    "specwatch.sources.metrics",
    "specwatch.sources.identity.process",
    # The samples' classes arrive with the first samples (the GPU's, with the rules the GPU
    # pane draws with, come before them); snapshots, benchmarks and recordings only when asked.
    "specwatch.core.server",
    "specwatch.core.identity",
    "specwatch.core.snapshot_records",
    "specwatch.core.judge",  # the verdict's rule: with the first windows or GPU samples
    "specwatch.core.stats",
    "specwatch.bench",
    "specwatch.record",
    "specwatch.sim",
    "httpx",
    "httpcore",
    "pynvml",
    "prometheus_client",
    "aiohttp",
)


def test_the_monitor_first_frame_imports_only_what_it_draws(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path))
    env.pop("SPECWATCH_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME_PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "specwatch.ui.panes.gpus" in loaded  # the probe did see the laid-out screen
    early = sorted(m for m in loaded if _within(m, NOT_BEFORE_FIRST_FRAME))
    assert early == []


def test_the_nvml_room_is_rooms_by_concept_without_a_facade() -> None:
    """Issues 20 and 39: a reading crosses the binding, the reader and the sampler (no module
    over 600 lines), and importers take the binding's names from ``binding`` itself (no module
    re-exports them)."""
    room = ROOT / "specwatch" / "sources" / "nvml"
    sizes = {p.name: len(p.read_text().splitlines()) for p in room.glob("*.py")}
    assert max(sizes.values()) <= 600, sizes
    assert {"binding.py", "reads.py", "sampler.py"} <= set(sizes)
    assert "api.py" not in sizes
    for path in (ROOT / "specwatch").rglob("*.py"):
        assert "sources.nvml.api" not in path.read_text(), path
