"""Import contracts, checked the harlequin way: one fresh interpreter per module, and the layer
order read from the source with ``ast``, so a failure names the culprit.

Layers, lowest first; a module may import its own layer and the ones below, never above::

    core  <-  sources  <-  bench  <-  session  <-  record  <-  front ends (ui, cli, the
                                                               probe/bench/compare commands)

``specwatch.sim`` stands apart: it imports core, itself and the NVML constants its fake NVML
mirrors; product modules import it only inside functions, on demo paths.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import specwatch

ROOT = Path(specwatch.__file__).parent
HEAVY_FOR_CORE = ("httpx", "pynvml", "aiohttp", "textual", "rich")
UI_TOOLKIT = ("textual", "rich")
LAYERS = {"core": 0, "sources": 1, "bench": 2, "session": 3, "record": 4, "ui": 5, "commands": 5}
FRONT_END = 5
FRONT_END_MODULES = {
    "specwatch.commands.main": "the command line",
    "specwatch.commands.settings": "the command line: environment, config file and defaults",
    "specwatch.__main__": "python -m specwatch",
    # The bench/compare and probe commands live beside the layer they drive; they are front
    # ends (they may use the session once it exists) and nothing below the front ends may
    # import them.
    "specwatch.commands.bench": "the bench and compare commands",
    "specwatch.commands.compare": "the compare command",
    "specwatch.commands.probe": "the probe command",
    "specwatch.commands.record": "the record and export commands",
}
SIM_MAY_IMPORT = ("specwatch.core", "specwatch.sim", "specwatch.sources.nvml")
"""The fake NVML speaks the real NVML's numbers, which only the NVML modules may import."""
DEMO_PATHS = (
    "specwatch.commands",  # specwatch sim, record --demo, bench --demo
    "specwatch.ui",  # specwatch --demo
    "specwatch.commands.bench",  # specwatch bench --demo
    "specwatch.session",  # the coming headless session, which will start the demo
    "specwatch.commands.record",  # specwatch record --demo
)
"""Modules allowed to import the simulator, inside a function (or for type checking)."""


def _modules(prefix: str = "specwatch") -> list[str]:
    names = [prefix] if prefix == "specwatch" else []
    for info in pkgutil.walk_packages(specwatch.__path__, "specwatch."):
        if info.name == prefix or info.name.startswith(prefix + "."):
            names.append(info.name)
    return sorted(names)


def _loaded_after(code: str, watch: tuple[str, ...]) -> list[str]:
    """Top-level packages of ``watch`` loaded by running ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted({{k.split('.')[0] for k in sys.modules}} & {set(watch)!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", _modules("specwatch.core"))
def test_core_module_loads_no_io_or_ui_library(module: str) -> None:
    assert _loaded_after(f"import {module}", HEAVY_FOR_CORE) == []


@pytest.mark.parametrize(
    "module",
    [
        m
        for p in ("specwatch.sources", "specwatch.bench", "specwatch.sim", "specwatch.record")
        for m in _modules(p)
    ],
)
def test_headless_module_loads_no_ui_toolkit(module: str) -> None:
    assert _loaded_after(f"import {module}", UI_TOOLKIT) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["probe", "--help"],
        ["compare", "--help"],
        ["bench", "--help"],
        ["record", "--help"],
        ["export", "--help"],
    ],
)
def test_cli_help_loads_neither_textual_nor_aiohttp(argv: list[str]) -> None:
    code = (
        "import contextlib, io\n"
        "from specwatch.commands.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})\n"
    )
    assert _loaded_after(code, ("textual", "aiohttp")) == []


def test_sim_help_still_lists_its_options() -> None:
    """The simulator's options are added lazily; ``specwatch sim --help`` must still show them."""
    code = (
        "import contextlib, io\n"
        "from specwatch.commands.main import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n"
        "    main(['sim', '--help'])\n"
        "print(buf.getvalue())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "--dialect" in out.stdout and "--load-time" in out.stdout


# --- the layer contract, from the source ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Import:
    target: str
    lazy: bool
    """Inside a function body."""
    typing_only: bool
    """Inside ``if TYPE_CHECKING:``."""
    line: int


def _path_of(module: str) -> Path:
    rel = Path(*module.split(".")[1:])
    package = ROOT / rel / "__init__.py"
    return package if package.exists() else (ROOT / rel).with_suffix(".py")


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def _imports(module: str) -> list[_Import]:
    path = _path_of(module)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[_Import] = []

    def visit(node: ast.AST, lazy: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            child_lazy = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            child_typing = typing_only or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            )
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - child.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    names.append(sub if _is_module(sub) else base)
            for name in names:
                if name == "specwatch" or name.startswith("specwatch."):
                    found.append(
                        _Import(name, child_lazy, child_typing, getattr(child, "lineno", 0))
                    )
            visit(child, child_lazy, child_typing)

    visit(tree, False, False)
    return found


def _layer(module: str) -> int | None:
    """The layer of a product module; ``None`` for the simulator and the package root."""
    if module in FRONT_END_MODULES:
        return FRONT_END
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return LAYERS.get(parts[1])


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


PRODUCT = [m for m in _modules() if not _within(m, ("specwatch.sim",)) and m != "specwatch"]


def test_every_product_module_has_a_layer() -> None:
    assert [m for m in PRODUCT if _layer(m) is None] == []


@pytest.mark.parametrize("module", PRODUCT)
def test_module_imports_only_its_layer_and_below(module: str) -> None:
    own = _layer(module)
    assert own is not None
    wrong = []
    for imp in _imports(module):
        if imp.target == "specwatch" or _within(imp.target, ("specwatch.sim",)):
            continue  # the version string; the simulator has its own rule below
        theirs = _layer(imp.target)
        if theirs is None or theirs > own:
            wrong.append(f"line {imp.line}: {imp.target}")
        elif imp.target in FRONT_END_MODULES and own != FRONT_END:
            wrong.append(f"line {imp.line}: {imp.target} is a front end")
    assert wrong == [], f"{module} (layer {own}) imports above itself"


@pytest.mark.parametrize("module", PRODUCT)
def test_product_imports_the_simulator_only_lazily_on_demo_paths(module: str) -> None:
    sim = [i for i in _imports(module) if _within(i.target, ("specwatch.sim",))]
    eager = [f"line {i.line}: {i.target}" for i in sim if not (i.lazy or i.typing_only)]
    if module == "specwatch.commands.sim":  # the simulator's own command
        eager = []
    assert eager == [], f"{module} imports the simulator at module level"
    if sim:
        assert _within(module, DEMO_PATHS), f"{module} is not a demo path but imports the sim"


@pytest.mark.parametrize("module", _modules("specwatch.sim"))
def test_simulator_imports_only_core_and_itself(module: str) -> None:
    wrong = [
        f"line {i.line}: {i.target}"
        for i in _imports(module)
        if i.target != "specwatch" and not _within(i.target, SIM_MAY_IMPORT)
    ]
    assert wrong == []


def test_the_contract_sees_imports() -> None:
    """Guards the parser above: known imports of known modules are found and classified."""
    cli = {i.target: i for i in _imports("specwatch.commands.main")}
    assert cli["specwatch.commands.sim"].lazy
    detect = {i.target for i in _imports("specwatch.sources.detect")}
    assert "specwatch.sources.client" in detect and "specwatch.core.server" in detect
    assert _layer("specwatch.core.stats") < _layer("specwatch.sources.prom")  # type: ignore[operator]


def test_only_the_nvml_modules_import_pynvml() -> None:
    offenders = []
    for module in _modules():
        text = _path_of(module).read_text(encoding="utf-8")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "pynvml" for n in names) and not module.startswith(
                "specwatch.sources.nvml"
            ):
                offenders.append(module)
    assert offenders == []


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
    "specwatch.session.server_poller",
    "specwatch.session.bench_job",
    "specwatch.session.dcgm_source",
    "specwatch.session.verdict_rule",
    "specwatch.sources.client",
    "specwatch.sources.nvml",
    "specwatch.sources.nvml_binding",
    "specwatch.sources.metrics",
    "specwatch.sources.server_identity",
    # The samples' classes arrive with the first samples; snapshots, benchmarks and
    # recordings only when asked for.
    "specwatch.core.gpu",
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
