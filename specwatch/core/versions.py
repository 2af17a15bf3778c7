"""Server version strings as numbers that compare.

SGLang and vLLM report release numbers (``"0.5.23"``, ``"0.4.6.post5"``, ``"v0.33.0rc1"``);
llama.cpp reports its build as ``b<build>-<commit>`` (``"b6500-0c1e570"``). A llama.cpp built
from a shallow clone reports build 1 (``"b1-0c1e570"``): that number says nothing about its age,
so decide llama.cpp behaviour from what the server exposes rather than from its build number.
"""

from __future__ import annotations

import re

_LLAMACPP_BUILD = re.compile(r"[bB](\d+)(?![\d.])")
_RELEASE = re.compile(r"\d+(?:\.\d+)*")


def version_tuple(version: str | None) -> tuple[int, ...]:
    """The comparable numbers of a server version; ``()`` when unknown.

    A release gives at least three numbers, padded with zeros (``"0.5"`` -> ``(0, 5, 0)``), with
    pre-, post- and local parts dropped (``"0.4.6.post5"`` -> ``(0, 4, 6)``). A llama.cpp build
    gives its build number alone (``"b6500-0c1e570"`` -> ``(6500,)``); the digits of the commit
    hash are never read as version numbers.
    """
    text = (version or "").strip().lstrip("vV")
    build = _LLAMACPP_BUILD.match(text)
    if build:
        return (int(build.group(1)),)
    release = _RELEASE.match(text)
    if not release:
        return ()
    numbers = tuple(int(part) for part in release.group(0).split("."))
    return numbers + (0,) * (3 - len(numbers))


__all__ = ["version_tuple"]
