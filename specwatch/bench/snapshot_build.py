"""Build a benchmark snapshot (plain JSON values) from what the runner returned.

No API key ever lands in a snapshot: the command line is stripped of ``--api-key``, secret-looking
launch arguments are masked and every string is scrubbed of the key's value. The server
process's environment was already allow-listed when it was read
(:mod:`specwatch.core.identity`). Writing and reading snapshots is :mod:`specwatch.bench.snapshot`.
"""

from __future__ import annotations

import datetime as dt
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from specwatch import __version__
from specwatch.core.identity import ServerIdentity
from specwatch.core.identity import to_json as identity_to_json
from specwatch.core.load import load_from_counters
from specwatch.core.stats import summarize
from specwatch.core.values import to_jsonable

if TYPE_CHECKING:
    from specwatch.bench.runner import BenchResult

SCHEMA_VERSION = 3
"""The version new snapshots are written with (see ``snapshot.schema.json``)."""
REDACTED = "<redacted>"
_SECRET_FLAGS = ("--api-key",)
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|secret|password|passwd|token|auth|authorization)$", re.I
)
"""Mapping keys whose values are masked (``api_key``, ``hf_token``; not ``max_tokens``)."""


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


NOT_COLLECTED = "not collected"


def process_record(identity: ServerIdentity | None) -> tuple[dict[str, Any] | None, str | None]:
    """``server.process`` and ``server.process_note``: the identity, or ``None`` and why not."""
    if identity is None:
        return None, NOT_COLLECTED
    if identity.pid is None:
        return None, "; ".join(identity.notes) or "the server process was not found"
    return identity_to_json(identity), None


def _server(result: BenchResult, identity: ServerIdentity | None) -> dict[str, Any]:
    s = result.server
    process, note = process_record(identity)
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
        "process": process,
        "process_note": note,
    }


def _runs_with_load(result: BenchResult) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The runs, each with its ``load``, and the overall load summaries."""
    runs: list[dict[str, Any]] = []
    running: list[float] = []
    prompt: list[float] = []
    for run in result.runs:
        load = load_from_counters(run.server_counters, run.wall_s)
        runs.append(
            {
                **to_jsonable(run),
                "load": {
                    "running_requests": load.running_requests,
                    "prompt_tok_s": load.prompt_tok_s,
                },
            }
        )
        if load.running_requests is not None:
            running.append(load.running_requests)
        if load.prompt_tok_s is not None:
            prompt.append(load.prompt_tok_s)
    overall = {
        "running_requests": to_jsonable(summarize(running)),
        "prompt_tok_s": to_jsonable(summarize(prompt)),
    }
    return runs, overall


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
    overall = to_jsonable(result.overall)
    overall["gpus"] = to_jsonable(result.gpus)
    runs, load = _runs_with_load(result)
    overall.update(load)
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
        "server": _server(result, identity),
        "gpu_environment": _gpu_environment(result),
        "warmups": to_jsonable(result.warmups),
        "runs": runs,
        "overall": overall,
        "timeseries": {
            "interval_s": result.config.series_interval_s,
            "points": to_jsonable(result.series),
        },
    }
    cleaned: dict[str, Any] = scrub(snap, secrets)
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
