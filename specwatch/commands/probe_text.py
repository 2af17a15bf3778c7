"""The short readable report of a :class:`~specwatch.sources.probe.ProbeResult` (``probe``'s
default output; ``--json`` prints :func:`~specwatch.sources.probe.probe_to_dict` instead)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specwatch.core.config_health import config_health, kv_words
from specwatch.core.goodput import DEFAULT_SLO, Slo, histogram_goodput
from specwatch.core.gpu import GpuInventory, short_names
from specwatch.core.sanitize import sanitize_line
from specwatch.sources.identity.server_identity import code_summary

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow
    from specwatch.sources.probe import ProbeResult


def _f(value: float | None, fmt: str, scale: float = 1.0, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value * scale:{fmt}}{unit}"


def _per_step(window: MetricsWindow) -> str:
    """The tokens a step yields, where steps that drafted nothing bring them below the accept
    length."""
    per_step, length = window.tokens_per_step, window.accept_length
    if per_step is None or length is None or abs(per_step - length) < 0.005:
        return ""
    return f" ({per_step:.2f} a step, drafted or not)"


def render_text(result: ProbeResult, slo: Slo = DEFAULT_SLO) -> str:
    """A short human-readable report."""
    lines = [f"specwatch probe  {result.base_url}"]
    info = result.info
    if info is None:
        lines.append(f"  server   {result.problem}: {result.error}")
    else:
        spec = info.spec
        lines.append(
            f"  server   {info.dialect.value} {info.version or '(version unknown)'}"
            f"  model {info.model or '?'}"
            + (f"  max len {info.max_model_len}" if info.max_model_len else "")
        )
        if spec.enabled:
            parts = [spec.algorithm or "on"]
            if spec.num_steps is not None:
                parts.append(f"steps {spec.num_steps}")
            if spec.num_draft_tokens is not None:
                parts.append(f"draft tokens {spec.num_draft_tokens}")
            if spec.topk is not None:
                parts.append(f"topk {spec.topk}")
            lines.append(f"  spec     {' · '.join(parts)}  (from {spec.source or '?'})")
        elif spec.enabled is False:
            lines.append(f"  spec     off  (from {spec.source or '?'})")
        else:
            lines.append(f"  spec     unknown  ({info.notes.get('speculative', 'not exposed')})")
        lines.append(
            "  metrics  on" if info.metrics_enabled else f"  metrics  off: {info.metrics_reason}"
        )
        lines.append(f"  code     {code_summary(result.identity)}")
    stream = result.stream
    if stream is not None:
        exact = "" if stream.counts_exact else " (estimated)"
        lines.append(
            f"  stream   {stream.completion_tokens} tokens{exact} in {stream.wall_s:.2f} s"
            f" · TTFT {_f(stream.ttft_s, '.1f', 1e3, ' ms')}"
            f" · decode {_f(stream.decode_tok_s, '.1f', unit=' tok/s')}"
            f" · overall {_f(stream.tok_s, '.1f', unit=' tok/s')}"
        )
        lines.append(
            f"           steps {stream.steps if stream.steps is not None else 'n/a'}"
            f" · {_f(stream.tokens_per_step, '.2f')} tok/step"
            f" · step mean {_f(stream.step_latency_mean_s, '.2f', 1e3, ' ms')}"
            f" p50 {_f(stream.step_latency_p50_s, '.2f', 1e3)}"
            f" p90 {_f(stream.step_latency_p90_s, '.2f', 1e3)}"
            f" p99 {_f(stream.step_latency_p99_s, '.2f', 1e3)}"
        )
        lines.append(
            f"           accept length {_f(stream.accept_length, '.2f')}"
            f" · draft acceptance {_f(stream.draft_acceptance_rate, '.1%')}"
        )
        if stream.error:
            lines.append(f"  error    {stream.error}")
    elif result.passive and result.info is not None:
        lines.append("  stream   none sent (--passive): the server's own figures only")
    window = result.window
    if window is not None and (window.dt > 0 or window.notes):
        if window.dt > 0:
            lines.append(
                f"  window   {window.dt:.2f} s · gen {_f(window.gen_tok_s, '.1f', unit=' tok/s')}"
                f" · accept length {_f(window.accept_length, '.2f')}{_per_step(window)}"
                f" · acceptance {_f(window.draft_acceptance_rate, '.1%')}"
                f" · step {_f(window.step_latency_s, '.2f', 1e3, ' ms')}"
                f" · running {_f(window.requests_running, '.0f')}"
                f" waiting {_f(window.requests_waiting, '.0f')}"
            )
        for key in ("error", "metrics", "restart", "counters"):
            if key in window.notes:
                lines.append(f"           {window.notes[key]}")
        kv = kv_words(window)
        if kv is not None:
            lines.append(f"  kv       {kv} ({_f(window.kv_cache_usage, '.0%')} used)")
        for finding in config_health(info, window):
            if finding.fires:
                lines.append(f"  health   {finding.text()}")
        if window.latency_cdf:
            lines.append(f"  goodput  {histogram_goodput(window.latency_cdf, slo).words()}")
    inventory = result.inventory
    if inventory is None:
        lines.append("  gpus     not read")
    elif not inventory.available:
        lines.append(f"  gpus     none: {inventory.reason}")
    else:
        samples = {s.index: s for s in (result.tick.samples if result.tick else ())}
        for static in inventory.gpus:
            s = samples.get(static.index)
            if s is None:
                lines.append(f"  gpu {static.index}    {static.name}: no sample")
                continue
            reasons = short_names(s.clock_event_reasons) if s.clock_event_reasons else "none"
            temp = s.temp_c if s.temp_c is not None else "?"
            lines.append(
                f"  gpu {static.index}    {static.name or '?'} · SM {s.sm_clock_mhz or '?'}"
                f"/{static.max_sm_clock_mhz or '?'} MHz · {temp} °C"
                f" · {_f(s.power_w, '.0f')}/{_f(static.power_limit_w, '.0f')} W"
                f" · reasons {reasons}" + (" · LOST" if s.lost else "") + _node(inventory, s.index)
            )
        if result.tick is not None and result.tick.error:
            lines.append(f"  gpus     {sanitize_line(result.tick.error, 300)}")
    return "\n".join(lines)


def _node(inventory: GpuInventory, index: int) -> str:
    origin = inventory.origin
    if origin is None or index >= len(origin.nodes):
        return ""
    return f" · on {origin.nodes[index]} ({origin.source})"


__all__ = ["render_text"]
