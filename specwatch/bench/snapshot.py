"""Benchmark snapshots: one JSON file per benchmark, documented by ``snapshot.schema.json``.

Written atomically (a temporary file, fsync, then a hard link to the final name, which fails
rather than overwrite) into ``./specwatch-snapshots/``; read back only after a size check and
schema validation, so ``compare`` never works on half a file or on something else entirely.
Reading is bounded in size and in time: a FIFO nobody writes to, or a pipe that stalls, ends in
one clear line instead of a hang (``<(ssh box cat a.json)`` still works). A validated snapshot
becomes the typed :class:`~specwatch.core.snapshot_records.Snapshot` it was written from
(:func:`load_snapshot`).

Schema versions: 1, then 2 (a GPU summary's ``sm_clock_max_mhz``, the board's maximum, renamed
``board_max_sm_clock_mhz``), then 3 (``server.process``: the server process's code identity, or
``null`` and ``server.process_note``; ``runs[].load`` and the overall ``running_requests`` and
``prompt_tok_s``, from the server's counters around each run), then 4 (``host_cpu`` and
``runs[].host_cpu``: this host's CPU during the runs, ``specwatch.core.host``), then 5
(``config.slo_ttft_s`` and ``slo_tpot_s``, goodput's objectives, and ``runs[].stream_ttft_s`` /
``stream_tpot_s``, each request's figures, so goodput is counted per request). Every change to
what a snapshot holds bumps ``SCHEMA_VERSION``; older versions keep being read.

A snapshot is built from what the runner returned (:func:`build_snapshot`: the typed
:class:`~specwatch.core.snapshot_records.Snapshot`, written as plain JSON values). No API key
ever lands in one: every string is scrubbed of the key's value and the whole snapshot goes
through the one secret rule (:mod:`specwatch.core.redaction`: URL passwords, secret-named keys
and options, ``Bearer``), the server process's identity through
:func:`~specwatch.core.identity.scrub_identity` (only performance variables keep their values).
:func:`scrub_snapshot` applies both, on writing and again when a snapshot is read (``specwatch
scrub`` too), so one written before this rule, or edited by hand, shows nothing it should not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import functools
import importlib.resources
import os
import re
import socket
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from specwatch import __version__
from specwatch.bench.bounded_read import BoundedReadError, read_bounded
from specwatch.core.gpu import GpuInventory
from specwatch.core.identity import ServerIdentity
from specwatch.core.identity import from_json as identity_from_json
from specwatch.core.identity import to_json as identity_to_json
from specwatch.core.redaction import redact_text, redact_value, withhold
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
MAX_SNAPSHOT_BYTES = 32 * 1024 * 1024
READ_TIMEOUT_S = 30.0
"""Longest wait for a snapshot that arrives through a pipe or FIFO (e.g. over ssh)."""
DEFAULT_DIR = Path("specwatch-snapshots")


class SnapshotError(Exception):
    """A snapshot could not be read or written; ``str(e)`` is one clear line."""


def dumps(snapshot: Mapping[str, Any]) -> bytes:
    """Serialize a snapshot (indented, keys in a stable order, newline at the end)."""
    return orjson.dumps(
        snapshot, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
    )


# --- writing --------------------------------------------------------------------------------


def snapshot_name(created: str, label: str | None) -> str:
    """``specwatch-20261129T194500Z-LABEL.json`` (the label reduced to safe characters)."""
    stamp = created.replace("-", "").replace(":", "")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label or "").strip("-.")[:60]
    return f"specwatch-{stamp}{'-' + slug if slug else ''}.json"


def os_reason(e: OSError) -> str:
    """Why an operation on a file failed, in a few words."""
    if e.errno == errno.ENOSPC:
        return "no space left on device"
    if e.errno == errno.EROFS:
        return "read-only file system"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return e.strerror or str(e)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a directory; the file itself was synced
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def check_writable(out_dir: Path | str = DEFAULT_DIR) -> None:
    """Check that a snapshot could be written into ``out_dir`` now, creating nothing that
    stays: a file is made and removed in it, or in its nearest existing parent.

    Raises:
        SnapshotError: It, or the parent it would be made in, is no directory or cannot be
            written (read-only, no permission, full).
    """
    directory = Path(out_dir)
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise SnapshotError(f"cannot write snapshot to {directory}: {existing} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".specwatch-", suffix=".tmp", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise SnapshotError(f"cannot write snapshot to {directory}: {os_reason(e)}") from e


def write_snapshot(snapshot: Mapping[str, Any], out_dir: Path | str = DEFAULT_DIR) -> Path:
    """Write atomically into ``out_dir`` under a new name; never overwrite an existing file.

    Returns:
        The path written.

    Raises:
        SnapshotError: The directory cannot be created or written (read-only, full, ...).
    """
    directory = Path(out_dir)
    data = dumps(snapshot)
    base = snapshot_name(str(snapshot.get("created", "")), snapshot.get("label"))
    tmp: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".specwatch-", suffix=".tmp", dir=directory)
        # mkstemp makes 0600; a snapshot is meant to be shared with whoever compares it.
        os.fchmod(fd, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        stem = base[: -len(".json")]
        for n in range(1, 1000):
            final = directory / (base if n == 1 else f"{stem}-{n}.json")
            try:
                # link() fails when the name exists: a complete file appears, or nothing does.
                os.link(tmp, final)
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                # No hard links here: reserve the name exclusively, then replace it atomically.
                try:
                    os.close(os.open(final, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                except FileExistsError:
                    continue
                os.replace(tmp, final)
                tmp = None
            _fsync_dir(directory)
            return final
        raise SnapshotError(f"cannot write snapshot to {directory}: too many files named {base}")
    except OSError as e:
        raise SnapshotError(f"cannot write snapshot to {directory}: {os_reason(e)}") from e
    finally:
        if tmp is not None:
            # Nothing more can be done about a temp file on a failing disk.
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# --- reading --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema of snapshots, shipped in the package."""
    text = (
        importlib.resources.files("specwatch.bench").joinpath("snapshot.schema.json").read_bytes()
    )
    loaded: dict[str, Any] = orjson.loads(text)
    return loaded


def validate(snapshot: Any, source: str = "snapshot") -> dict[str, Any]:
    """Check ``snapshot`` against the schema.

    Raises:
        SnapshotError: It is not a specwatch snapshot, or one from a newer specwatch.
    """
    import jsonschema

    if not isinstance(snapshot, dict):
        raise SnapshotError(f"{source}: not a specwatch snapshot (the top level is not an object)")
    version = snapshot.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise SnapshotError(
            f"{source}: snapshot schema version {version} is newer than this specwatch "
            f"understands ({SCHEMA_VERSION}); upgrade specwatch"
        )
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(snapshot))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "top level"
        # The message quotes the value; a container or a string in a snapshot may hold a secret.
        quoted = repr(error.instance)
        shown = "the value" if isinstance(error.instance, dict | list | str) else quoted
        message = redact_text(" ".join(error.message.replace(quoted, shown).split()))
        if len(message) > 160:
            message = message[:157] + "..."
        raise SnapshotError(f"{source}: not a valid specwatch snapshot: {message} (at {where})")
    return snapshot


def read_snapshot(
    path: Path | str, max_bytes: int = MAX_SNAPSHOT_BYTES, timeout_s: float | None = None
) -> dict[str, Any]:
    """Read and validate a snapshot, as the plain JSON values it holds.

    Args:
        path: A file, or a pipe or FIFO (process substitution gives ``/dev/fd/N``).
        max_bytes: Refuse anything larger.
        timeout_s: Longest wait for a pipe or FIFO to deliver the whole snapshot
            (default :data:`READ_TIMEOUT_S`).

    Raises:
        SnapshotError: Missing, unreadable, larger than ``max_bytes``, slower than
            ``timeout_s``, not JSON or not valid.
    """
    p = Path(path)
    try:
        data = read_bounded(
            p, max_bytes, READ_TIMEOUT_S if timeout_s is None else timeout_s, "a snapshot"
        )
    except BoundedReadError as e:
        where = f"{p}" if e.too_large else f"cannot read snapshot {p}"
        raise SnapshotError(f"{where}: {e}") from None
    except OSError as e:
        raise SnapshotError(f"cannot read snapshot {p}: {os_reason(e)}") from e
    return scrub_snapshot(parse_snapshot(data, str(p)))


def parse_snapshot(data: bytes, source: str) -> dict[str, Any]:
    """The validated plain JSON values of a snapshot's bytes, as they are (not scrubbed).

    Raises:
        SnapshotError: Not JSON, or not a valid snapshot.
    """
    try:
        loaded = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        detail = " ".join(str(e).split())
        if not data:
            detail = "the file is empty"
        raise SnapshotError(f"{source}: not valid JSON ({detail})") from e
    return validate(loaded, source)


def load_snapshot(
    path: Path | str, max_bytes: int = MAX_SNAPSHOT_BYTES, timeout_s: float | None = None
) -> Snapshot:
    """Read, validate and type a snapshot (see :func:`read_snapshot` for the arguments).

    Raises:
        SnapshotError: As :func:`read_snapshot`.
    """
    raw = read_snapshot(path, max_bytes, timeout_s)
    try:
        return Snapshot.from_dict(raw)
    except (TypeError, ValueError) as e:
        message = " ".join(str(e).split())[:160]
        raise SnapshotError(f"{path}: not a valid specwatch snapshot: {message}") from None


# --- building a snapshot from a benchmark's result, scrubbed of every secret ------------------


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


__all__ = [
    "DEFAULT_DIR",
    "MAX_SNAPSHOT_BYTES",
    "READ_TIMEOUT_S",
    "SCHEMA_VERSION",
    "SnapshotError",
    "build_snapshot",
    "dumps",
    "load_snapshot",
    "os_reason",
    "parse_snapshot",
    "read_snapshot",
    "schema",
    "scrub_snapshot",
    "snapshot_name",
    "snapshot_to_json",
    "validate",
    "write_snapshot",
]
