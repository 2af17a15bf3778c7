"""Build a benchmark snapshot from what the runner returned: the typed
:class:`~specwatch.core.snapshot_records.Snapshot`, written as plain JSON values.

No API key ever lands in a snapshot: the command line is stripped of ``--api-key``, secret-looking
launch arguments are masked and every string is scrubbed of the key's value. The server
process's environment was already allow-listed when it was read
(:mod:`specwatch.core.identity`). Writing and reading snapshots is :mod:`specwatch.bench.snapshot`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specwatch import __version__
from specwatch.bench.scrub import scrub_snapshot
from specwatch.core import identity as identity_json
from specwatch.core.gpu import GpuInventory
from specwatch.core.identity import ServerIdentity
from specwatch.core.identity import to_json as identity_to_json
from specwatch.core.redaction import WITHHELD
from specwatch.core.server import ServerInfo
from specwatch.core.snapshot_records import (
    BenchResult,
    Snapshot,
    SnapshotEnvironment,
    SnapshotServer,
    TimeSeries,
    Tool,
    with_load,
)
from specwatch.core.values import to_jsonable

SCHEMA_VERSION = 4
"""The version new snapshots are written with (see ``snapshot.schema.json``)."""
REDACTED = WITHHELD
_SECRET_FLAGS = ("--api-key",)
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|secret|password|passwd|token|auth|authorization)$", re.I
)
"""Mapping keys whose values are masked (``api_key``, ``hf_token``; not ``max_tokens``)."""


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    """The plain JSON values of a snapshot file (the process identity in its own format)."""
    out: dict[str, Any] = to_jsonable(snap)
    process = snap.server.process
    out["server"]["process"] = None if process is None else identity_json.to_json(process)
    return out


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line without any ``--api-key`` flag or its value."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _SECRET_FLAGS:
            skip = True
            continue
        if any(arg.startswith(flag + "=") for flag in _SECRET_FLAGS):
            continue
        out.append(arg)
    return out


def scrub(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``obj`` with every occurrence of the ``secrets`` values replaced."""
    values = [s for s in secrets if s]

    def walk(o: Any) -> Any:
        if isinstance(o, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v) for v in o]
        if isinstance(o, str):
            for s in values:
                o = o.replace(s, REDACTED)
        return o

    return walk(obj)


def mask_secret_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Server launch arguments with secret-looking ones (``api_key``, ``hf_token``) masked.

    The client already removes them; this is the second lock on the door, since a snapshot is
    a file people attach to bug reports.
    """
    out: dict[str, Any] = {}
    for k, v in args.items():
        if isinstance(v, Mapping):
            out[k] = mask_secret_args(v)
        elif _SECRET_KEY.search(str(k)) and v not in (None, False, "", 0):
            out[k] = REDACTED
        else:
            out[k] = v
    return out


NOT_COLLECTED = "not collected"


def process_record(identity: ServerIdentity | None) -> tuple[dict[str, Any] | None, str | None]:
    """``server.process`` and ``server.process_note``: the identity, or ``None`` and why not."""
    if identity is None:
        return None, NOT_COLLECTED
    if identity.pid is None:
        return None, "; ".join(identity.notes) or "the server process was not found"
    return identity_to_json(identity), None


def _environment(inv: GpuInventory | None) -> SnapshotEnvironment:
    if inv is None:
        return SnapshotEnvironment(available=False, reason="no GPU sampler", gpus=())
    s = inv.system
    return SnapshotEnvironment(
        available=inv.available,
        reason=inv.reason,
        driver_version=s.driver_version,
        nvml_version=s.nvml_version,
        cuda_driver_version=s.cuda_driver_version,
        gpus=inv.gpus,
    )


def _server(s: ServerInfo, identity: ServerIdentity | None) -> SnapshotServer:
    _, note = process_record(identity)
    return SnapshotServer(
        base_url=re.sub(r"//[^/@]*@", "//", s.base_url),
        dialect=s.dialect.value,
        version=s.version,
        model=s.model,
        speculative=s.spec,
        metrics_enabled=s.metrics_enabled,
        metrics_reason=s.metrics_reason,
        max_model_len=s.max_model_len,
        launch_args=(
            mask_secret_args(to_jsonable(s.launch_args)) if s.launch_args is not None else None
        ),
        notes=to_jsonable(s.notes),
        process=identity if note is None else None,
        process_note=note,
    )


def build_snapshot(
    result: BenchResult,
    argv: Sequence[str] | None = None,
    *,
    secrets: Iterable[str] = (),
    host: str | None = None,
    now: dt.datetime | None = None,
    identity: ServerIdentity | None = None,
) -> dict[str, Any]:
    """The snapshot of a benchmark, as plain JSON values.

    Args:
        result: What the runner returned.
        argv: The command line (``--api-key`` and its value are removed).
        secrets: Values that must not appear anywhere (the API key); replaced by ``<redacted>``.
        host: Host name (default: this machine's).
        now: Creation time (default: now, UTC).
        identity: The server process's code identity (``sources.identity.process``); ``None``
            when it was not looked for. One without a process id is recorded as ``null`` with
            its notes (remote server, process not visible).
    """
    when = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    runs, overall = with_load(result.runs, dataclasses.replace(result.overall, gpus=result.gpus))
    snap = Snapshot(
        schema_version=SCHEMA_VERSION,
        tool=Tool("specwatch", __version__),
        created=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        created_unix=when.timestamp(),
        started_unix=result.started_at,
        duration_s=result.duration_s,
        host=host if host is not None else socket.gethostname(),
        command=tuple(redact_argv(argv or [])),
        label=result.config.label,
        interrupted=result.interrupted,
        error=result.error,
        complete=result.ok,
        config={**to_jsonable(result.config), "prompts_source": result.prompts_source},
        server=_server(result.server, identity),
        gpu_environment=_environment(result.inventory),
        warmups=result.warmups,
        runs=runs,
        overall=overall,
        timeseries=TimeSeries(result.config.series_interval_s, result.series),
        steady=result.steady,
        host_cpu=result.host_cpu,
    )
    cleaned: dict[str, Any] = scrub_snapshot(scrub(snapshot_to_json(snap), secrets))
    return cleaned


__all__ = [
    "NOT_COLLECTED",
    "REDACTED",
    "SCHEMA_VERSION",
    "build_snapshot",
    "mask_secret_args",
    "process_record",
    "redact_argv",
    "scrub",
]
