"""Docstrings and comments cite only files that are in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
CITED = re.compile(r"[\w./-]+\.(?:md|tcss|toml|schema\.json)\b")
USER_FILES = ("config.toml",)
"""Files on the user's machine that code names (the config file), not in the repository."""


def test_every_cited_document_exists() -> None:
    missing: list[str] = []
    for path in sorted(
        [*ROOT.joinpath("specwatch").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]
    ):
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            for name in CITED.findall(line):
                rel = name.lstrip("./")
                if Path(rel).name in USER_FILES:
                    continue
                hits = [ROOT / rel, *ROOT.glob(f"**/{Path(rel).name}")]
                if not any(h.exists() for h in hits):
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {name}")
    assert missing == []
