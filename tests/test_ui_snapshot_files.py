"""Every SVG under ``tests/__snapshots__/`` belongs to a test of its module.

A serial run has syrupy fail on a snapshot no test uses any more; under pytest-xdist (the
suite's default) its workers cannot pool what they used, so syrupy skips that check. This test
keeps it: the modules' tests are collected in a child (whatever this run selected) and each
snapshot's name must be one of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SNAPSHOTS = TESTS / "__snapshots__"


def _collected(modules: list[str]) -> set[str]:
    """``module::name`` of every test in ``modules``, collected as a serial run would."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
        ]
        + [str(TESTS / f"{m}.py") for m in modules],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {
        line.removeprefix("tests/").replace(".py::", "::", 1)
        for line in done.stdout.splitlines()
        if line.startswith("tests/") and "::" in line
    }


def test_every_snapshot_file_has_its_test() -> None:
    folders = sorted(p for p in SNAPSHOTS.iterdir() if p.is_dir())
    files = {f"{d.name}::{svg.stem}" for d in folders for svg in d.glob("*.svg")}
    assert files, "no snapshots found: the check would be vacuous"
    collected = _collected([d.name for d in folders])
    assert files - collected == set(), "snapshots no test uses (remove them)"
