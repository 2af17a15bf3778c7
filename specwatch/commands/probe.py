"""The ``specwatch probe`` subcommand: arguments and the entry point the CLI calls."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import orjson

from specwatch.commands.arguments import (
    add_dcgm_argument,
    add_fleet_arguments,
    add_server_arguments,
    add_slo_arguments,
    say_error,
    shared_help,
    slo_of,
)
from specwatch.sources.http.endpoint import parse_endpoint

if TYPE_CHECKING:
    from specwatch.core.goodput import Slo
    from specwatch.core.gpu import GpuInventory
    from specwatch.core.server import MetricsWindow, StreamResult
    from specwatch.session.fleet_probe import FleetOptions
    from specwatch.sources.probe import ProbeResult


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch probe``."""
    add_server_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--max-tokens", type=int, default=256, help=shared_help("--max-tokens", 256))
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help=shared_help("--timeout", 30),
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="S",
        help=shared_help("--wait", "no wait"),
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="S",
        help=shared_help("--deadline", 60),
    )
    # no default here: the probe module (httpx and the dialects) loads only when a probe runs
    p.add_argument(
        "--prompt", default=None, help="the prompt to stream (default: a question about hash maps)"
    )
    p.add_argument("--no-gpu", action="store_true", help=shared_help("--no-gpu"))
    p.add_argument(
        "--passive",
        nargs="?",
        type=float,
        const=1.0,
        default=None,
        metavar="S",
        help="send no completion: read the server's own figures over S seconds (default: 1)",
    )
    p.add_argument(
        "--stream",
        action="store_true",
        help="fleet: also stream one completion per server (default: passive, none sent)",
    )
    add_slo_arguments(p)
    add_fleet_arguments(p)
    add_dcgm_argument(p)


def run_probe(args: argparse.Namespace) -> int:
    """Run one probe; print the report (or JSON) on stdout.

    Returns:
        0 when all went well, 1 when the server cannot be reached (or is not ready), 2 for bad
        arguments, 3 when the server was reached but the stream failed.
    """
    import asyncio

    from specwatch.session.fleet_probe import fleet_options

    fleet = fleet_options(args, timeout_s=min(args.timeout, 10.0))
    if fleet.is_fleet:
        return _run_fleet_probe(args, fleet)
    # imported only now: a fleet probe has no use for them (60 ms of its start-up)
    from specwatch.sources.probe import (
        DEFAULT_PROMPT,
        EXIT_USAGE,
        probe,
        probe_to_dict,
    )

    if not fleet.urls:
        print("specwatch probe: give --url URL (or --prometheus URL)", file=sys.stderr)
        return EXIT_USAGE
    from specwatch.sources.dcgm.parse import dcgm_url

    try:
        endpoint = parse_endpoint(fleet.urls[-1], getattr(args, "api_key", None))
        for spec in fleet.dcgm:  # a bad exporter address is said now, not as a traceback later
            dcgm_url(spec)
    except ValueError as exc:
        say_error("specwatch probe", exc)
        return EXIT_USAGE
    if args.max_tokens < 1:
        print("specwatch probe: --max-tokens must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.timeout <= 0:
        print("specwatch probe: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    passive = getattr(args, "passive", None)
    if passive is not None and not 0 < passive <= 600:
        print("specwatch probe: --passive takes 0 < S <= 600 seconds", file=sys.stderr)
        return EXIT_USAGE
    deadline = getattr(args, "deadline", None)
    if deadline is not None and not deadline > 0:
        print("specwatch probe: --deadline must be positive", file=sys.stderr)
        return EXIT_USAGE

    slo = slo_of(args)

    def status(line: str) -> None:
        say_error("specwatch probe", line)

    result = asyncio.run(
        probe(
            endpoint,
            max_tokens=args.max_tokens,
            timeout_s=args.timeout,
            wait_s=max(0.0, args.wait),
            prompt=DEFAULT_PROMPT if args.prompt is None else args.prompt,
            dcgm=tuple(getattr(args, "dcgm", None) or ()),
            read_gpus=not getattr(args, "no_gpu", False),
            on_status=status,
            passive_s=passive,
            **({} if deadline is None else {"deadline_s": deadline}),
        )
    )
    if args.json:
        from specwatch.session.verdict_report import probe_verdict_json

        doc = probe_to_dict(result, probe_verdict_json(result), slo)
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        print(render_text(result, slo))
    if result.error and not args.json:
        say_error("specwatch probe", result.error)
    return result.exit_code


def _run_fleet_probe(args: argparse.Namespace, fleet: FleetOptions) -> int:
    """Probe a fleet (passive unless ``--stream``); 0 when every server was read."""
    import asyncio

    from specwatch.session.fleet_probe import fleet_probe, fleet_text

    try:
        doc = asyncio.run(
            fleet_probe(
                fleet,
                stream=args.stream,
                max_tokens=args.max_tokens,
                prompt=args.prompt,
                gpu_entries=bool(args.json),
            )
        )
    except ValueError as exc:
        say_error("specwatch probe", exc)
        return 2
    if args.json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(fleet_text(doc))
    return 0 if doc["ok"] else 1


# --- the readable report ---------------------------------------------------------------------


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


def _stream_spec(stream: StreamResult) -> str:
    """The stream's accept length and acceptance, or that they are the window's where not every
    step drafted (:func:`~specwatch.sources.probe.stream_checked`)."""
    from specwatch.sources.probe import NOT_EVERY_STEP

    length = stream.notes.get("accept_length", "").startswith(NOT_EVERY_STEP)
    rate = stream.notes.get("draft_acceptance_rate", "").startswith(NOT_EVERY_STEP)
    if length and rate:
        return f"{NOT_EVERY_STEP}: the accept length and acceptance are the window's"
    accept = f"accept length {_f(stream.accept_length, '.2f')}"
    acceptance = f"draft acceptance {_f(stream.draft_acceptance_rate, '.1%')}"
    if length:
        accept = "accept length: the window's"
    if rate:
        acceptance = "draft acceptance: the window's"
    tail = f" ({NOT_EVERY_STEP})" if length or rate else ""
    return f"{accept} · {acceptance}{tail}"


def render_text(result: ProbeResult, slo: Slo | None = None) -> str:
    """``probe``'s default output, a short readable report (``--json`` prints
    :func:`~specwatch.sources.probe.probe_to_dict` instead); ``slo``: goodput's objectives
    (``None``: the defaults)."""
    from specwatch.core.config_health import config_health, kv_words
    from specwatch.core.goodput import DEFAULT_SLO, histogram_goodput
    from specwatch.core.gpu import short_names
    from specwatch.core.sanitize import sanitize_line
    from specwatch.sources.identity.process import code_summary
    from specwatch.sources.probe import health_window

    slo = DEFAULT_SLO if slo is None else slo
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
        if info.keyless:
            lines.append(f"  key      metrics only: {info.keyless}")
        if info.routed:
            lines.append(f"  router   {info.routed.removeprefix('a llama-server router: ')}")
        lines.append(f"  code     {code_summary(result.identity)}")
    stream = result.stream
    if stream is not None and stream.error and not stream.completion_tokens:
        lines.append(f"  stream   failed: {stream.error}")
    elif stream is not None:
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
        lines.append(f"           {_stream_spec(stream)}")
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
        for finding in config_health(info, health_window(window, stream)):
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


__all__ = ["add_probe_arguments", "render_text", "run_probe"]
