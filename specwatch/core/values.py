"""Plain JSON values: numbers out of decoded JSON (where a field can hold anything), and the one
codec between the frozen dataclass models and JSON values (snapshots, recordings, ``--json``).

:func:`to_jsonable` walks a dataclass into plain values; :func:`from_plain` walks the dataclass
type hints back, so what was written comes back as the same types (tuples as tuples, enums as
enums), equal to what was written.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FLOAT_LIMIT = 1e18
"""Largest magnitude a stored figure may have (snapshots, recordings): a rate, a byte count or
a counter is far below it; ``1e308`` would overflow the first sum taken of it."""


def as_int(value: Any, *, digits: bool = False) -> int | None:
    """``value`` as an int when it is one (a whole float counts), else ``None``.

    ``True`` and ``False`` are not numbers here. With ``digits``, a string of digits counts too
    (server arguments that arrive as text).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if digits and isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def as_float(value: Any) -> float | None:
    """``value`` as a finite float when it is a number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def to_jsonable(obj: Any, *, lean: bool = False) -> Any:
    """Plain JSON values from dataclasses, mappings, sequences and enums (NaN/inf become null).

    ``lean`` leaves out the dataclass fields that are ``None`` at a ``None`` default
    (:func:`from_plain` gives them back): a recording's windows carry thirty-odd optional
    figures, most of them ``None``.
    """
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            name: to_jsonable(v, lean=lean)
            for name, none_default in _fields(type(obj))
            if (v := getattr(obj, name)) is not None or not (lean and none_default)
        }
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v, lean=lean) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v, lean=lean) for v in obj]
    return str(obj)


@functools.cache
def _fields(cls: type[Any]) -> tuple[tuple[str, bool], ...]:
    """A dataclass's fields: ``(name, whether its default is None)``."""
    return tuple((f.name, f.default is None) for f in dataclasses.fields(cls))


_HINTS: dict[type[Any], dict[str, Any]] = {}
"""Resolved field types per dataclass (a closed set of types, so it stays small)."""


def _hints(cls: type[Any], names: Mapping[str, Any] | None) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls, localns=dict(names) if names else None)
        _HINTS[cls] = hints
    return hints


def from_plain(tp: Any, value: Any, names: Mapping[str, Any] | None = None) -> Any:
    """``value`` (plain JSON) rebuilt as type ``tp``, recursively; unknown keys are ignored.

    Args:
        tp: The type to rebuild.
        value: Plain JSON values.
        names: Names that field annotations use but their modules import only for type checking.

    Raises:
        TypeError: The value does not fit the type (or a field without a default is missing).
    """
    if value is None:
        return None
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(tp), value, names)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{tp.__name__}: expected an object")
        hints = _hints(tp, names)
        kwargs = {
            f.name: from_plain(hints[f.name], value[f.name], names)
            for f in dataclasses.fields(tp)
            if f.name in value and f.init
        }
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], v, names) for v in _seq(value))
        return tuple(from_plain(a, v, names) for a, v in zip(args, _seq(value), strict=True))
    if origin is frozenset:
        (arg,) = typing.get_args(tp) or (Any,)
        return frozenset(from_plain(arg, v, names) for v in _seq(value))
    if origin in (list, Sequence):
        (arg,) = typing.get_args(tp) or (Any,)
        return [from_plain(arg, v, names) for v in _seq(value)]
    if origin in (dict, Mapping):
        args = typing.get_args(tp)
        inner = args[1] if len(args) == 2 else Any
        if not isinstance(value, dict):
            raise TypeError("expected an object")
        return {str(k): from_plain(inner, v, names) for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"expected a number, got {type(value).__name__}")
        if not abs(value) <= FLOAT_LIMIT:
            raise ValueError(f"number out of range: {float(value):g}")
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


def _union(args: tuple[Any, ...], value: Any, names: Mapping[str, Any] | None) -> Any:
    errors = []
    for option in (a for a in args if a is not type(None)):
        try:
            return from_plain(option, value, names)
        except (TypeError, ValueError, KeyError) as e:
            errors.append(str(e))
    raise TypeError("; ".join(errors) or "no type fits")


__all__ = ["FLOAT_LIMIT", "as_float", "as_int", "from_plain", "to_jsonable"]
