"""A draft length written the way the running engine takes it.

vLLM takes a batch-size table (``num_speculative_tokens_per_batch_size``: inclusive
``[low, high, k]`` ranges; a gap inherits the previous range's k, and k is clamped to
``num_speculative_tokens``); SGLang and llama.cpp take one draft length for every batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from specwatch.core.server import Dialect


def ranges(per_batch: Sequence[tuple[int, int]]) -> list[list[int]]:
    """``[[low, high, k], ...]`` from ``(batch, best k)`` pairs in ascending batch order.

    Neighbouring bins with the same k merge; a range runs up to the batch before the next
    bin's, the first starts at 1 and the last ends at the last measured batch.
    """
    out: list[list[int]] = []
    for i, (batch, k) in enumerate(per_batch):
        high = per_batch[i + 1][0] - 1 if i + 1 < len(per_batch) else batch
        if out and out[-1][2] == k:
            out[-1][1] = high
        else:
            out.append([1 if not out else out[-1][1] + 1, high, k])
    return out


def vllm_setting(k_running: int, per_batch: Sequence[tuple[int, int]]) -> str:
    """vLLM: keep, change or drop ``num_speculative_tokens``, or a per-batch table."""
    table = ranges(per_batch)
    ks = {r[2] for r in table}
    if ks == {0}:
        return "turn speculation off: drop --speculative-config"
    if len(ks) == 1:
        (k,) = ks
        if k == k_running:
            return f"keep num_speculative_tokens={k}"
        return f"--speculative-config '{json.dumps({'num_speculative_tokens': k})}'"
    config = {"num_speculative_tokens": max(ks), "num_speculative_tokens_per_batch_size": table}
    return f"--speculative-config '{json.dumps(config)}' (keep your method and model keys)"


def sglang_setting(k: int, k_running: int) -> str:
    """SGLang (chain drafting: topk 1; the draft tokens count the root)."""
    if k <= 0:
        return "turn speculation off: drop --speculative-algorithm"
    keep = "keep " if k == k_running else ""
    return (
        f"{keep}--speculative-num-steps {k} --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens {k + 1}"
    )


def llamacpp_setting(k: int, k_running: int) -> str:
    """llama-server."""
    if k <= 0:
        return "turn speculation off: start llama-server without a draft model"
    return f"{'keep ' if k == k_running else ''}--draft-max {k}"


def engine_setting(
    dialect: Dialect, k_running: int, per_batch: Sequence[tuple[int, int]], main_batch: int
) -> str:
    """The recommendation in ``dialect``'s own syntax.

    Args:
        dialect: The running engine.
        k_running: The draft tokens it runs now.
        per_batch: ``(batch, best k)`` pairs, ascending.
        main_batch: The batch a one-value engine is tuned for (where the server ran most).
    """
    if dialect is Dialect.VLLM:
        return vllm_setting(k_running, per_batch)
    k = dict(per_batch).get(main_batch, k_running)
    if dialect is Dialect.SGLANG:
        return sglang_setting(k, k_running)
    if dialect is Dialect.LLAMACPP:
        return llamacpp_setting(k, k_running)
    return f"{k} draft tokens per step" if k > 0 else "turn speculation off"


__all__ = [
    "engine_setting",
    "llamacpp_setting",
    "ranges",
    "sglang_setting",
    "vllm_setting",
]
