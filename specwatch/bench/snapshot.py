"""Benchmark snapshots: one JSON file per benchmark, documented by ``snapshot.schema.json``.

Written atomically (a temporary file, fsync, then a hard link to the final name, which fails
rather than overwrite) into ``./specwatch-snapshots/``; read back only after a size check and
schema validation, so ``compare`` never works on half a file or on something else entirely.
Reading is bounded in size and in time: a FIFO nobody writes to, or a pipe that stalls, ends in
one clear line instead of a hang (``<(ssh box cat a.json)`` still works). A validated snapshot
becomes a typed :class:`~specwatch.core.snapshot_records.Snapshot` (:func:`load_snapshot`).

Schema versions: 1, then 2 (a GPU summary's ``sm_clock_max_mhz``, the board's maximum, renamed
``board_max_sm_clock_mhz``). Every change to what a snapshot holds bumps ``SCHEMA_VERSION``;
older versions keep being read.
No API key ever lands in a snapshot: the command line is stripped of ``--api-key`` and every
string is scrubbed of the key's value before writing.
"""

from __future__ import annotations

import contextlib
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
from typing import TYPE_CHECKING, Any

import orjson

from specwatch import __version__
from specwatch.bench.bounded_read import BoundedReadError, read_bounded
from specwatch.core.snapshot_records import Snapshot
from specwatch.core.values import to_jsonable

if TYPE_CHECKING:
    from specwatch.bench.runner import BenchResult

SCHEMA_VERSION = 2
MAX_SNAPSHOT_BYTES = 32 * 1024 * 1024
READ_TIMEOUT_S = 30.0
"""Longest wait for a snapshot that arrives through a pipe or FIFO (e.g. over ssh)."""
DEFAULT_DIR = Path("specwatch-snapshots")
REDACTED = "<redacted>"
_SECRET_FLAGS = ("--api-key",)
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|secret|password|passwd|token|auth|authorization)$", re.I
)
"""Mapping keys whose values are masked (``api_key``, ``hf_token``; not ``max_tokens``)."""


class SnapshotError(Exception):
    """A snapshot could not be read or written; ``str(e)`` is one clear line."""


# --- building -------------------------------------------------------------------------------


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


def _gpu_environment(result: BenchResult) -> dict[str, Any]:
    inv = result.inventory
    if inv is None:
        return {"available": False, "reason": "no GPU sampler", "gpus": []}
    return {
        "available": inv.available,
        "reason": inv.reason,
        "driver_version": inv.system.driver_version,
        "nvml_version": inv.system.nvml_version,
        "cuda_driver_version": inv.system.cuda_driver_version,
        "gpus": to_jsonable(inv.gpus),
    }


def _server(result: BenchResult) -> dict[str, Any]:
    s = result.server
    return {
        "base_url": re.sub(r"//[^/@]*@", "//", s.base_url),
        "dialect": s.dialect.value,
        "version": s.version,
        "model": s.model,
        "speculative": to_jsonable(s.spec),
        "metrics_enabled": s.metrics_enabled,
        "metrics_reason": s.metrics_reason,
        "max_model_len": s.max_model_len,
        "launch_args": (
            mask_secret_args(to_jsonable(s.launch_args)) if s.launch_args is not None else None
        ),
        "notes": to_jsonable(s.notes),
    }


def build_snapshot(
    result: BenchResult,
    argv: Sequence[str] | None = None,
    *,
    secrets: Iterable[str] = (),
    host: str | None = None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """The snapshot of a benchmark, as plain JSON values.

    Args:
        result: What the runner returned.
        argv: The command line (``--api-key`` and its value are removed).
        secrets: Values that must not appear anywhere (the API key); replaced by ``<redacted>``.
        host: Host name (default: this machine's).
        now: Creation time (default: now, UTC).
    """
    when = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    overall = to_jsonable(result.overall)
    overall["gpus"] = to_jsonable(result.gpus)
    snap = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "specwatch", "version": __version__},
        "created": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "created_unix": when.timestamp(),
        "started_unix": result.started_at,
        "duration_s": result.duration_s,
        "host": host if host is not None else socket.gethostname(),
        "command": redact_argv(argv or []),
        "label": result.config.label,
        "interrupted": result.interrupted,
        "error": result.error,
        "complete": result.ok,
        "config": {
            **to_jsonable(result.config),
            "prompts_source": result.prompts_source,
        },
        "server": _server(result),
        "gpu_environment": _gpu_environment(result),
        "warmups": to_jsonable(result.warmups),
        "runs": to_jsonable(result.runs),
        "overall": overall,
        "timeseries": {
            "interval_s": result.config.series_interval_s,
            "points": to_jsonable(result.series),
        },
    }
    cleaned: dict[str, Any] = scrub(snap, secrets)
    return cleaned


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


def _os_reason(e: OSError) -> str:
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
        raise SnapshotError(f"cannot write snapshot to {directory}: {_os_reason(e)}") from e
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
        message = " ".join(error.message.split())
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
        raise SnapshotError(f"cannot read snapshot {p}: {_os_reason(e)}") from e
    try:
        loaded = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        detail = " ".join(str(e).split())
        if not data:
            detail = "the file is empty"
        raise SnapshotError(f"{p}: not valid JSON ({detail})") from e
    return validate(loaded, str(p))


def load_snapshot(
    path: Path | str, max_bytes: int = MAX_SNAPSHOT_BYTES, timeout_s: float | None = None
) -> Snapshot:
    """Read, validate and type a snapshot (see :func:`read_snapshot` for the arguments).

    Raises:
        SnapshotError: As :func:`read_snapshot`.
    """
    return Snapshot.from_dict(read_snapshot(path, max_bytes, timeout_s))


__all__ = [
    "DEFAULT_DIR",
    "MAX_SNAPSHOT_BYTES",
    "READ_TIMEOUT_S",
    "SCHEMA_VERSION",
    "Snapshot",
    "SnapshotError",
    "build_snapshot",
    "dumps",
    "load_snapshot",
    "mask_secret_args",
    "read_snapshot",
    "redact_argv",
    "schema",
    "scrub",
    "snapshot_name",
    "to_jsonable",
    "validate",
    "write_snapshot",
]
