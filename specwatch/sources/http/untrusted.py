"""Server text made safe at the boundary: every string a server sent, sanitised once.

:func:`clean_info` is applied where a :class:`ServerInfo` is built (detection), so the probe
report, the benchmark, snapshots and every TUI pane see only sanitised text; errors are
sanitised where :class:`~specwatch.sources.http.client.ServerError` is built, metrics notes in the
watcher and stream results in :mod:`specwatch.sources.streams.figures`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import ServerInfo

FIELD_LIMIT = 200
"""Model ids, versions, algorithm names, argument values."""
NOTE_LIMIT = 600
"""Notes and reasons (they may quote an error)."""
_MAX_DEPTH = 8


def clean_str(value: str | None, limit: int = FIELD_LIMIT) -> str | None:
    """``value`` sanitised to one bounded line (``None`` stays ``None``)."""
    return None if value is None else sanitize_line(value, limit)


def clean_value(value: Any, limit: int = FIELD_LIMIT, depth: int = 0) -> Any:
    """Strings anywhere in ``value`` (and mapping keys) sanitised; other values as they are."""
    if isinstance(value, str):
        return sanitize_line(value, limit)
    if depth >= _MAX_DEPTH:
        return value if isinstance(value, (int, float, bool)) or value is None else "…"
    if isinstance(value, Mapping):
        return {
            sanitize_line(str(k), FIELD_LIMIT): clean_value(v, limit, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [clean_value(v, limit, depth + 1) for v in value]
    return value


def clean_notes(notes: Mapping[str, str]) -> dict[str, str]:
    """Notes with keys and values sanitised."""
    out: dict[str, str] = {}
    for k, v in notes.items():
        if k.__class__ is str and v.__class__ is str:
            key, value = _clean_pair(k, v)
        else:
            key, value = sanitize_line(str(k), FIELD_LIMIT), sanitize_line(str(v), NOTE_LIMIT)
        out[key] = value
    return out


@lru_cache(maxsize=1024)
def _clean_pair(key: str, value: str) -> tuple[str, str]:
    """A note sanitised (remembered: a scrape says the same few notes every second)."""
    return sanitize_line(key, FIELD_LIMIT), sanitize_line(value, NOTE_LIMIT)


def clean_info(info: ServerInfo) -> ServerInfo:
    """``info`` with every server-given string sanitised."""
    spec = dataclasses.replace(
        info.spec,
        algorithm=clean_str(info.spec.algorithm),
        draft_model=clean_str(info.spec.draft_model),
        source=sanitize_line(info.spec.source, NOTE_LIMIT),
    )
    return dataclasses.replace(
        info,
        version=clean_str(info.version),
        model=clean_str(info.model),
        spec=spec,
        metrics_reason=clean_str(info.metrics_reason, NOTE_LIMIT),
        launch_args=None if info.launch_args is None else clean_value(info.launch_args),
        notes=clean_notes(info.notes),
    )


__all__ = ["FIELD_LIMIT", "NOTE_LIMIT", "clean_info", "clean_notes", "clean_str", "clean_value"]
