"""Docstrings, comments and the documents (README.md, docs/*.md) cite only files that are in
the repository, and every link in the documents resolves, anchor included."""

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


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
TOPS = "specwatch|tests|docs|screenshots|themes|core|sources|sim|ui|session|bench|commands|record"
REPO_PATH = re.compile(rf"`([\w./*-]+\.(?:py|json|md|csv|tcss|toml|sh)|(?:{TOPS})/[\w./*-]*)`")
"""A file or folder of the repository in backticks (a package's modules are cited from inside
``specwatch/``, e.g. ``sim/world.py``, or by their bare name, e.g. ``step_cost.py``)."""
HISTORY = "\n## History"
"""Where ``docs/costs.md``'s history starts: it names files since removed, as they were."""


def _current(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")
    return text[: text.index(HISTORY)] if HISTORY in text else text


def _anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_there_are_documents_beside_the_readme() -> None:
    names = {d.name for d in DOCUMENTS}
    assert {"live.md", "bench-compare.md", "development.md", "costs.md"} <= names


def test_every_link_in_the_documents_resolves() -> None:
    broken: list[str] = []
    for doc in DOCUMENTS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def _exists(cited: str) -> bool:
    if "*" in cited:
        return any(ROOT.glob(cited)) or any(ROOT.joinpath("specwatch").glob(cited))
    if "/" not in cited.rstrip("/"):
        return any(
            (ROOT / cited).exists() or any(ROOT.joinpath(top).rglob(cited))
            for top in ("specwatch", "tests")
        )
    return (ROOT / cited).exists() or (ROOT / "specwatch" / cited).exists()


def test_every_file_the_documents_cite_exists() -> None:
    missing: list[str] = []
    for doc in DOCUMENTS:
        for cited in REPO_PATH.findall(_current(doc)):
            if cited.startswith(("$", "~", "/", ".")) or "<" in cited:
                continue  # the user's machine, or a placeholder
            if Path(cited).name not in USER_FILES and not _exists(cited):
                missing.append(f"{doc.relative_to(ROOT)}: {cited}")
    assert missing == []
