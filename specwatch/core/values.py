"""Plain JSON values: numbers out of decoded JSON (where a field can hold anything), and
JSON values out of the models (for snapshots and ``--json``)."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any


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


def to_jsonable(obj: Any) -> Any:
    """Plain JSON values from dataclasses, mappings, sequences and enums (NaN/inf become null)."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    return str(obj)


__all__ = ["as_float", "as_int", "to_jsonable"]
