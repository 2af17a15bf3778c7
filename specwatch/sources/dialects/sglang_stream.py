"""SGLang's native ``/generate`` stream: the request body, its chunks, and the per-request
speculative fields of the final chunk (names per version).

The dialect (:mod:`specwatch.sources.dialects.sglang`) plans streams with these; the metrics
window stays there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specwatch.core.server import ServerInfo
from specwatch.core.values import as_float, as_int
from specwatch.sources.dialects.base import StreamRequest
from specwatch.sources.stream_steps import StreamAccumulator, finish_type

_SPEC_PREFIX = "spec_"


def sglang_request(request: StreamRequest) -> dict[str, Any]:
    """The ``/generate`` body."""
    return {
        "text": request.prompt,
        "sampling_params": {
            "max_new_tokens": request.max_tokens,
            "temperature": request.temperature,
            "ignore_eos": request.ignore_eos,
        },
        "stream": True,
    }


def parse_sglang_chunk(acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
    """Read one ``/generate`` chunk; the final one carries the per-request speculative fields."""
    meta = obj.get("meta_info")
    if not isinstance(meta, Mapping):
        return
    prompt = as_int(meta.get("prompt_tokens"))
    if prompt is not None:
        acc.prompt_tokens = prompt
    tokens = as_int(meta.get("completion_tokens"))
    if tokens is not None:
        acc.arrive(t, tokens)
    reason = finish_type(meta.get("finish_reason"))
    if reason is not None:
        acc.finish_reason = reason
        acc.final_tokens = tokens
        for key, value in meta.items():
            if key.startswith(_SPEC_PREFIX) or key in ("e2e_latency", "cached_tokens"):
                acc.server_stats[key] = value


def sglang_spec(
    info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
) -> tuple[float | None, float | None]:
    """Accept length and drafts-only rate of one request from its final chunk (names per
    version), with a note on how each was read."""
    verify = as_float(stats.get("spec_verify_ct"))
    length = as_float(stats.get("spec_accept_length"))
    if length is None and verify:
        length = completion / verify
        stats["spec_accept_length_derived"] = length
    if length is not None:
        notes.setdefault(
            "accept_length",
            "SGLang's per-request figure completion_tokens / spec_verify_ct counts the prefill "
            "token (overstates by 1/spec_verify_ct)",
        )
    else:
        notes.setdefault(
            "accept_length",
            "speculative decoding is off"
            if info.spec.enabled is False
            else "this SGLang version reports no per-request speculative stats",
        )
    correct = as_float(stats.get("spec_num_correct_drafts", stats.get("spec_accepted_drafts")))
    proposed = as_float(stats.get("spec_num_proposed_drafts", stats.get("spec_proposed_drafts")))
    if correct is not None and proposed:
        return length, correct / proposed
    accepted = as_float(stats.get("spec_accept_token_num"))
    drafted = as_float(stats.get("spec_draft_token_num"))
    if accepted is not None and drafted:
        return length, accepted / drafted
    derived = _drafts_rate_from_verify(info, verify, completion)
    if derived is not None:
        stats["spec_accept_rate_derived"] = derived
        notes.setdefault(
            "draft_acceptance_rate",
            "(completion_tokens − 1 − spec_verify_ct) / (spec_verify_ct × (num_draft_tokens − 1)):"
            " the first token is prefill's and each verify step adds one bonus token",
        )
        return length, derived
    reported = as_float(stats.get("spec_accept_rate"))
    if reported is not None:
        notes.setdefault(
            "draft_acceptance_rate",
            "SGLang 0.5.4's spec_accept_rate = accepted / (verify steps × num_steps)",
        )
        return length, reported
    if length is not None:
        notes.setdefault("draft_acceptance_rate", "this SGLang version reports no per-request rate")
    return length, None


def _drafts_rate_from_verify(
    info: ServerInfo, verify: float | None, completion: int
) -> float | None:
    """Drafts-only acceptance of one request from its verify count, where SGLang gives no
    accepted-draft count (0.4.10.post2: ``spec_verify_ct`` alone; 0.5.3: a rate over
    ``speculative_num_steps`` that counts the prefill token as accepted).

    Chain drafting only: with ``topk > 1`` ``num_draft_tokens − 1`` is a tree's size, not the
    drafts a step can accept.
    """
    ndt = info.spec.num_draft_tokens
    if not verify or ndt is None or ndt < 2 or (info.spec.topk or 1) > 1:
        return None
    accepted = completion - 1 - verify
    if accepted < 0:
        return None
    return min(1.0, accepted / (verify * (ndt - 1)))


__all__ = ["parse_sglang_chunk", "sglang_request", "sglang_spec"]
