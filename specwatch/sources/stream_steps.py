"""One streamed completion's arithmetic: what arrived so far (filled by a dialect's chunk
parser), the steps its bursts of events make, and its figures after the fact (the token cap,
the cut last step, sanitised text). ``sources/stream.py`` runs the stream on top of it.

Why the stream's accept length differs from the server's counters (vLLM, 2.80 vs 2.835 over one
request): the server counts every verify step in full, accepted tokens included, but the last
step of a request that hits ``max_tokens`` emits only what still fits; the stream sees that
step short. The first chunk carries the prefill's token (no draft was verified for it) and is
already left out (tokens after the first chunk, over the steps between). The last step is kept
(a stream cannot tell a cut step from a short one), so the stream's figure reads slightly low
on short requests, and a client that falls behind sees two steps merged into one chunk. The
server's counters (``accepted / drafts + 1``) are authoritative; the note says so.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.sanitize import NOTE_LIMIT, clean_notes, clean_str, clean_value
from specwatch.core.server import ChunkArrival, ServerInfo, StreamResult


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


GAP_FLOOR_S = 1e-6
"""Gaps below this (simultaneous events) count as this, so their logarithm is finite."""
BURST_MAX_S = 2e-3
"""A gap inside one verify step's burst of events is never longer than this."""
BURST_SEPARATION = 10.0
"""The burst gaps and the step gaps must differ by this factor (geometric means) to be split."""


def quantile(values: list[float], q: float) -> float | None:
    """Linear-interpolated quantile of ``values`` (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def group_bursts(
    times: list[float], threshold_s: float | None = None, steps: int | None = None
) -> list[int]:
    """Indexes of ``times`` where a new step starts; the events of one step's burst merge.

    Args:
        times: Arrival times of successive events.
        threshold_s: Gaps above this start a new step.
        steps: The number of steps after the first event when the server says so (llama.cpp
            ``predicted_n - 1 - draft_n_accepted``): the ``steps`` longest gaps start them.

    Without either, the gaps are split in two clusters on a log scale (burst gaps of a few
    microseconds, step gaps of milliseconds); when no such split exists (no speculation) every
    event is its own step.
    """
    if not times:
        return []
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if steps is not None and 0 < steps <= len(gaps):
        longest = sorted(range(len(gaps)), key=lambda i: gaps[i], reverse=True)[:steps]
        return [0, *sorted(i + 1 for i in longest)]
    if threshold_s is None:
        threshold_s = _burst_threshold(gaps)
    starts = [0]
    for i, gap in enumerate(gaps, start=1):
        if gap > threshold_s:
            starts.append(i)
    return starts


def _burst_threshold(gaps: list[float]) -> float:
    """The best two-cluster split of the log gaps (Otsu), or ``-1`` (no split) if unclear."""
    if len(gaps) < 2:
        return -1.0
    logs = sorted(math.log(max(g, GAP_FLOOR_S)) for g in gaps)
    n = len(logs)
    prefix = [0.0]
    prefix_sq = [0.0]
    for v in logs:
        prefix.append(prefix[-1] + v)
        prefix_sq.append(prefix_sq[-1] + v * v)
    best: tuple[float, int] | None = None
    for k in range(1, n):
        if logs[k] == logs[k - 1]:
            continue
        lo_sum, hi_sum = prefix[k], prefix[n] - prefix[k]
        cost = (prefix_sq[k] - lo_sum * lo_sum / k) + (
            prefix_sq[n] - prefix_sq[k] - hi_sum * hi_sum / (n - k)
        )
        if best is None or cost < best[0]:
            best = (cost, k)
    if best is None:
        return -1.0
    k = best[1]
    lo_mean = prefix[k] / k
    hi_mean = (prefix[n] - prefix[k]) / (n - k)
    if math.exp(logs[k - 1]) > BURST_MAX_S or hi_mean - lo_mean < math.log(BURST_SEPARATION):
        return -1.0
    return math.exp((logs[k - 1] + logs[k]) / 2)


def estimate_counts(acc: StreamAccumulator) -> list[ChunkArrival]:
    """Rescale placeholder per-chunk counts to the final usage, by text length."""
    total = acc.final_tokens
    if total is None:
        total = max(1, round(acc.text_chars / 4)) if acc.text_chars else 0
        acc.notes["completion_tokens"] = (
            "the server sent no usage: estimated from the text length (about 4 characters a token)"
        )
    chars_total = acc.chars[-1] if acc.chars and acc.chars[-1] > 0 else 0
    out: list[ChunkArrival] = []
    last = 0
    for i, chunk in enumerate(acc.arrivals):
        if chars_total:
            est = round(total * acc.chars[i] / chars_total)
        else:
            est = round(total * (i + 1) / len(acc.arrivals))
        est = max(est, last + 1 if last < total else last, 1)
        est = min(est, total) if total else est
        last = est
        out.append(ChunkArrival(t=chunk.t, tokens=est))
    acc.final_tokens = total
    return out


UNKNOWN_STEP_TOKENS = 16
"""Tokens one speculative step may add when the server does not say how many it drafts."""
TOKENS_PER_STEP_NOTE = "from tokens per observed step (the server reports none)"
"""The note of an accept length measured from the stream (``stream.py``)."""
CUT_STEP_NOTE = (
    "tokens per observed step after the first chunk (the prefill's token); the last step, cut"
    " short by max_tokens, reads low, so the server's counters (accepted / drafts + 1) are"
    " authoritative"
)
RATE_NOTE = "(accept length - 1) / {k} draft tokens per step, from the stream's steps"


def step_tokens(info: ServerInfo) -> int:
    """At most how many tokens one engine step adds on this server."""
    spec = info.spec
    if spec.enabled is False:
        return 1
    drafts = max(spec.num_draft_tokens or 0, spec.num_steps or 0)
    return drafts + 1 if drafts else UNKNOWN_STEP_TOKENS


def token_cap(info: ServerInfo, max_tokens: int) -> int:
    """Completion tokens past which a stream is cut (the server ignores ``max_tokens``)."""
    return max_tokens + step_tokens(info)


def stream_spec_figures(result: StreamResult, info: ServerInfo, max_tokens: int) -> StreamResult:
    """Say which accept length is authoritative; the draft acceptance rate where ``k`` is known.

    Only for an accept length measured from a stream of one chunk per step (see the module).
    """
    if result.notes.get("accept_length") != TOKENS_PER_STEP_NOTE or result.steps is None:
        return result
    chunks = result.chunks
    if result.steps != len(chunks) - 1:
        return result  # bursts grouped into steps: the chunks are not steps
    notes = dict(result.notes)
    length = result.accept_length
    cut = result.finish_reason == "length" or result.completion_tokens >= max_tokens
    if cut and len(chunks) >= 3 and chunks[-1].tokens >= max_tokens:
        notes["accept_length"] = CUT_STEP_NOTE
    rate = result.draft_acceptance_rate
    k = info.spec.num_draft_tokens
    if rate is None and length is not None and k:
        raw = (length - 1.0) / k
        if 0.0 <= raw <= 1.0:
            rate = raw
            notes["draft_acceptance_rate"] = RATE_NOTE.format(k=k)
        else:
            notes["draft_acceptance_rate"] = (
                f"the stream's steps give {raw:.2f} (outside 0..1): the client fell behind and"
                " saw steps merged into one chunk; see the server's counters"
            )
    return dataclasses.replace(
        result, accept_length=length, draft_acceptance_rate=rate, notes=notes
    )


def clean_result(result: StreamResult) -> StreamResult:
    """``result`` with the server's text (error, finish reason, notes, stats) sanitised."""
    return dataclasses.replace(
        result,
        error=clean_str(result.error, 2 * NOTE_LIMIT),
        finish_reason=clean_str(result.finish_reason, 40),
        notes=clean_notes(result.notes),
        server_stats=clean_value(result.server_stats),
    )


__all__ = [
    "BURST_MAX_S",
    "CUT_STEP_NOTE",
    "GAP_FLOOR_S",
    "TOKENS_PER_STEP_NOTE",
    "StreamAccumulator",
    "clean_result",
    "estimate_counts",
    "finish_type",
    "group_bursts",
    "quantile",
    "step_tokens",
    "stream_spec_figures",
    "token_cap",
]
