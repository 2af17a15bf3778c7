"""Session events to compact bytes and back: orjson, zlib where it pays, typed on the way out.

Encoding walks the frozen dataclasses into plain JSON values; decoding walks the dataclass type
hints back, so a recorded :class:`~specwatch.session.events.GpuTicked` comes back as the same
``GpuTicked`` (tuples as tuples, enums as enums), equal to the one recorded.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from specwatch.core.values import to_jsonable
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
        ev.BenchProgress,
        ev.BenchFinished,
        ev.RecordingStopped,
        ev.VerdictChanged,
    )
}
"""Every event a recording holds, by the name stored in its ``kind`` column."""

COMPRESS_OVER = 200
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
    data = orjson.dumps(to_jsonable(event))
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
        raw = zlib.decompress(payload) if compressed else payload
        value = orjson.loads(raw)
    except (zlib.error, orjson.JSONDecodeError) as e:
        raise DecodeError(f"{kind}: unreadable payload ({type(e).__name__})") from None
    try:
        event = from_plain(cls, value)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise DecodeError(f"{kind}: {e}") from None
    return typing.cast(ev.SessionEvent, event)


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        # Some annotations name types imported only for type checking (BenchResult, the
        # verdict's figures).
        from specwatch.bench import results, runner
        from specwatch.session import verdict_rule

        extra = {**vars(results), **vars(runner), **vars(verdict_rule), "Path": Path}
        hints = typing.get_type_hints(cls, localns=extra)
        _HINTS[cls] = hints
    return hints


def from_plain(tp: Any, value: Any) -> Any:
    """``value`` (plain JSON) rebuilt as type ``tp``, recursively.

    Raises:
        TypeError: The value does not fit the type.
    """
    if value is None:
        return None
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(tp), value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{tp.__name__}: expected an object")
        hints = _hints(tp)
        kwargs = {
            f.name: from_plain(hints[f.name], value[f.name])
            for f in dataclasses.fields(tp)
            if f.name in value and f.init
        }
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], v) for v in _seq(value))
        return tuple(from_plain(a, v) for a, v in zip(args, _seq(value), strict=True))
    if origin is frozenset:
        (arg,) = typing.get_args(tp) or (Any,)
        return frozenset(from_plain(arg, v) for v in _seq(value))
    if origin in (list, Sequence):
        (arg,) = typing.get_args(tp) or (Any,)
        return [from_plain(arg, v) for v in _seq(value)]
    if origin in (dict, Mapping):
        args = typing.get_args(tp)
        inner = args[1] if len(args) == 2 else Any
        if not isinstance(value, dict):
            raise TypeError("expected an object")
        return {str(k): from_plain(inner, v) for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"expected a number, got {type(value).__name__}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {type(value).__name__}")
        return value
    if tp is Path:
        return Path(str(value))
    if tp in (str, bool) and not isinstance(value, tp):
        raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
    return value


def _seq(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError("expected a list")
    return value


def _union(args: tuple[Any, ...], value: Any) -> Any:
    options = [a for a in args if a is not type(None)]
    errors = []
    for option in options:
        try:
            return from_plain(option, value)
        except (TypeError, ValueError, KeyError) as e:
            errors.append(str(e))
    raise TypeError("; ".join(errors) or "no type fits")


__all__ = ["COMPRESS_OVER", "EVENT_TYPES", "DecodeError", "decode", "encode", "event_time"]
