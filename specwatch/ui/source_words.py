"""The ``m`` view's words: each figure under the name the screen gives it, then where it is read
from, and where the GPU figures come from (the window's sources use the model's field names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuInventory
    from specwatch.core.server import MetricsWindow, ServerInfo

SCREEN_NAMES: dict[str, str] = {
    "gen_tok_s": "tok/s (generated)",
    "prompt_tok_s": "prompt tok/s",
    "accept_length": "accept len",
    "draft_acceptance_rate": "acceptance",
    "spec_accepted_per_pos": "per pos",
    "spec_drafts": "drafts",
    "step_latency_s": "step (verify latency)",
    "itl_s": "ITL (inter-token latency)",
    "ttft_s": "TTFT",
    "requests_running": "running",
    "requests_waiting": "waiting",
    "requests_per_s": "req/s",
    "kv_cache_usage": "KV cache",
    "largest_context": "max ctx (the largest request's prompt + generated tokens)",
    "decode_steps": "decode steps",
    "tokens_per_step": "tok/step",
    "tokens": "tokens",
}
"""The screen's name of each window figure (the panes' labels)."""


def screen_name(key: str) -> str:
    """The name the screen gives window figure ``key`` (``latency_buckets.step``: its buckets)."""
    head, _, tail = key.partition(".")
    if head == "latency_buckets" and tail:
        return f"{SCREEN_NAMES.get(tail + '_latency_s', tail)} buckets"
    return SCREEN_NAMES.get(key, key.replace("_", " "))


def gpu_source_words(inventory: GpuInventory | None) -> str:
    """Where the GPU pane's figures come from, in one line."""
    if inventory is None:
        return "GPU figures: not read yet"
    if not inventory.available:
        return f"GPU figures: none ({inventory.reason or 'no GPUs'})"
    origin = inventory.origin
    if origin is None:
        return "GPU figures: NVML on this machine"
    nodes = sorted({n for n in origin.nodes if n})
    where = f" on {', '.join(nodes)}" if nodes else ""
    return f"GPU figures: {origin.source}{where}"


def sources_text(
    window: MetricsWindow | None, inventory: GpuInventory | None, server: ServerInfo | None = None
) -> str:
    """The ``m`` view's body; ``server``: why its figures are read from its metrics alone
    (:attr:`~ServerInfo.keyless`), and which model of a router (:attr:`~ServerInfo.routed`)."""
    lines = [gpu_source_words(inventory), ""]
    if server is not None and server.keyless:
        lines += [f"server figures: /metrics only: {server.keyless}", ""]
    if server is not None and server.routed:
        lines += [f"server figures: {server.routed}", ""]
    if window is None:
        return "\n".join([*lines, "no /metrics window yet"])
    lines += [f"{screen_name(k)}: {v}" for k, v in sorted(window.sources.items())]
    notes = sorted(window.notes.items())
    if notes:
        lines += ["", "notes:", *(f"{screen_name(k)}: {v}" for k, v in notes)]
    return "\n".join(lines)


__all__ = ["SCREEN_NAMES", "gpu_source_words", "screen_name", "sources_text"]
