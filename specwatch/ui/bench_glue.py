"""The benchmark's result and the comparison, as the TUI shows them.

The benchmark itself runs in the live session (``specwatch.session.bench_job``); this module
only turns what it measured into text, and compares the two newest snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specwatch.bench.runner import BenchResult
    from specwatch.core.compare import Comparison


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "–" if v is None else format(v, spec)


def result_text(result: BenchResult) -> str:
    """The benchmark's runs and overall figures, as ``specwatch bench`` prints them."""
    lines = [r.progress_line(result.config.warmup) for r in result.warmups]
    lines += [r.progress_line(result.config.runs) for r in result.runs]
    o = result.overall
    t = o.tok_s
    lines.append("")
    lines.append(
        f"tok/s  mean {_fmt(t.mean)}  std {_fmt(t.std, '.2f')}  min {_fmt(t.min)}  "
        f"max {_fmt(t.max)}  95% CI {_fmt(t.ci_low)}–{_fmt(t.ci_high)}  (n={t.n})"
    )
    lines.append(
        f"decode tok/s {_fmt(o.decode_tok_s.mean)}  TTFT {_fmt(_ms(o.ttft_s.mean))} ms  "
        f"step {_fmt(_ms(o.step_latency_s.mean))} ms  "
        f"tokens/step {_fmt(o.tokens_per_step.mean, '.2f')}"
    )
    for g in result.gpus:
        lines.append(
            f"GPU{g.index}: SM {_fmt(g.sm_clock_mean_mhz, '.0f')} MHz mean "
            f"(min {_fmt(g.sm_clock_min_mhz, '.0f')}), max {_fmt(g.temp_max_c, '.0f')}°C, "
            f"{_fmt(g.power_mean_w, '.0f')} W"
        )
    if result.interrupted:
        lines.append("\ninterrupted: the finished runs are kept")
    if result.error:
        lines.append(f"\nerror: {result.error}")
    return "\n".join(lines)


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def latest_snapshots(directory: Path, n: int = 2) -> list[Path]:
    """The ``n`` newest ``*.json`` files in ``directory``, oldest first."""
    try:
        files = [p for p in directory.glob("*.json") if p.is_file()]
    except OSError:
        return []
    files.sort(key=lambda p: (p.stat().st_mtime, p.name))
    return files[-n:]


def _short_names(a: str, b: str) -> tuple[str, str]:
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
    return stems[0][cut:] or a, stems[1][cut:] or b


def comparison_text(c: Comparison) -> str:
    """The comparison as text: verdict, the tok/s change, attribution, what differs."""
    lines = [c.verdict, c.reason, ""]
    a, b = c.tok_s_a, c.tok_s_b
    lines.append(
        f"tok/s  {c.a_name}: {_fmt(a.mean)} (n={a.n})   {c.b_name}: {_fmt(b.mean)} (n={b.n})"
    )
    if c.change is not None:
        ci = ""
        if c.change_low is not None and c.change_high is not None:
            ci = f"  95% CI {c.change_low * 100:+.1f}% … {c.change_high * 100:+.1f}%"
        noise = "beyond noise" if c.beyond_noise else "within noise"
        lines.append(f"change {c.change * 100:+.1f}%{ci}  ({noise})")
    at = c.attribution
    if at.expected_ratio is not None and at.observed_ratio is not None:
        lines.append(
            f"clock-predicted ratio {at.expected_ratio:.3f}  observed {at.observed_ratio:.3f}"
        )
    lines.append("")
    rows = [r for r in c.rows if r.differs or r.key]
    if rows:
        a_name, b_name = _short_names(c.a_name, c.b_name)
        w0 = max(len(r.name) for r in rows)
        w1 = max(len(a_name), *(len(r.a) for r in rows))
        lines.append(f"{'':<{w0}}  {a_name:<{w1}}  {b_name}")
        section = ""
        for r in rows:
            if r.section != section:
                section = r.section
                lines.append(f"[{section}]")
            flag = "≠" if r.differs else " "
            lines.append(f"{r.name:<{w0}}  {r.a:<{w1}}  {r.b} {flag}")
    lines += [f"note: {n}" for n in c.notes]
    return "\n".join(lines)


def compare_latest(directory: Path) -> tuple[str, str]:
    """Compare the two newest snapshots in ``directory``: (title, text). Never raises."""
    files = latest_snapshots(directory)
    if len(files) < 2:
        return (
            "compare snapshots",
            f"need two snapshots in {directory} (found {len(files)}); press b to benchmark",
        )
    try:
        from specwatch.bench.snapshot import read_snapshot
        from specwatch.core.compare import compare

        a: Mapping[str, Any] = read_snapshot(files[0])
        b: Mapping[str, Any] = read_snapshot(files[1])
        c = compare(a, b, a_name=files[0].name, b_name=files[1].name)
    except Exception as e:  # a malformed snapshot: one clear line instead of a crash
        return ("compare snapshots", f"cannot compare {files[0].name} and {files[1].name}: {e}")
    return (f"compare: {c.verdict}", comparison_text(c))


__all__: Sequence[str] = ["compare_latest", "comparison_text", "result_text"]
