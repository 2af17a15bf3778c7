"""Build a benchmark snapshot from what the runner returned: the typed
:class:`~specwatch.core.snapshot_records.Snapshot`, written as plain JSON values.

No API key ever lands in a snapshot: every string is scrubbed of the key's value and the whole
snapshot goes through the one secret rule (:mod:`specwatch.core.redaction`: URL passwords,
secret-named keys and options, ``Bearer``), the server process's identity through
:func:`~specwatch.core.identity.scrub_identity` (only performance variables keep their values).
:func:`scrub_snapshot` applies both, here and again when a snapshot is read (``specwatch scrub``
too), so one written before this rule, or edited by hand, shows nothing it should not. Writing
and reading snapshots is :mod:`specwatch.bench.snapshot`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specwatch import __version__
from specwatch.core.gpu import GpuInventory
from specwatch.core.identity import ServerIdentity
from specwatch.core.identity import from_json as identity_from_json
from specwatch.core.identity import to_json as identity_to_json
from specwatch.core.redaction import redact_value, withhold
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

SCHEMA_VERSION = 5
"""The version new snapshots are written with (see ``snapshot.schema.json``)."""


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    """The plain JSON values of a snapshot file (the process identity in its own format)."""
    out: dict[str, Any] = to_jsonable(snap)
    out["server"] = snap.server.to_json()
    return out


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
        argv: The command line (secret options' values withheld, ``--api-key`` among them).
        secrets: Values that must not appear anywhere (the API key); withheld wherever they
            appear.
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
        command=tuple(argv or ()),
        label=result.config.label,
        interrupted=result.interrupted,
        error=result.error,
        complete=result.ok,
        config={**to_jsonable(result.config), "prompts_source": result.prompts_source},
        server=SnapshotServer.of(result.server, identity),
        gpu_environment=_environment(result.inventory),
        warmups=result.warmups,
        runs=runs,
        overall=overall,
        timeseries=TimeSeries(result.config.series_interval_s, result.series),
        steady=result.steady,
        host_cpu=result.host_cpu,
    )
    cleaned: dict[str, Any] = scrub_snapshot(withhold(snapshot_to_json(snap), secrets))
    return cleaned


def scrub_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a snapshot's plain JSON values with every secret withheld (idempotent)."""
    out: dict[str, Any] = redact_value(snapshot)
    server = out.get("server")
    if isinstance(server, dict) and isinstance(server.get("process"), dict):
        server["process"] = identity_to_json(identity_from_json(server["process"]))
    return out


__all__ = ["SCHEMA_VERSION", "build_snapshot", "scrub_snapshot", "snapshot_to_json"]
