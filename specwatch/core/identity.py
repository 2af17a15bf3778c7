"""What code a server process runs: commit, environment and the libraries that decide speed.

Pure data and logic; :mod:`specwatch.sources.identity.process` reads it from ``/proc``. The server's
environment and command line are hostile for secrets (:mod:`specwatch.core.redaction`): only
performance variables keep their values (:mod:`specwatch.core.server_env`), and the command line
loses the value of every secret-named option.
:func:`scrub_identity` applies the rule and runs wherever an identity enters: read from
``/proc``, from a snapshot or from a recording, so files written before the rule are shown safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from specwatch.core.redaction import WITHHELD, redact_argv, redact_text
from specwatch.core.server_env import env_allowed, env_value, filter_environment

LIBRARIES = ("nccl", "cudart", "cudnn", "torch")
"""The loaded libraries an identity names, in the order compare shows them."""
LIBRARY_LABELS = {"nccl": "NCCL", "cudart": "CUDA runtime", "cudnn": "cuDNN", "torch": "torch"}


@dataclass(frozen=True, slots=True)
class Checkout:
    """A git checkout the server's code comes from."""

    path: str
    commit: str | None = None
    """Full hash of HEAD; ``None`` when git could not tell."""
    dirty: bool | None = None
    """Uncommitted changes to tracked files (or untracked files); ``None`` when unknown."""
    changed_after_start: tuple[str, ...] = ()
    """What changed after the process started (HEAD moved, files edited): it runs older code."""

    @property
    def short(self) -> str | None:
        """The commit shortened to 10 characters."""
        return self.commit[:10] if self.commit else None


@dataclass(frozen=True, slots=True)
class LoadedLibrary:
    """A library the process (or one of its children) has mapped into memory."""

    kind: str
    """One of :data:`LIBRARIES`."""
    version: str | None
    path: str


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    """The code identity of a server process and its children; every field may be unknown."""

    pid: int | None = None
    executable: str | None = None
    cmdline: tuple[str, ...] = ()
    cwd: str | None = None
    started_at: float | None = None
    """Unix time the process started (accurate to about a second)."""
    pids: tuple[int, ...] = ()
    """The process and its descendants that were read."""
    environment: tuple[tuple[str, str], ...] = ()
    """Allow-listed environment at process start, ``(name, value)`` sorted by name."""
    package: str | None = None
    """The Python package that provides the server (``sglang``, ``vllm``)."""
    package_version: str | None = None
    checkout: Checkout | None = None
    build: str | None = None
    """A native server's build id as the server reports it (llama-server ``b6500-0c1e570``)."""
    libraries: tuple[LoadedLibrary, ...] = ()
    notes: tuple[str, ...] = ()
    """Why something is missing: remote server, process not visible, another user's process."""
    warnings: tuple[str, ...] = ()
    """Facts that make the identity misleading, e.g. the checkout changed after start."""

    def env(self) -> dict[str, str]:
        """The recorded environment as a dict."""
        return dict(self.environment)

    def library(self, kind: str) -> str | None:
        """The version of a loaded library kind (first one found), ``None`` when unknown."""
        for lib in self.libraries:
            if lib.kind == kind and lib.version:
                return lib.version
        return None

    @property
    def commit(self) -> str | None:
        """The checkout's commit, else the commit in a native build id."""
        if self.checkout is not None and self.checkout.commit:
            return self.checkout.commit
        return build_commit(self.build)

    @property
    def short_commit(self) -> str | None:
        """The commit shortened for a status line."""
        commit = self.commit
        return commit[:10] if commit else None


_BUILD = re.compile(r"(?:^|[^0-9A-Za-z])(?:b\d+-)?([0-9a-f]{7,40})(?![0-9A-Za-z])")


def build_commit(build: str | None) -> str | None:
    """The git commit in a native build id (``"b6500-0c1e570"`` -> ``"0c1e570"``), if any."""
    if not build:
        return None
    match = _BUILD.search(build.strip())
    return match.group(1) if match else None


def with_build_info(identity: ServerIdentity, build_info: str | None) -> ServerIdentity:
    """Add the build id a native server reports about itself (llama-server ``/props``).

    The server's binary is never executed to learn this; the string comes from the server.
    """
    text = (build_info or "").strip()
    if not text:
        return identity
    return replace(identity, build=text[:200])


# --- JSON --------------------------------------------------------------------------------------


def to_json(identity: ServerIdentity) -> dict[str, Any]:
    """A JSON-able dict of an identity (read back by :func:`from_json`)."""
    checkout = identity.checkout
    return {
        "pid": identity.pid,
        "executable": identity.executable,
        "cmdline": list(identity.cmdline),
        "cwd": identity.cwd,
        "started_at": identity.started_at,
        "pids": list(identity.pids),
        "environment": dict(identity.environment),
        "package": identity.package,
        "package_version": identity.package_version,
        "checkout": None
        if checkout is None
        else {
            "path": checkout.path,
            "commit": checkout.commit,
            "dirty": checkout.dirty,
            "changed_after_start": list(checkout.changed_after_start),
        },
        "build": identity.build,
        "libraries": [
            {"kind": lib.kind, "version": lib.version, "path": lib.path}
            for lib in identity.libraries
        ],
        "notes": list(identity.notes),
        "warnings": list(identity.warnings),
    }


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _strs(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def from_json(data: object) -> ServerIdentity:
    """Read an identity written by :func:`to_json`; missing or ill-typed keys become unknown.

    The result goes through :func:`scrub_identity`, so a snapshot written before the secret
    rule, or edited by hand, cannot carry a secret into compare's or replay's output.
    """
    if not isinstance(data, dict):
        return ServerIdentity()
    env_raw = data.get("environment")
    env = (
        {k: v for k, v in env_raw.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(env_raw, dict)
        else {}
    )
    checkout: Checkout | None = None
    raw_checkout = data.get("checkout")
    if isinstance(raw_checkout, dict) and isinstance(raw_checkout.get("path"), str):
        dirty = raw_checkout.get("dirty")
        checkout = Checkout(
            path=raw_checkout["path"],
            commit=_str(raw_checkout.get("commit")),
            dirty=dirty if isinstance(dirty, bool) else None,
            changed_after_start=_strs(raw_checkout.get("changed_after_start")),
        )
    libraries: list[LoadedLibrary] = []
    raw_libs = data.get("libraries")
    for lib in raw_libs if isinstance(raw_libs, list) else []:
        if isinstance(lib, dict) and lib.get("kind") in LIBRARIES:
            libraries.append(
                LoadedLibrary(
                    kind=lib["kind"],
                    version=_str(lib.get("version")),
                    path=_str(lib.get("path")) or "",
                )
            )
    pids = data.get("pids")
    identity = ServerIdentity(
        pid=_int(data.get("pid")),
        executable=_str(data.get("executable")),
        cmdline=_strs(data.get("cmdline")),
        cwd=_str(data.get("cwd")),
        started_at=_num(data.get("started_at")),
        pids=tuple(p for p in pids if _int(p) is not None) if isinstance(pids, list) else (),
        environment=tuple(sorted(env.items())),
        package=_str(data.get("package")),
        package_version=_str(data.get("package_version")),
        checkout=checkout,
        build=_str(data.get("build")),
        libraries=tuple(libraries),
        notes=_strs(data.get("notes")),
        warnings=_strs(data.get("warnings")),
    )
    return scrub_identity(identity)


_ENV_NOTE = re.compile(r"^process (\d+) sets ([A-Za-z_][A-Za-z0-9_]*)=")


def _scrub_note(note: str) -> str:
    match = _ENV_NOTE.match(note)
    if match and (not env_allowed(match.group(2)) or env_value(match.group(2), "") == WITHHELD):
        return f"process {match.group(1)} sets {match.group(2)} to another value (withheld)"
    return redact_text(note)


def scrub_identity(identity: ServerIdentity) -> ServerIdentity:
    """The identity with the secret rule applied (idempotent).

    Environment through :func:`filter_environment`, command line through
    :func:`~specwatch.core.redaction.redact_argv`, notes, warnings and the build id through
    :func:`~specwatch.core.redaction.redact_text`.
    """
    return replace(
        identity,
        cmdline=redact_argv(identity.cmdline),
        environment=filter_environment(dict(identity.environment)),
        build=None if identity.build is None else redact_text(identity.build),
        notes=tuple(_scrub_note(n) for n in identity.notes),
        warnings=tuple(redact_text(w) for w in identity.warnings),
    )


# --- comparison --------------------------------------------------------------------------------

UNSET = "(unset)"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class IdentityDifference:
    """One thing that differs between two identities, as compare shows it side by side."""

    label: str
    before: str
    after: str

    def line(self) -> str:
        """``"NCCL_PROTO: LL -> Simple"``."""
        return f"{self.label}: {self.before} -> {self.after}"


@dataclass(frozen=True, slots=True)
class IdentityComparison:
    """What differs between two identities, and whether code and libraries are the same."""

    differences: tuple[IdentityDifference, ...]
    same_code_and_libraries: bool
    """True only when both sides name their code (commit, version or build) and nothing differs."""
    caveats: tuple[str, ...] = ()
    """Why sameness cannot be claimed although nothing listed differs."""

    def lines(self) -> list[str]:
        """The lines compare shows: each difference, then each caveat."""
        return [d.line() for d in self.differences] + list(self.caveats)


def _dirty_text(checkout: Checkout | None) -> str:
    if checkout is None or checkout.dirty is None:
        return UNKNOWN
    return "yes" if checkout.dirty else "no"


def _code_known(identity: ServerIdentity) -> bool:
    return bool(identity.commit or identity.package_version or identity.build)


def identity_differences(a: ServerIdentity, b: ServerIdentity) -> IdentityComparison:
    """Compare the code identity of two server processes (``a`` before, ``b`` after).

    Compared: package and version, commit, uncommitted changes, native build, the versions of
    NCCL, the CUDA runtime, cuDNN and torch, and each allow-listed environment variable.
    """
    diffs: list[IdentityDifference] = []
    caveats: list[str] = []

    def add(label: str, x: str | None, y: str | None, missing: str = UNKNOWN) -> None:
        if x != y:
            diffs.append(IdentityDifference(label, x or missing, y or missing))

    add("package", a.package, b.package)
    add("version", a.package_version, b.package_version)
    add("commit", a.commit, b.commit)
    if a.checkout is not None or b.checkout is not None:
        add("uncommitted changes", _dirty_text(a.checkout), _dirty_text(b.checkout))
    add("build", a.build, b.build)
    for kind in LIBRARIES:
        add(LIBRARY_LABELS[kind], a.library(kind), b.library(kind))
    env_a, env_b = a.env(), b.env()
    for name in sorted(set(env_a) | set(env_b)):
        add(name, env_a.get(name), env_b.get(name), missing=UNSET)

    if not (_code_known(a) and _code_known(b)):
        caveats.append("code identity unknown on at least one side")
    for side, identity in (("before", a), ("after", b)):
        if identity.checkout is not None and identity.checkout.dirty:
            caveats.append(f"{side}: the checkout has uncommitted changes")
        caveats.extend(f"{side}: {w}" for w in identity.warnings)
    same = not diffs and not caveats
    return IdentityComparison(tuple(diffs), same, tuple(caveats))


__all__ = [
    "LIBRARIES",
    "Checkout",
    "IdentityComparison",
    "IdentityDifference",
    "LoadedLibrary",
    "ServerIdentity",
    "build_commit",
    "from_json",
    "identity_differences",
    "scrub_identity",
    "to_json",
    "with_build_info",
]
