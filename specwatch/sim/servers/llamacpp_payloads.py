"""What the simulated llama.cpp reports about its settings and timings, build by build.

Pure functions of the configuration and a request: the ``generation_settings``/``params``
objects of ``/props``, ``/slots`` and final answers, and the ``timings`` object of answers.
"""

from __future__ import annotations

from typing import Any

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest, TokenEvent

SPEC_TYPES = {
    "EAGLE3": "draft-eagle3",
    "EAGLE": "draft-eagle3",
    "NGRAM": "ngram-simple",
    "MTP": "draft-mtp",
    "NEXTN": "draft-mtp",
    "STANDALONE": "draft-simple",
}


def spec_type(cfg: SimConfig) -> str:
    """``speculative.types`` of a drafting slot."""
    algo = cfg.spec_algorithm
    if algo is None:
        return "none"
    return SPEC_TYPES.get(algo.upper(), algo)


def generation_params(cfg: SimConfig, for_slot: bool) -> dict[str, Any]:
    """The generation parameters of a slot (``for_slot``) or of ``/props``."""
    p: dict[str, Any] = {
        "n_predict": -1,
        "seed": 4294967295,
        "temperature": 0.8,
        "dynatemp_range": 0.0,
        "top_k": 40,
        "top_p": 0.95,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "ignore_eos": False,
        "stream": True,
        "n_probs": 0,
        "timings_per_token": False,
    }
    if cfg.llamacpp_new:
        # /props builds fresh params: always "none", even while drafting (§3.1).
        p["speculative.types"] = spec_type(cfg) if for_slot else "none"
    else:
        n_max = cfg.num_draft_tokens if (for_slot and cfg.spec_enabled) else 16
        p.update({"speculative.n_max": n_max, "speculative.n_min": 0, "speculative.p_min": 0.75})
    return p


def timings(
    cfg: SimConfig,
    req: SimRequest,
    total: int,
    t_last: float | None,
    ev: TokenEvent | None = None,
) -> dict[str, Any]:
    """``timings`` after ``total`` tokens (server-common.cpp ``to_json``, or older builds)."""
    prompt_ms = req.prefill_s * 1000.0
    first = req.t_first if req.t_first is not None else req.t_arrival
    last = t_last if t_last is not None else first
    predicted_ms = max(0.0, (last - first) * 1000.0)
    if cfg.llamacpp_new:
        per_token = predicted_ms / (total - 1) if total > 1 else None
        per_second = (total - 1) / predicted_ms * 1000.0 if predicted_ms > 0 else None
    else:
        per_token = predicted_ms / total if total else None
        per_second = total / predicted_ms * 1000.0 if predicted_ms > 0 else None
    out: dict[str, Any] = {
        "cache_n": 0,
        "prompt_n": req.prompt_tokens,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / req.prompt_tokens,
        "prompt_per_second": req.prompt_tokens / prompt_ms * 1000.0 if prompt_ms else None,
        "predicted_n": total,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": per_token,
        "predicted_per_second": per_second,
    }
    proposed, accepted = (ev.proposed, ev.accepted) if ev else (req.proposed, req.accepted)
    if proposed > 0:
        out["draft_n"] = proposed
        out["draft_n_accepted"] = accepted
    return out
