"""The code identity of a watched server, collected off the UI thread (issue 14).

One function for the live session, the TUI's benchmark and ``probe`` alike: the
process behind the URL (when it runs on this machine) plus a native server's own build id.
"""

from __future__ import annotations

from specwatch.core.identity import ServerIdentity, with_build_info
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import Dialect, ServerInfo


def identify(base_url: str, info: ServerInfo | None) -> ServerIdentity:
    """The identity of the server at ``base_url``; blocks up to a few seconds (``/proc``, git).

    A llama-server's build id (its commit) comes from what the server reported about itself
    (``info.version``, read from ``/props``), never from running its binary.
    """
    from specwatch.sources.identity.process import identify_server

    identity = identify_server(base_url)
    return with_server_build(identity, info)


def with_server_build(identity: ServerIdentity, info: ServerInfo | None) -> ServerIdentity:
    """Add a native server's build id to the identity of its local process."""
    if identity.pid is None or info is None or info.dialect is not Dialect.LLAMACPP:
        return identity
    return with_build_info(identity, info.version)


def commit_label(identity: ServerIdentity | None) -> str | None:
    """``"0c1e570"``, or ``"0c1e570*"`` when the checkout has uncommitted changes; else ``None``."""
    if identity is None or identity.commit is None:
        return None
    dirty = identity.checkout is not None and identity.checkout.dirty is True
    return identity.commit[:7] + ("*" if dirty else "")


def code_parts(identity: ServerIdentity) -> list[str]:
    """What names the code a found process runs: package, commit or build, NCCL, torch."""
    parts: list[str] = []
    if identity.package:
        parts.append(f"{identity.package} {identity.package_version or ''}".strip())
    if identity.short_commit:
        dirty = identity.checkout is not None and identity.checkout.dirty is True
        parts.append(
            f"commit {identity.short_commit}" + (" (uncommitted changes)" if dirty else "")
        )
    elif identity.build:
        parts.append(f"build {identity.build}")
    for kind, label in (("nccl", "NCCL"), ("torch", "torch")):
        version = identity.library(kind)
        if version:
            parts.append(f"{label} {version}")
    return parts


def code_summary(identity: ServerIdentity | None) -> str:
    """One line naming the code a server runs (package, commit, NCCL, torch), or why not."""
    if identity is None:
        return "not read"
    if identity.pid is None:
        return sanitize_line("not read (" + ("; ".join(identity.notes) or "no process") + ")")
    text = f"{' · '.join(code_parts(identity)) or 'unknown'} (process {identity.pid})"
    text += "".join(f"; warning: {w}" for w in identity.warnings)
    return sanitize_line(text)


__all__ = [
    "code_parts",
    "code_summary",
    "commit_label",
    "identify",
    "with_server_build",
]
