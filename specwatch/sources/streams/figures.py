"""A stream's figures after the fact: the token cap, the cut last step, sanitised text.

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

from specwatch.core.sanitize import NOTE_LIMIT, clean_notes, clean_str, clean_value
from specwatch.core.server import ServerInfo, StreamResult

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
    "CUT_STEP_NOTE",
    "TOKENS_PER_STEP_NOTE",
    "clean_result",
    "step_tokens",
    "stream_spec_figures",
    "token_cap",
]
