"""One sanitiser for text that comes from outside before it reaches a terminal.

A server's model id, error body or header, a snapshot's label, a recording or an environment
value can carry terminal escapes (``"\\x1b]0;TITLE\\x07\\x1b[2J"`` renames the window and wipes
the screen). Every C0/C1 control character, ESC, DEL, lone surrogate and bidirectional override
is made visible as a ``\\xNN`` / ``\\uNNNN`` escape, so the sequence is shown but never acted
on; line and paragraph separators become spaces (one line) or newlines (several lines); tabs
become spaces; the length is bounded with an ellipsis, which says how many characters were
left out when the bound is that of a line or a message (``…(9800 more characters)``).

A server's strings are sanitised once, where they enter: :func:`clean_info` where a
:class:`~specwatch.core.server.ServerInfo` is built (detection), so the probe report, the
benchmark, snapshots and every TUI pane see only sanitised text; errors where
:class:`~specwatch.sources.http.server_errors.ServerError` is built, metrics notes
(:func:`clean_notes`) in the watcher and stream results in
:mod:`specwatch.sources.stream_steps`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specwatch.core.server import ServerInfo

ELLIPSIS = "…"
DEFAULT_LINE_LIMIT = 200
DEFAULT_TEXT_LIMIT = 4000
LABEL_LIMIT = 256
"""Longest label value kept (a Prometheus or dcgm-exporter label); past it, an ellipsis."""
TAB_WIDTH = 4
COUNT_FROM = 100
"""Bounds of this many characters or more (an error line, a message) end with
"…(N more characters)"; shorter ones (a table cell, a version) with a bare ellipsis."""

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""Characters that reorder the text around them (Trojan Source); shown as escapes."""
_BREAKS = ("\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
"""Everything a terminal or Python's ``splitlines`` may treat as a line break, besides ``\\n``."""


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(ch: str) -> bool:
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")


def _tail(cut: int, limit: int) -> str:
    return f"{ELLIPSIS}({cut} more characters)" if limit >= COUNT_FROM else ELLIPSIS


def _bound(text: str, limit: int) -> str:
    limit = max(1, limit)
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(_tail(len(text), limit)))
    return text[:keep] + _tail(len(text) - keep, limit)


def _escape(text: str, keep_newlines: bool, limit: int) -> str:
    limit = max(1, limit)
    pieces: list[str] = []
    size = 0
    for ch in text:
        piece = ch if (ch == "\n" and keep_newlines) or not _unsafe(ch) else _visible(ch)
        pieces.append(piece)
        size += len(piece)
        if size > limit:  # enough to know it will be cut
            break
    if size <= limit and len(pieces) == len(text):
        return "".join(pieces)
    room = max(0, limit - len(_tail(len(text), limit)))
    size = 0
    shown = 0
    for piece in pieces:
        if size + len(piece) > room:
            break
        size += len(piece)
        shown += 1
    return "".join(pieces)[:room] + _tail(len(text) - shown, limit)


def sanitize_line(text: str, limit: int = DEFAULT_LINE_LIMIT) -> str:
    """``text`` safe to print on one line: no control characters, at most ``limit`` characters.

    Line breaks and tabs become single spaces; other controls, ESC and bidi overrides become
    visible escapes (``\\x1b``). Plain printable text within the limit comes back unchanged.
    """
    if text.isprintable():
        return _bound(text, limit)
    for brk in (*_BREAKS, "\n", "\t"):
        text = text.replace(brk, " ")
    return _escape(text, keep_newlines=False, limit=limit)


def sanitize_text(text: str, limit: int = DEFAULT_TEXT_LIMIT, max_lines: int | None = None) -> str:
    """``text`` safe to print over several lines: ``\\n`` is the only control character left.

    ``\\r\\n``, a lone ``\\r`` and other line separators become ``\\n`` (a bare carriage return
    would let a later line overwrite an earlier one); tabs become spaces; other controls, ESC
    and bidi overrides become visible escapes. At most ``max_lines`` lines (the last one then
    ends with an ellipsis) and ``limit`` characters.
    """
    if text.isprintable():
        return _bound(text, limit)
    for brk in _BREAKS:
        text = text.replace(brk, "\n")
    text = text.replace("\t", " " * TAB_WIDTH)
    if max_lines is not None:
        lines = text.split("\n")
        if len(lines) > max(1, max_lines):
            text = "\n".join(lines[: max(1, max_lines)]) + ELLIPSIS
    return _escape(text, keep_newlines=True, limit=limit)


def clean_labels(raw: object, limit: int = LABEL_LIMIT) -> dict[str, str] | None:
    """A series' labels from outside, each name and value through :func:`sanitize_line`
    (one line, at most ``limit`` characters); ``None`` when they cannot be used: not an
    object, or a name or value that is not a string.
    """
    if not isinstance(raw, Mapping):
        return None
    try:
        # the common case, one check in C for the whole series (130,000 series: 1.0 -> 0.3 s)
        joined = "".join([*raw.keys(), *raw.values()])
    except TypeError:  # a name or value that is not a string
        return None
    if len(joined) <= limit and joined.isprintable():
        return dict(raw)
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not isinstance(value, str):
            return None
        # the common case, checked in C: what sanitize_line would give back unchanged
        if len(name) > limit or not name.isprintable():
            name = sanitize_line(name, limit)
        if len(value) > limit or not value.isprintable():
            value = sanitize_line(value, limit)
        out[name] = value
    return out


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
    import dataclasses  # here, not at the top: ``specwatch --help`` imports this module

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


__all__ = [
    "BIDI_CONTROLS",
    "DEFAULT_TEXT_LIMIT",
    "ELLIPSIS",
    "FIELD_LIMIT",
    "LABEL_LIMIT",
    "NOTE_LIMIT",
    "clean_info",
    "clean_labels",
    "clean_notes",
    "clean_str",
    "clean_value",
    "sanitize_line",
    "sanitize_text",
]
