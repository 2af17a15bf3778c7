"""The one way a command prints an error: one line, outside text bounded.

An error can carry a server's answer, a label or a path of any length; past
:data:`ERROR_LIMIT` characters the line ends with "…(N more characters)".
"""

from __future__ import annotations

import sys
from typing import TextIO

from specwatch.core.sanitize import sanitize_line

ERROR_LIMIT = 400
"""Longest error message printed (the command's name aside)."""


def error_line(prefix: str, message: object) -> str:
    """``prefix: message`` with the message sanitised and bounded."""
    return f"{prefix}: {sanitize_line(str(message), ERROR_LIMIT)}"


def say_error(prefix: str, message: object, file: TextIO | None = None) -> None:
    """Print :func:`error_line` to ``file`` (standard error by default)."""
    print(error_line(prefix, message), file=file or sys.stderr)


__all__ = ["ERROR_LIMIT", "error_line", "say_error"]
