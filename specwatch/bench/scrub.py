"""A snapshot with the secret rule applied: what is written, what is read, and ``specwatch scrub``.

Snapshots are made to be shared. Every string goes through the one rule of
:mod:`specwatch.core.redaction` (URL passwords, secret-named keys and options, ``Bearer``), the
command lines through :func:`~specwatch.core.redaction.redact_argv`, and the server process's
identity through :func:`~specwatch.core.identity.scrub_identity` (only performance variables keep
their values). Applied again when a snapshot is read, so one written before this rule, or edited
by hand, shows nothing it should not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specwatch.core.identity import from_json as identity_from_json
from specwatch.core.identity import to_json as identity_to_json
from specwatch.core.redaction import redact_value


def scrub_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a snapshot's plain JSON values with every secret withheld (idempotent)."""
    out: dict[str, Any] = redact_value(snapshot)
    server = out.get("server")
    if isinstance(server, dict) and isinstance(server.get("process"), dict):
        server["process"] = identity_to_json(identity_from_json(server["process"]))
    return out


__all__ = ["scrub_snapshot"]
