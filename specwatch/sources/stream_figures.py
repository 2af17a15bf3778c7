"""A stream's figures after the fact: the token cap, the cut last step, sanitised text.

Why the stream's accept length differs from the server's counters (vLLM, 2.80 vs 2.835 over one
request): the server counts every verify step in full, accepted tokens included, but the last
step of a request that hits ``max_tokens`` emits only what still fits; the stream sees that
step short. The first chunk carries the prefill's token (no draft was verified for it). So the
stream's figure is taken over whole steps only: tokens after the first chunk, over the steps
between, leaving out the last step when ``max_tokens`` cut the stream. Even so the server's
counters (``accepted / drafts + 1``) are authoritative: a client that falls behind sees two
steps merged into one chunk, which the server never miscounts.
"""

from __future__ import annotations

import dataclasses

from specwatch.core.server import ServerInfo, StreamResult
from specwatch.sources.untrusted import NOTE_LIMIT, clean_notes, clean_str, clean_value

UNKNOWN_STEP_TOKENS = 16
"""Tokens one speculative step may add when the server does not say how many it drafts."""
TOKENS_PER_STEP_NOTE = "from tokens per observed step (the server reports none)"
"""The note of an accept length measured from the stream (``stream.py``)."""
CUT_STEP_NOTE = (
    "tokens per observed step, over whole steps: the first chunk (the prefill's token) and the "
    "last step, cut short by max_tokens, are left out; the server's counters (accepted / drafts"
    " + 1) are authoritative"
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


def cut_last_step(result: StreamResult, info: ServerInfo, max_tokens: int) -> StreamResult:
    """Tokens per step over whole steps, and the draft acceptance rate where ``k`` is known.

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
        length = (chunks[-2].tokens - chunks[0].tokens) / (len(chunks) - 2)
        notes["accept_length"] = CUT_STEP_NOTE
    rate = result.draft_acceptance_rate
    k = info.spec.num_draft_tokens
    if rate is None and length is not None and k:
        rate = max(0.0, min(1.0, (length - 1.0) / k))
        notes["draft_acceptance_rate"] = RATE_NOTE.format(k=k)
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
    "cut_last_step",
    "step_tokens",
    "token_cap",
]
