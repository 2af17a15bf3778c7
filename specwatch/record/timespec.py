"""Durations (``2h``, ``1h55m``, ``90s``) and times (ISO 8601, local zone by default; relative
to the end of a recording: ``-2h``; or its ``start`` and ``end``) as the record, export and
compare commands take them."""

from __future__ import annotations

import datetime as dt
import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """Seconds in ``2h``, ``1h55m``, ``90s``, ``1.5h`` or a plain number of seconds.

    Raises:
        ValueError: Not a duration (one line).
    """
    s = text.strip().lower()
    try:
        seconds = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):  # "inf", "1e400"
            raise ValueError(f"not a duration: {text!r} (e.g. 90s, 10m, 2h, 1h55m)")
        return seconds
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 10m, 2h, 1h55m)")
    return total


def parse_time(
    text: str,
    end_wall: float,
    zone: dt.tzinfo | None = None,
    start_wall: float | None = None,
) -> float:
    """Unix seconds of ``text``: ISO 8601 (without a zone: ``zone``, default local), ``-2h``
    (before ``end_wall``, the end of the recording), ``end``, or ``start`` (``start_wall``, the
    recording's first moment, where the caller knows it).

    Raises:
        ValueError: None of these (one line).
    """
    s = text.strip()
    word = s.lower()
    if word == "end":
        return end_wall
    if word == "start" and start_wall is not None:
        return start_wall
    if s.startswith("-"):
        return end_wall - parse_duration(s[1:])
    try:
        moment = dt.datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (ISO 8601 like 2026-12-01T14:00, -2h before the end, "
            "start or end)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone) if zone is not None else moment.astimezone()
    return moment.timestamp()


__all__ = ["parse_duration", "parse_time"]
