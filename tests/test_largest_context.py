"""The largest context from each server's own metrics (issue 21, vllmstat's list): SGLang's
optional per-request token histograms (``--collect-tokens-histogram``) bound it as vLLM's do;
without them there is no figure rather than a guess."""

from __future__ import annotations

from specwatch.core.server import Dialect, LatencyBucket, ServerInfo, SpecConfig
from specwatch.sources.dialects.base import WindowBuilder
from specwatch.sources.dialects.sglang import derive_sglang
from specwatch.sources.metrics.parse import parse_metrics

LABELS = 'model_name="m",engine_type="unified"'
INFO = ServerInfo(
    base_url="http://127.0.0.1:30000",
    dialect=Dialect.SGLANG,
    version="0.5.23",
    model="m",
    spec=SpecConfig(enabled=False),
    metrics_enabled=True,
)


def _hist(name: str, counts: dict[str, int]) -> str:
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{LABELS},le="{le}"}} {c}' for le, c in counts.items()]
    top = list(counts.values())[-1]
    lines += [f"{name}_sum{{{LABELS}}} 1", f"{name}_count{{{LABELS}}} {top}"]
    return "\n".join(lines)


def _derive(text: str) -> WindowBuilder:
    b = WindowBuilder()
    derive_sglang(b, parse_metrics(text + "\n"), None, 0.0, INFO)
    return b


def test_sglang_token_histograms_bound_the_largest_context() -> None:
    prompt = _hist("sglang:prompt_tokens_histogram", {"256": 3, "1024": 7, "4096": 9, "+Inf": 9})
    gen = _hist("sglang:generation_tokens_histogram", {"128": 2, "256": 5, "1024": 5, "+Inf": 5})
    b = _derive(f"{prompt}\n{gen}")
    # the top occupied buckets: prompt (1024, 4096], generation (128, 256]
    assert b.values["largest_context"] == LatencyBucket(1.0, 1024.0, 4352.0)
    assert "sglang:prompt_tokens_histogram" in b.sources["largest_context"]


def test_past_the_last_bucket_is_unbounded_and_without_histograms_nothing() -> None:
    prompt = _hist("sglang:prompt_tokens_histogram", {"256": 1, "1024": 1, "+Inf": 2})
    gen = _hist("sglang:generation_tokens_histogram", {"128": 2, "+Inf": 2})
    ctx = _derive(f"{prompt}\n{gen}").values["largest_context"]
    assert (ctx.low, ctx.high) == (1024.0, float("inf"))
    running = f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{LABELS}}} 3"
    assert "largest_context" not in _derive(running).values
