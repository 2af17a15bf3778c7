"""Where a server's code comes from: its Python package, git checkout and loaded libraries.

I/O helpers for :mod:`.process`. Git runs read-only (``--no-optional-locks``,
no fsmonitor) with a timeout; nothing the server ships is ever executed. Every failure becomes
``None`` or a note, never an exception.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specwatch.core.identity import Checkout, LoadedLibrary

CHANGE_MARGIN_S = 1.0
"""A process start time from ``/proc`` is exact only to about a second (boot time is whole
seconds); a file must be newer than start plus this margin to count as changed after start."""
MAX_GIT_OUTPUT = 1 << 20
MAX_LISTED_CHANGES = 5

_GIT_BASE = (
    "git",
    "--no-optional-locks",
    "-c",
    "safe.directory=*",
    # a checkout owned by someone else could name a program here that status would run
    "-c",
    "core.fsmonitor=false",
)


class Deadline:
    """A wall-clock budget shared by every step of one identity read."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        """Whether the budget is spent."""
        return self.left() <= 0.0


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def run_git(directory: str, args: Sequence[str], deadline: Deadline) -> str | None:
    """Run one read-only git command in ``directory``; its stdout, or ``None`` on any failure."""
    timeout = min(5.0, deadline.left())
    if timeout <= 0.05:
        return None
    try:
        done = subprocess.run(
            [*_GIT_BASE, "-C", directory, *args],
            capture_output=True,
            timeout=timeout,
            env=_git_env(),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout[:MAX_GIT_OUTPUT].decode("utf-8", "replace")


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def read_checkout(directory: str, started_at: float | None, deadline: Deadline) -> Checkout | None:
    """The git checkout containing ``directory`` (commit, dirty, changes after start), if any."""
    top = run_git(directory, ["rev-parse", "--show-toplevel", "--absolute-git-dir"], deadline)
    if top is None:
        return None
    lines = top.splitlines()
    if len(lines) < 2:
        return None
    root, git_dir = lines[0], Path(lines[1])
    head = run_git(root, ["rev-parse", "--verify", "-q", "HEAD"], deadline)
    commit = head.strip() if head and re.fullmatch(r"[0-9a-f]{40,64}\s*", head) else None
    status = run_git(root, ["status", "--porcelain=v1", "-z"], deadline)
    dirty = None if status is None else bool(status.strip("\0"))
    changed: list[str] = []
    if started_at is not None:
        limit = started_at + CHANGE_MARGIN_S
        moved = [_mtime(git_dir / name) for name in ("HEAD", "logs/HEAD")]
        if any(t is not None and t > limit for t in moved):
            changed.append("HEAD moved after the server started")
        late = [
            name
            for name in _status_paths(status or "")
            if (t := _mtime(Path(root) / name)) is not None and t > limit
        ]
        if late:
            shown = ", ".join(late[:MAX_LISTED_CHANGES])
            extra = len(late) - MAX_LISTED_CHANGES
            more = f" and {extra} more" if extra > 0 else ""
            changed.append(f"files changed after the server started: {shown}{more}")
    return Checkout(path=root, commit=commit, dirty=dirty, changed_after_start=tuple(changed))


def _status_paths(porcelain_z: str) -> list[str]:
    """Paths from ``git status --porcelain=v1 -z`` (a rename's source entry skipped)."""
    paths: list[str] = []
    entries = porcelain_z.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":
            i += 1
    return paths


# --- the Python package ------------------------------------------------------------------------

_PY_OPTS_WITH_VALUE = {"-X", "-W", "-Q"}
_CONSOLE_IMPORT = re.compile(r"^\s*from\s+([A-Za-z_]\w*)[\w.]*\s+import", re.M)


@dataclass(frozen=True, slots=True)
class PythonEntry:
    """How a Python server was started: ``-m module`` or a script path."""

    module: str | None = None
    script: str | None = None


def python_entry(cmdline: Sequence[str]) -> PythonEntry | None:
    """The module or script a Python command line runs; ``None`` when it is not Python."""
    if not cmdline or not Path(cmdline[0]).name.startswith("python"):
        return None
    i = 1
    while i < len(cmdline):
        arg = cmdline[i]
        if arg == "-m" and i + 1 < len(cmdline):
            return PythonEntry(module=cmdline[i + 1])
        if arg.startswith("-m") and len(arg) > 2:
            return PythonEntry(module=arg[2:])
        if arg == "-c":
            return PythonEntry()
        if arg in _PY_OPTS_WITH_VALUE:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return PythonEntry(script=arg)
    return PythonEntry()


def site_dirs(argv0: str | None, exe: str | None, mapped: Iterable[str]) -> list[Path]:
    """Candidate site-packages directories of the server's interpreter.

    ``argv0`` comes first: a venv's ``bin/python`` is a symlink, and ``/proc/PID/exe`` shows
    only its target, which has lost the venv.
    """
    found: list[Path] = []
    for interp in (argv0, exe):
        if not interp or not os.path.isabs(interp):
            continue
        prefix = Path(interp).parent.parent
        for pattern in ("lib/python3*/site-packages", "lib/python3/dist-packages"):
            found.extend(sorted(prefix.glob(pattern)))
    for path in mapped:
        for marker in ("/site-packages/", "/dist-packages/"):
            if marker in path:
                found.append(Path(path.split(marker)[0] + marker.rstrip("/")))
    unique: list[Path] = []
    for p in found:
        if p not in unique and p.is_dir():
            unique.append(p)
    return unique[:16]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info(site: Path, top: str) -> Path | None:
    """The ``*.dist-info`` in ``site`` that provides the import package ``top``."""
    want = _normal(top)
    try:
        infos = sorted(site.glob("*.dist-info"))
    except OSError:
        return None
    for info in infos[:2000]:
        if _normal(info.name.split("-")[0]) == want:
            return info
    return None


def _dist_version(info: Path) -> str | None:
    parts = info.name[: -len(".dist-info")].split("-")
    return parts[1] if len(parts) > 1 else None


def _editable_dir(info: Path) -> str | None:
    try:
        text = (info / "direct_url.json").read_text(encoding="utf-8")[:65536]
    except OSError:
        return None
    if '"editable": true' not in text:
        return None
    match = re.search(r'"url"\s*:\s*"file://([^"]+)"', text)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class PythonPackage:
    """The package that provides a Python server, and the source directory it runs from."""

    name: str | None
    version: str | None
    source_dir: str | None
    """A directory that may be a source checkout (editable install, cwd, a script's folder)."""


def python_package(
    cmdline: Sequence[str],
    cwd: str | None,
    raw_env: Mapping[str, str],
    sites: Sequence[Path],
) -> PythonPackage | None:
    """The package and source directory of a Python server, ``None`` when it is not Python."""
    entry = python_entry(cmdline)
    if entry is None:
        return None
    top: str | None = None
    search: list[str] = []
    if entry.module:
        top = entry.module.split(".")[0]
        if cwd:
            search.append(cwd)  # ``python -m`` puts the working directory first on sys.path
    elif entry.script:
        script = Path(cwd or "/", entry.script) if cwd else Path(entry.script)
        try:
            head = script.read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            head = ""
        in_site = any(str(script).startswith(str(s) + os.sep) for s in sites)
        in_bin = script.parent.name == "bin"
        match = _CONSOLE_IMPORT.search(head) if in_bin else None
        if match:
            top = match.group(1)  # a console script such as ``bin/vllm``
        elif not in_site:
            return PythonPackage(None, None, str(script.parent))
    if top is None:
        return PythonPackage(None, None, None)
    search.extend(p for p in raw_env.get("PYTHONPATH", "").split(os.pathsep) if p)
    for directory in search:
        base = Path(cwd or "/", directory)
        if (base / top).is_dir() or (base / f"{top}.py").is_file():
            version = None
            for site in sites:
                info = _dist_info(site, top)
                if info is not None and _editable_dir(info) == str(base):
                    version = _dist_version(info)
            return PythonPackage(top, version, str(base))
    for site in sites:
        info = _dist_info(site, top)
        if info is not None:
            return PythonPackage(top, _dist_version(info), _editable_dir(info))
        if (site / top).is_dir():
            return PythonPackage(top, None, None)
    return PythonPackage(top, None, None)


# --- loaded libraries --------------------------------------------------------------------------

_LIBRARY_FILES = {
    "nccl": re.compile(r"^libnccl(?:-[0-9a-f]{8})?\.so(?:\.([\d.]+))?$"),
    "cudart": re.compile(r"^libcudart(?:-[0-9a-f]{8})?\.so(?:\.([\d.]+))?$"),
    "cudnn": re.compile(r"^libcudnn(?:-[0-9a-f]{8})?\.so(?:\.([\d.]+))?$"),
    "torch": re.compile(r"^libtorch(?:_cpu|_cuda|_python)?\.so()$"),
}
_DIST_HINTS = {
    "nccl": ("nccl",),
    "cudart": ("cuda_runtime", "cudart"),
    "cudnn": ("cudnn",),
    "torch": ("torch",),
}


def _owning_version(path: str, kind: str) -> str | None:
    """The version of the wheel that ships ``path`` (``nvidia_nccl_cu12-2.27.5``), if one does."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker not in path:
            continue
        site_text, rel = path.split(marker, 1)
        site = Path(site_text + marker.rstrip("/"))
        first = rel.split("/", 1)[0]
        try:
            infos = sorted(site.glob(f"{first}*.dist-info"))
        except OSError:
            return None
        for info in infos[:200]:
            name = _normal(info.name.split("-")[0])
            if not any(hint in name for hint in _DIST_HINTS[kind]):
                continue
            try:
                record = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
            except OSError:
                record = ""
            if not record or rel in record:
                return _dist_version(info)
    return None


def loaded_libraries(mapped: Iterable[str]) -> tuple[LoadedLibrary, ...]:
    """NCCL, CUDA runtime, cuDNN and torch among the mapped file paths, one per kind and path."""
    seen: set[str] = set()
    found: list[LoadedLibrary] = []
    for path in mapped:
        if path in seen:
            continue
        seen.add(path)
        name = path.rsplit("/", 1)[-1]
        for kind, pattern in _LIBRARY_FILES.items():
            match = pattern.match(name)
            if match is None:
                continue
            version = _owning_version(path, kind)
            from_name = match.group(1) or ""
            if version is None and from_name.count(".") >= 1:
                version = from_name
            found.append(LoadedLibrary(kind=kind, version=version, path=path))
    order = {"nccl": 0, "cudart": 1, "cudnn": 2, "torch": 3}
    return tuple(sorted(found, key=lambda lib: (order[lib.kind], lib.version is None, lib.path)))


__all__ = [
    "Deadline",
    "PythonEntry",
    "PythonPackage",
    "loaded_libraries",
    "python_entry",
    "python_package",
    "read_checkout",
    "run_git",
    "site_dirs",
]
