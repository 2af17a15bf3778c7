"""The code identity of a watched server, collected off the UI thread (issue 14).

One function for the live session, the TUI's benchmark and ``specwatch bench`` alike: the
process behind the URL (when it runs on this machine) plus a native server's own build id.
"""

from __future__ import annotations

from specwatch.core.identity import ServerIdentity, with_build_info
from specwatch.core.server import Dialect, ServerInfo


def identify(base_url: str, info: ServerInfo | None) -> ServerIdentity:
    """The identity of the server at ``base_url``; blocks up to a few seconds (``/proc``, git).

    A llama-server's build id (its commit) comes from what the server reported about itself
    (``info.version``, read from ``/props``), never from running its binary.
    """
    from specwatch.sources.process import identify_server

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


__all__ = ["commit_label", "identify", "with_server_build"]
