"""Session events to compact bytes and back: orjson, zlib where it pays, typed on the way out.

The values are those of the one dataclass codec (:mod:`specwatch.core.values`), so a recorded
:class:`~specwatch.session.events.GpuTicked` comes back as the same ``GpuTicked``.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
import zlib
from typing import Any

import orjson

from specwatch.core.identity import scrub_identity
from specwatch.core.redaction import redact_value
from specwatch.core.sanitize import DEFAULT_TEXT_LIMIT, sanitize_text
from specwatch.core.values import from_plain, to_jsonable
from specwatch.session import events as ev

EVENT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        ev.ServerWaiting,
        ev.ServerReady,
        ev.ServerIdentified,
        ev.ServerLost,
        ev.MetricsScraped,
        ev.GpuInventoryChanged,
        ev.GpuTicked,
        ev.HostSampled,
        ev.BenchProgress,
        ev.BenchFinished,
        ev.ProfileProgress,
        ev.ProfileFinished,
        ev.RecordingStopped,
        ev.VerdictChanged,
    )
}
"""Every event a recording holds, by the name stored in its ``kind`` column."""

COMPRESS_OVER = 200
MAX_EVENT_BYTES = 16 * 1024 * 1024
"""Largest inflated payload decoded (an event is a few KiB; a zlib bomb in a recording is not
inflated past this)."""
"""Payloads at least this long are zlib-compressed (kept only when that makes them smaller)."""


class DecodeError(ValueError):
    """A stored payload is not the event its row says it is."""


def event_time(event: ev.SessionEvent) -> float | None:
    """The session-clock time an event carries (``None``: it carries none)."""
    if isinstance(event, ev.MetricsScraped):
        return event.window.t
    if isinstance(event, ev.GpuTicked):
        return event.tick.t
    t = getattr(event, "t", None)
    return t if isinstance(t, float | int) else None


def encode(event: ev.SessionEvent) -> tuple[str, bytes, bool]:
    """``(kind, payload, compressed)`` for one event."""
    data = orjson.dumps(to_jsonable(event, lean=True))
    if len(data) >= COMPRESS_OVER:
        packed = zlib.compress(data, 6)
        if len(packed) < len(data):
            return type(event).__name__, packed, True
    return type(event).__name__, data, False


def decode(kind: str, payload: bytes, compressed: bool) -> ev.SessionEvent:
    """The typed event of one stored row.

    Raises:
        DecodeError: Unknown kind, bad compression, bad JSON, or fields that do not fit.
    """
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise DecodeError(f"unknown event kind {kind[:40]!r}")
    try:
        raw = _inflate(payload) if compressed else payload
        value = orjson.loads(raw)
    except (zlib.error, orjson.JSONDecodeError) as e:
        raise DecodeError(f"{kind}: unreadable payload ({type(e).__name__})") from None
    if not (len(raw) < DEFAULT_TEXT_LIMIT and raw.isascii() and b"\\" not in raw):
        value = _clean(value)  # a string in it may hold controls or be over the limit
    if cls is ev.VerdictChanged:
        value = _old_judgement(value)
    try:
        event = from_plain(cls, value, _names())
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise DecodeError(f"{kind}: {e}") from None
    return _scrubbed(typing.cast(ev.SessionEvent, event))


def _inflate(payload: bytes) -> bytes:
    """``payload`` inflated, at most :data:`MAX_EVENT_BYTES`.

    Raises:
        DecodeError: It inflates past that.
        zlib.error: It is not zlib data.
    """
    inflater = zlib.decompressobj()
    raw = inflater.decompress(payload, MAX_EVENT_BYTES)
    if inflater.unconsumed_tail:
        raise DecodeError(f"payload inflates past {MAX_EVENT_BYTES} bytes")
    return raw + inflater.flush()


def _clean(value: Any) -> Any:
    """Every string in a decoded payload through the sanitiser (a recording is outside text:
    a stored version or model id may carry terminal escapes or be 10,000 characters long)."""
    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def _scrubbed(event: ev.SessionEvent) -> ev.SessionEvent:
    """The secret rule applied again on the way out: a recording made before it may hold a
    server's secrets in its identity or launch arguments."""
    if isinstance(event, ev.ServerIdentified):
        return dataclasses.replace(event, identity=scrub_identity(event.identity))
    if isinstance(event, ev.ServerReady) and event.info.launch_args is not None:
        info = dataclasses.replace(event.info, launch_args=redact_value(event.info.launch_args))
        return dataclasses.replace(event, info=info)
    return event


@functools.cache
def _names() -> dict[str, Any]:
    # The verdict's figures are annotated with names its modules import only for type checking.
    from specwatch.core import judge

    return dict(vars(judge))


def _old_judgement(value: Any) -> Any:
    """A verdict recorded before the live line kept the whole judgement (it stored ``reason``,
    ``change`` and ``noise``) as the judgement it was."""
    state = value.get("state") if isinstance(value, dict) else None
    j = state.get("judgement") if isinstance(state, dict) else None
    if (
        not isinstance(state, dict)
        or not isinstance(j, dict)
        or "reasons" in j
        or "reason" not in j
    ):
        return value
    change, noise = j.get("change"), j.get("noise")
    low = high = None
    if isinstance(change, float | int) and isinstance(noise, float | int):
        low, high = change - noise, change + noise
    empty = {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    empty |= {"ci_low": None, "ci_high": None}
    new = {
        "outcome": j.get("outcome"),
        "reasons": [j["reason"]],
        "tok_s_reference": empty,
        "tok_s_current": empty,
        "welch": None,
        "change": change,
        "change_low": low,
        "change_high": high,
        "beyond_noise": low is not None and high is not None and not low <= 0 <= high,
        "expected_ratio": None,
        "observed_ratio": None,
        "observed_ratio_low": None,
        "observed_ratio_high": None,
        "share": None,
        "explained_by_clock": False,
        "term": j.get("term", "SM clock"),
    }
    return {**value, "state": {**state, "judgement": new}}


__all__ = [
    "COMPRESS_OVER",
    "EVENT_TYPES",
    "MAX_EVENT_BYTES",
    "DecodeError",
    "decode",
    "encode",
    "event_time",
]
