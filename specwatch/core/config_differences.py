"""What differs between two launch configurations: what ``compare`` and the live verdict name
as **configuration changed**.

A normalised setting (:data:`~specwatch.core.launch_config.SETTINGS`) differs when both sides
know it, or when one leaves it unset and both argument lists came from the same source (the
unset side then runs the engine's default); :data:`~specwatch.core.launch_config.IGNORED`
arguments never count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specwatch.core.launch_config import IGNORED, SETTINGS, SPEC_METHOD, LaunchConfig, Setting


@dataclass(frozen=True, slots=True)
class ConfigDifference:
    """One setting or argument that differs between two launch configurations."""

    name: str
    before: str | None
    after: str | None
    origin: str = ""
    """The argument behind a normalised setting, when it is not the name itself."""

    def line(self) -> str:
        """``"draft length 4 → 8 (--spec-draft-n-max)"``."""
        where = f" ({self.origin})" if self.origin and self.origin != self.name else ""
        return f"{self.name} {_shown(self.before)} → {_shown(self.after)}{where}"


def _shown(value: str | None) -> str:
    if value is None:
        return "—"
    return value if len(value) <= 60 else value[:59] + "…"


def _ignored(name: str) -> bool:
    key = name.split(" ", 1)[-1] if name.startswith(("/props ", "cache_config ")) else name
    return key in IGNORED or "--" + key.replace("_", "-") in IGNORED


def config_differences(
    a: LaunchConfig | None, b: LaunchConfig | None
) -> tuple[ConfigDifference, ...]:
    """What differs between two launch configurations (``a`` before, ``b`` after).

    A normalised setting differs when both sides know it and the values differ; a setting one
    side leaves unset counts only when both argument lists came from the same source (then the
    unset one runs the engine's default). Other arguments are compared only between argument
    lists of the same source, what the server reports only where both sides report the key.
    :data:`IGNORED` arguments never count.
    """
    if a is None or b is None:
        return ()
    same_source = a.source is not None and a.source == b.source
    out: list[ConfigDifference] = []
    sa = {s.name: s for s in a.settings}
    sb = {s.name: s for s in b.settings}
    for name in SETTINGS:
        x, y = sa.get(name), sb.get(name)
        va, vb = (x.value if x else None), (y.value if y else None)
        if va == vb or ((va is None or vb is None) and not same_source):
            continue
        if name == SPEC_METHOD and va is not None and vb is not None and va.lower() == vb.lower():
            continue
        origins = [s.origin for s in (x, y) if s is not None and _is_argument(s.origin)]
        out.append(ConfigDifference(name, va, vb, ", ".join(dict.fromkeys(origins))))
    if same_source:
        out.extend(_list_differences(a.arguments, b.arguments, missing_counts=True))
    out.extend(_list_differences(a.reported, b.reported, missing_counts=False))
    return tuple(out)


def _is_argument(origin: str) -> bool:
    """Whether an origin names an argument (``-md``, ``speculative_num_steps``), not an
    endpoint (``/slots``)."""
    return bool(origin) and not origin.startswith("/") and origin not in ("server", "positional")


def _list_differences(
    a: Sequence[Setting], b: Sequence[Setting], *, missing_counts: bool
) -> list[ConfigDifference]:
    va = {s.name: s.value for s in a}
    vb = {s.name: s.value for s in b}
    out: list[ConfigDifference] = []
    for name in [*va, *(n for n in vb if n not in va)]:
        if _ignored(name):
            continue
        if name not in va or name not in vb:
            if missing_counts:
                out.append(ConfigDifference(name, va.get(name), vb.get(name)))
            continue
        if va[name] != vb[name]:
            out.append(ConfigDifference(name, va[name], vb[name]))
    return out


def differences_text(diffs: Sequence[ConfigDifference], limit: int = 4) -> str:
    """The first differences as one phrase (``"draft length 4 → 8 (--spec-draft-n-max)"``)."""
    shown = ", ".join(d.line() for d in diffs[:limit])
    more = len(diffs) - limit
    return shown + (f" and {more} more" if more > 0 else "")


__all__ = ["ConfigDifference", "config_differences", "differences_text"]
