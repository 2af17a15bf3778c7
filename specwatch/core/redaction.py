"""The one rule that keeps secrets out of what specwatch shows and stores.

A server's command line, environment and launch arguments are treated as hostile: a name is
secret when any of its words holds one of :data:`SECRET_WORDS` (``--db-passwd``,
``VLLM_HF_PAT``, ``session_cookie``), unless the word is one of the few common words known to
be harmless (:data:`HARMLESS_WORDS`: ``tokens``, ``tokenizer``, ``path``). An unknown word that
merely contains a marker is secret: the rule fails safe. Credentials in URLs lose their
password (``s3://user:pass@bucket`` -> ``s3://user:…@bucket``).

Pure and headless: identity, snapshots, probe, recordings and the screen all call this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

WITHHELD = "***"
"""What a withheld value is replaced by."""
SECRET_WORDS = (
    "key",
    "token",
    "secret",
    "pass",
    "pwd",
    "auth",
    "cred",
    "cookie",
    "bearer",
    "pat",
    "session",
    "private",
    "cert",
)
"""A name with a word containing one of these holds a secret."""
HARMLESS_WORDS = frozenset(
    {
        "tokens",
        "tokenizer",
        "tokenize",
        "tokenization",
        "path",
        "paths",
        "patch",
        "patches",
        "pattern",
        "patterns",
        "compat",
        "compatibility",
        "dispatch",
        "dispatcher",
        "spatial",
    }
)
"""Words that contain a marker but name no secret (``--max-num-batched-tokens``,
``--model-path``, ``LD_LIBRARY_PATH``): their values matter for performance."""
SECRET_SHORT_OPTIONS = frozenset({"-k"})
"""Single-letter options whose value is a key by common convention (``curl -k`` aside)."""

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z0-9]+(?![a-z])")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s:@]*):([^/\s@]*)@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_OPTION_IN_TEXT = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)(=|\s+)(?!-)([^\s\"',;]+)")
# A name never starts right after a letter: such a match would start one letter earlier (the
# leftmost wins), and trying each inner position made a long word cost quadratic time.
_PAIR_IN_TEXT = re.compile(
    r"([\"']?)(?<![A-Za-z_])([A-Za-z_][\w.-]*)\1(\s*[:=]\s*)([\"']?)([^\s\"',;}]+)"
)


def is_secret_name(name: str) -> bool:
    """Whether an option, variable or key name may hold a secret (the fail-safe word rule)."""
    for word in _WORD.findall(name):
        lower = word.lower()
        if lower in HARMLESS_WORDS:
            continue
        if any(marker in lower for marker in SECRET_WORDS):
            return True
    return False


def strip_userinfo(text: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://user:…@host``, anywhere in ``text``."""
    return _USERINFO.sub(r"\1\2:…@", text)


def _option_value(match: re.Match[str]) -> str:
    option, sep, _value = match.groups()
    if option in SECRET_SHORT_OPTIONS or is_secret_name(option.lstrip("-")):
        return f"{option}{sep}{WITHHELD}"
    return match.group(0)


def _pair_value(match: re.Match[str]) -> str:
    quote, name, sep, vquote, _value = match.groups()
    if is_secret_name(name):
        return f"{quote}{name}{quote}{sep}{vquote}{WITHHELD}"
    return match.group(0)


def redact_text(text: str) -> str:
    """Free text (an error line, an argument value, a JSON string) with secrets withheld.

    Covers URL passwords, ``Bearer <token>``, ``--secret-option value`` and
    ``"secret_key": "value"`` / ``secret_key=value`` pairs.
    """
    text = strip_userinfo(text)
    text = _BEARER.sub(rf"\1{WITHHELD}", text)
    text = _OPTION_IN_TEXT.sub(_option_value, text)
    return _PAIR_IN_TEXT.sub(_pair_value, text)


def _takes_value(arg: str) -> bool:
    """Whether ``arg`` is an option (not ``--opt=v``) whose next argument would be its value."""
    if not arg.startswith("-") or "=" in arg or arg in ("-", "--"):
        return False
    return arg in SECRET_SHORT_OPTIONS or is_secret_name(arg.lstrip("-"))


def _looks_like_option(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not arg[1:2].isdigit() and arg[1:2] != "."


def redact_argv(argv: Iterable[str], max_arg: int = 0) -> tuple[str, ...]:
    """A command line with the value of every secret-named option withheld.

    ``--opt value``, ``--opt=value`` and ``-k value`` forms; a following option is not taken for
    the value (``--enable-auth --port 8000``). Every argument also goes through
    :func:`redact_text` (URL passwords, JSON secrets). ``max_arg`` > 0 cuts longer arguments.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not _looks_like_option(arg):
            out.append(WITHHELD)
            hide_next = False
            continue
        hide_next = _takes_value(arg)
        option, eq, _value = arg.partition("=")
        if eq and option.startswith("-") and is_secret_name(option.lstrip("-")):
            shown = f"{option}={WITHHELD}"
        else:
            shown = redact_text(arg)
        if max_arg > 0 and len(shown) > max_arg:
            shown = shown[: max_arg - 1] + "…"
        out.append(shown)
    return tuple(out)


def redact_value(value: Any, *, secret: bool = False) -> Any:
    """A JSON-like value with secrets withheld.

    Every string under a secret-named key (at any depth) becomes :data:`WITHHELD`; numbers,
    booleans and ``None`` stay (``joules_per_token``). Other strings go through
    :func:`redact_text`, and a list of strings is read as a command line (:func:`redact_argv`).
    """
    if isinstance(value, str):
        if secret:
            return WITHHELD if value else value
        return redact_text(value)
    if isinstance(value, Mapping):
        return {
            key: redact_value(item, secret=secret or (isinstance(key, str) and is_secret_name(key)))
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        if not secret and value and all(isinstance(v, str) for v in value):
            return list(redact_argv(value))
        return [redact_value(v, secret=secret) for v in value]
    return value


def withhold(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of a JSON-like value with every occurrence of the ``secrets`` (an API key's
    value, wherever it appears: a URL, an error line, a dictionary key) withheld."""
    values = [s for s in secrets if s]
    if not values:
        return value
    if isinstance(value, str):
        for secret in values:
            value = value.replace(secret, WITHHELD)
        return value
    if isinstance(value, Mapping):
        return {withhold(k, values): withhold(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [withhold(v, values) for v in value]
    return value


__all__ = [
    "HARMLESS_WORDS",
    "SECRET_SHORT_OPTIONS",
    "SECRET_WORDS",
    "WITHHELD",
    "is_secret_name",
    "redact_argv",
    "redact_text",
    "redact_value",
    "strip_userinfo",
    "withhold",
]
