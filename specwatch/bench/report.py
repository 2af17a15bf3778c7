"""The benchmark's results and a comparison, as plain text lines: one report for every front end.

``specwatch bench`` and ``specwatch compare`` print these lines; the TUI shows the same lines
in its modals. Plain strings only (no rich, no textual), so the headless commands stay light.
Every string that comes from a snapshot or a server (label, version, model, arguments, code
identity, environment values, error text) goes through :mod:`specwatch.core.sanitize` here, so a
hostile one is shown as ``\x1b]0;…`` instead of retitling or wiping the terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specwatch.core import gpu as rules
from specwatch.core.sanitize import sanitize_line

if TYPE_CHECKING:
    from specwatch.core.compare import Comparison
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.snapshot_records import BenchResult, Snapshot
    from specwatch.core.stats import Summary

DIFFERS = "*"
"""The mark of a comparison row whose values differ."""
CELL_WIDTH = 40
"""Widest table cell (``--json`` has the full values)."""
LINE_LIMIT = 2000
"""Longest printed line; longer ones end in an ellipsis."""


def safe(text: object, limit: int = LINE_LIMIT) -> str:
    """One line of outside text made safe for a terminal (``specwatch.core.sanitize``)."""
    return sanitize_line(str(text), limit)


def safe_lines(lines: Sequence[str]) -> list[str]:
    """Each line made safe (idempotent: clean lines come back unchanged)."""
    return [safe(line) for line in lines]


def _fmt_summary(
    s: Summary, unit: str, scale: float = 1.0, spec: str = ".1f", ci: bool = True
) -> str:
    if s.mean is None:
        return "—"
    parts = [f"{s.mean * scale:{spec}}{unit}"]
    if s.std is not None:
        parts.append(f"std {s.std * scale:{spec}}")
    if s.min is not None and s.max is not None and s.n > 1:
        parts.append(f"min {s.min * scale:{spec}}, max {s.max * scale:{spec}}")
    if ci and s.ci_low is not None and s.ci_high is not None:
        parts.append(f"95% CI {s.ci_low * scale:{spec}} to {s.ci_high * scale:{spec}}")
    return parts[0] + (f" ({'; '.join(parts[1:])})" if len(parts) > 1 else "")


def results_lines(result: BenchResult) -> list[str]:
    """The results block printed after the runs (it starts with an empty line)."""
    o = result.overall
    lines = ["", "  ========== Results =========="]
    lines.append(f"  Overall: {_fmt_summary(o.tok_s, ' tok/s')}, {o.runs} runs")
    # with several streams a run's tok/s is theirs together, its decode speed one stream's
    each = ", per stream" if any(r.streams > 1 for r in result.runs) else ""
    lines.append(f"  Decode (without TTFT{each}): {_fmt_summary(o.decode_tok_s, ' tok/s')}")
    # Latencies are skewed and positive: a symmetric t interval would reach below zero.
    lines.append(f"  TTFT: {_fmt_summary(o.ttft_s, ' ms', 1000.0, '.0f', ci=False)}")
    lines.append(f"  Goodput: {result.goodput.words()}")
    step = _fmt_summary(o.step_latency_s, " ms", 1000.0, ".2f", ci=False)
    lines.append(f"  Step latency: {step}")
    if o.tokens_per_step.mean is not None:
        accept = o.accept_length.mean
        extra = f", accept length {accept:.2f}" if accept is not None else ""
        lines.append(f"  Tokens per step: {o.tokens_per_step.mean:.2f}{extra}")
    counters = [r.server_accept_length for r in result.runs if r.server_accept_length is not None]
    if counters:
        lines.append(
            f"  Server counters: accept length {sum(counters) / len(counters):.2f} over the runs"
        )
    lines.extend(_gpu_lines(result))
    if result.interrupted:
        lines.append(f"  Interrupted: {len(result.runs)} of {result.config.runs} runs kept")
    if result.error:
        lines.append(f"  Error: {result.error}")
    return safe_lines(lines)


def code_lines(identity: ServerIdentity | None) -> list[str]:
    """One line naming the code the server runs (package, commit, NCCL, torch), or why not."""
    if identity is None:
        return []
    if identity.pid is None:
        why = "; ".join(identity.notes) or "the server process was not found"
        return [safe(f"  Server code: not read ({why})")]
    from specwatch.sources.identity.process import code_parts

    parts = code_parts(identity)
    lines = [f"  Server code: {', '.join(parts) or 'unknown'} (process {identity.pid})"]
    lines += [f"  warning: {w}" for w in identity.warnings]
    return safe_lines(lines)


def _gpu_lines(result: BenchResult) -> list[str]:
    inv = result.inventory
    if inv is None:
        return ["  GPUs: not read (--no-gpu)"]
    if not inv.available:
        return [f"  GPUs: {inv.reason or 'unavailable'}"]
    busy = rules.busy_summaries(result.gpus)
    pace = rules.slowest(rules.pace_of_summaries(busy))
    if pace is None:
        return ["  GPUs: no readings during the runs"]
    slow = next(g for g in busy if g.index == pace.index)
    temps = [g.temp_max_c for g in busy if g.temp_max_c is not None]
    names = sorted({n for g in busy for n in g.reason_fractions if n not in rules.IDLE_REASONS})
    worst = {n: max(g.reason_fractions.get(n, 0.0) for g in busy) for n in names}
    reasons = ", ".join(f"{n} {f:.0%}" for n, f in worst.items() if f > 0)
    top = f" of {slow.board_max_sm_clock_mhz}" if slow.board_max_sm_clock_mhz else ""
    line = (
        f"  GPUs: slowest GPU {slow.index} at {pace.sm_clock_mhz:.0f}{top} MHz mean"
        f" (min {slow.sm_clock_min_mhz} MHz)"
    )
    if temps:
        line += f", max {max(temps)} °C"
    if reasons:
        line += f", clock events: {reasons}"
    return [line, energy_line(result)]


def energy_line(result: BenchResult) -> str:
    """``  Energy: 41.2 kJ over the runs, 2.91 tok/J · 0.344 J/tok · …``, or why unknown."""
    from specwatch.core.energy import draft_length, run_energy

    energy = run_energy(
        rules.busy_summaries(result.gpus),
        sum(r.wall_s for r in result.runs),
        result.overall.accept_length.mean,
        draft_length(result.server.spec),
    )
    if energy.joules is None or energy.tokens_per_joule is None:
        return f"  Energy: {energy.words()}"
    return f"  Energy: {energy.joules / 1000:.3g} kJ over the runs, {energy.words()}"


def run_lines(result: BenchResult) -> list[str]:
    """One progress line per warmup and measured run, as the runs printed them."""
    lines = [r.progress_line(result.config.warmup) for r in result.warmups]
    lines += [r.progress_line(result.config.runs) for r in result.runs]
    return lines


def describe(snap: Snapshot) -> str:
    """One line naming a snapshot: when, label, server, interrupted."""
    parts = [snap.created]
    if snap.label:
        parts.append(snap.label)
    parts.append(f"{snap.server.dialect or '?'} {snap.server.version or ''}".strip())
    if snap.interrupted:
        parts.append("interrupted")
    return safe(", ".join(parts))


def no_finished_run(name: str) -> str:
    """Why a snapshot cannot be compared: it holds no measured run with a tok/s figure."""
    return f"cannot compare: {name} has no finished run"


def short_names(a: str, b: str) -> tuple[str, str]:
    """Column headers for two snapshot names: what tells them apart, not their shared prefix."""
    stems = [n.removesuffix(".json") for n in (a, b)]
    if stems[0] == stems[1]:
        return a, b
    common = next(
        (i for i, (x, y) in enumerate(zip(*stems, strict=False)) if x != y),
        min(map(len, stems)),
    )
    # Back up to a separator so "…-20261129T210500Z" keeps its whole timestamp.
    cut = max(stems[0].rfind("-", 0, common + 1), stems[0].rfind("_", 0, common + 1)) + 1
    # A recording's range (``night.sqlite@-2h/-1h55m``) keeps its whole range, sign included.
    at = stems[0].find("@")
    if 0 <= at < cut and stems[1].find("@") == at:
        cut = at + 1
    return stems[0][cut:] or a, stems[1][cut:] or b


def _cell(text: str) -> str:
    return sanitize_line(text, CELL_WIDTH)


def comparison_lines(c: Comparison, a: Snapshot, b: Snapshot, show_all: bool = False) -> list[str]:
    """The side-by-side table, the numbers behind the verdict, and the verdict."""
    lines = [f"A: {safe(c.a_name)} ({describe(a)})", f"B: {safe(c.b_name)} ({describe(b)})", ""]
    rows = [
        dataclasses.replace(r, name=_cell(r.name), a=_cell(r.a), b=_cell(r.b))
        for r in c.rows
        if show_all or r.key or r.differs
    ]
    head_a, head_b = short_names(safe(c.a_name), safe(c.b_name))
    if head_a == head_b:
        head_a, head_b = "A", "B"
    head_a, head_b = _cell(head_a), _cell(head_b)
    name_w = max([len(r.name) for r in rows] + [10])
    a_w = max([len(r.a) for r in rows] + [len(head_a)])
    b_w = max([len(r.b) for r in rows] + [len(head_b)])
    lines.append(f"  {'':<{name_w}}  {head_a:>{a_w}}  {head_b:>{b_w}}")
    section = None
    for r in rows:
        if r.section != section:
            section = r.section
            lines.append(f"  [{section}]")
        mark = f"  {DIFFERS}" if r.differs else ""
        lines.append(f"  {r.name:<{name_w}}  {r.a:>{a_w}}  {r.b:>{b_w}}{mark}")
    lines.append(f"  ({DIFFERS} differs)")
    lines.append("")
    att = c.attribution
    if c.change is not None:
        ci = (
            f" (95% CI {c.change_low * 100:+.1f}% to {c.change_high * 100:+.1f}%)"
            if c.change_low is not None and c.change_high is not None
            else ""
        )
        noise = "beyond noise" if c.beyond_noise else "within noise"
        lines.append(f"tok/s change: {c.change * 100:+.1f}%{ci}, {noise}")
    if att.expected_ratio is not None and att.observed_ratio is not None:
        lines.append(
            f"if decode followed the slowest GPU's SM clock: expected ratio "
            f"{att.expected_ratio:.3f}, observed {att.observed_ratio:.3f}"
        )
    for note in c.notes:
        lines.append(f"note: {note}")
    lines.append(f"Verdict: {c.wording}")
    lines.append(f"  ({c.reason})")
    return safe_lines(lines)


__all__: Sequence[str] = [
    "CELL_WIDTH",
    "DIFFERS",
    "code_lines",
    "comparison_lines",
    "describe",
    "no_finished_run",
    "results_lines",
    "run_lines",
    "safe",
    "safe_lines",
    "short_names",
]
