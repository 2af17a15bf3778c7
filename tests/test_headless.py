"""The headless core must never pull in textual or rich (the headless-core rule)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import specwatch

HEADLESS = ("specwatch.core", "specwatch.sources", "specwatch.sim", "specwatch.bench")


def _headless_modules() -> list[str]:
    names: list[str] = []
    for info in pkgutil.walk_packages(specwatch.__path__, "specwatch."):
        if info.name.startswith(HEADLESS) or info.name in HEADLESS:
            names.append(info.name)
    return names


def test_headless_packages_exist() -> None:
    mods = _headless_modules()
    for pkg in HEADLESS:
        assert pkg in mods


def test_headless_core_imports_neither_textual_nor_rich() -> None:
    mods = _headless_modules()
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "", f"headless modules imported: {out.stdout.strip()}"


def test_only_nvml_module_imports_pynvml() -> None:
    offenders: list[str] = []
    for info in pkgutil.walk_packages(specwatch.__path__, "specwatch."):
        if info.ispkg or info.name == "specwatch.sources.nvml_binding":
            continue
        spec = info.module_finder.find_spec(info.name, None)
        if spec is None or spec.origin is None:
            continue
        with open(spec.origin, encoding="utf-8") as fh:
            text = fh.read()
        if "import pynvml" in text or "from pynvml" in text:
            offenders.append(info.name)
    assert offenders == []
