"""What one stream has delivered so far, filled by a dialect's chunk parser."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.server import ChunkArrival


@dataclass(slots=True)
class StreamAccumulator:
    """What arrived so far on one stream."""

    t0: float
    clock: Callable[[], float]
    on_chunk: Callable[[ChunkArrival], None] | None
    arrivals: list[ChunkArrival] = field(default_factory=list)
    count: int = 0
    chars: list[int] = field(default_factory=list)
    """Cumulative text length at each arrival (only for estimated counts)."""
    text_chars: int = 0
    prompt_tokens: int | None = None
    final_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False
    server_stats: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    garbage: int = 0
    first_garbage: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    exact: bool = True
    count_source: str = ""

    def reject(self, line: str) -> None:
        """Count a line that is not a JSON event (the first one is shown in the error)."""
        self.garbage += 1
        self.first_garbage = self.first_garbage or line

    def arrive(self, t: float, count: int) -> None:
        """Record that the cumulative token count reached ``count`` at clock time ``t``."""
        if count <= self.count:
            return
        self.count = count
        chunk = ChunkArrival(t=t - self.t0, tokens=count)
        self.arrivals.append(chunk)
        self.chars.append(self.text_chars)
        if self.on_chunk is not None:
            self.on_chunk(chunk)


def finish_type(value: Any) -> str | None:
    """A finish reason given as a string or as ``{"type": ...}``."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        kind = value.get("type")
        return str(kind) if kind is not None else None
    return str(value)


__all__ = ["StreamAccumulator", "finish_type"]
