"""Compare two benchmark snapshots: did tok/s change, what differs, and is it the GPUs or the code?

The verdict rule, in three steps:

1. **Change beyond noise.** Welch's t-test on the per-run tok/s of A and B gives a 95% confidence
   interval for ``mean(B) − mean(A)``. The change is beyond noise when that interval excludes 0
   *and* the relative change is at least ``min_change`` (2%): with very steady runs a 0.3%
   difference can be statistically real and still not worth anyone's afternoon. Otherwise the
   verdict is ``"no significant change"``.
2. **What the clocks predict.** If decode speed followed the SM clock, tok/s would scale by
   ``expected = clock(B) / clock(A)``, where ``clock`` is the mean SM clock of the *straggler*
   GPU (the busy GPU with the lowest mean clock) over the runs.
3. **Attribution.** The change is ``"explained by GPU state"`` when the clock ratio moves in the
   same direction as tok/s and accounts for at least ``min_share`` (75%) of the observed change
   in log terms (``ln expected / ln observed``), or when ``expected`` lies inside the 95%
   interval of the observed ratio. A clock change *larger* than the tok/s change still counts
   as explained: decode is partly memory-bound, so tok/s moves less than the SM clock.
   Otherwise: ``"not explained by GPU state: look at code or configuration"``. When the
   snapshots hold no clock readings to explain anything with: ``"GPU state unknown"``.

The verdicts, their wording and exit codes are :class:`specwatch.core.outcomes.Outcome`; which
GPUs count as busy and which one is the straggler is :mod:`specwatch.core.gpu_rules`.
Everything here is pure: validated :class:`~specwatch.core.snapshot_records.Snapshot` objects
in, a :class:`Comparison` out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specwatch.core import gpu_rules
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.outcomes import Outcome
from specwatch.core.snapshot_records import Figure, Snapshot
from specwatch.core.stats import Summary, Welch, mean, summarize, welch

VERDICT_GPU = Outcome.GPU
VERDICT_CODE = Outcome.CODE
VERDICT_NONE = Outcome.NO_CHANGE
VERDICT_UNKNOWN = Outcome.UNKNOWN
VERDICTS = tuple(Outcome)

MIN_CHANGE = 0.02
"""Smallest relative tok/s change that counts, however tight the confidence interval."""
MIN_SHARE = 0.75
"""Share of the observed change (log terms) the clock change must account for."""
_IDLE_REASONS = gpu_rules.IDLE_REASONS


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the side-by-side table."""

    section: str
    """``"result"``, ``"gpu"``, ``"environment"``, ``"server"`` or ``"config"``."""
    name: str
    a: str
    b: str
    differs: bool
    key: bool = False
    """Always shown, even when equal (the rows the verdict rests on)."""
    a_value: Any = None
    b_value: Any = None


@dataclass(frozen=True, slots=True)
class Attribution:
    """Clock-predicted against observed tok/s ratio."""

    clock_a_mhz: float | None
    clock_b_mhz: float | None
    straggler_a: int | None
    """Index of the GPU that was most often the straggler in A (``gpu_rules.straggler``)."""
    straggler_b: int | None
    expected_ratio: float | None
    """``clock_b / clock_a``: the tok/s ratio if decode followed the SM clock."""
    observed_ratio: float | None
    """``mean tok/s B / mean tok/s A``."""
    observed_ratio_low: float | None
    observed_ratio_high: float | None
    share: float | None
    """``ln expected / ln observed``: 1.0 means the clocks account for all of the change."""
    explained: bool


@dataclass(frozen=True, slots=True)
class Comparison:
    """The answer to "is it the GPUs or the code?"."""

    a_name: str
    b_name: str
    tok_s_a: Summary
    tok_s_b: Summary
    welch: Welch | None
    change: float | None
    """Relative change of mean tok/s, ``B / A − 1``."""
    change_low: float | None
    """Lower end of the 95% interval of the relative change (Welch interval / mean A)."""
    change_high: float | None
    beyond_noise: bool
    attribution: Attribution
    verdict: Outcome
    reason: str
    """One sentence with the numbers behind the verdict."""
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (for ``--json``)."""
        w = self.welch
        return {
            "a": self.a_name,
            "b": self.b_name,
            "verdict": self.verdict.wording,
            "exit_code": self.verdict.exit_code,
            "reason": self.reason,
            "tok_s": {
                "a": _summary_dict(self.tok_s_a),
                "b": _summary_dict(self.tok_s_b),
                "change": self.change,
                "change_ci": [self.change_low, self.change_high],
                "beyond_noise": self.beyond_noise,
                "welch": None
                if w is None
                else {
                    "diff": w.diff,
                    "ci": [w.ci_low, w.ci_high],
                    "df": _finite(w.df),
                    "t": _finite(w.t),
                    "p_value": w.p_value,
                    "level": w.level,
                },
            },
            "attribution": {
                "clock_a_mhz": self.attribution.clock_a_mhz,
                "clock_b_mhz": self.attribution.clock_b_mhz,
                "straggler_a": self.attribution.straggler_a,
                "straggler_b": self.attribution.straggler_b,
                "expected_ratio": self.attribution.expected_ratio,
                "observed_ratio": self.attribution.observed_ratio,
                "observed_ratio_ci": [
                    self.attribution.observed_ratio_low,
                    self.attribution.observed_ratio_high,
                ],
                "share": self.attribution.share,
                "explained": self.attribution.explained,
            },
            "rows": [
                {
                    "section": r.section,
                    "name": r.name,
                    "a": r.a,
                    "b": r.b,
                    "differs": r.differs,
                    "a_value": r.a_value,
                    "b_value": r.b_value,
                }
                for r in self.rows
            ],
            "notes": list(self.notes),
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _summary_dict(s: Summary) -> dict[str, Any]:
    return {
        "n": s.n,
        "mean": s.mean,
        "std": s.std,
        "min": s.min,
        "max": s.max,
        "ci_low": s.ci_low,
        "ci_high": s.ci_high,
    }


# --- reading snapshots ----------------------------------------------------------------------


def run_tok_s(snap: Snapshot) -> list[float]:
    """Per-run tok/s of a snapshot (runs without a figure are skipped)."""
    return snap.run_tok_s


def straggler_clock(snap: Snapshot) -> tuple[float | None, int | None]:
    """Mean SM clock of the pace-setting GPU, weighted by run wall time, and the straggler.

    The clock is that of the slowest busy GPU of each run (``gpu_rules.slowest``: with one GPU,
    that GPU); the index is the GPU most often named straggler (``gpu_rules.straggler``, the
    rule the live pane marks), ``None`` when no run had one. Why the slowest GPU and not the
    mean: in tensor parallelism every step ends in an all-reduce, so each rank waits for the
    last one; the step runs at the pace of the slowest GPU, and one hot board drags the whole
    server down while the average looks healthy.
    """
    total, weight = 0.0, 0.0
    who: Counter[int] = Counter()
    for run in snap.runs:
        pace = gpu_rules.pace_of_summaries(run.gpus)
        slow = gpu_rules.slowest(pace)
        w = run.wall_s or 1.0
        if slow is None or w <= 0:
            continue
        total += slow.sm_clock_mhz * w
        weight += w
        lag = gpu_rules.straggler(pace)
        if lag is not None:
            who[lag] += 1
    if weight > 0:
        return total / weight, who.most_common(1)[0][0] if who else None
    pace = gpu_rules.pace_of_summaries(snap.overall_gpus)
    slow = gpu_rules.slowest(pace)
    if slow is not None:
        return slow.sm_clock_mhz, gpu_rules.straggler(pace)
    return None, None


def _overall_gpus(snap: Snapshot) -> list[GpuRunSummary]:
    gpus = gpu_rules.busy_summaries(snap.overall_gpus)
    if gpus:
        return gpus
    # No overall summary (older or partial snapshot): use every run's GPUs.
    return gpu_rules.busy_summaries(g for r in snap.runs for g in r.gpus)


# --- formatting -------------------------------------------------------------------------------


def _fmt(x: float | None, spec: str = ".1f", unit: str = "") -> str:
    if x is None:
        return "—"
    return f"{x:{spec}}{unit}"


def _fmt_summary(s: Figure | None, scale: float = 1.0, spec: str = ".1f") -> str:
    if s is None or s.mean is None:
        return "—"
    out = f"{s.mean * scale:{spec}}"
    sd = s.std
    if sd is not None:
        out += f" ± {sd * scale:{spec}}"
    return out


def _text(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:g}"
    if isinstance(x, (list, tuple)):
        return ", ".join(_text(v) for v in x)
    if isinstance(x, Mapping):
        return ", ".join(f"{k}={_text(v)}" for k, v in x.items())
    return str(x)


def _unique(values: Iterable[Any]) -> Any:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else seen


# --- the comparison -------------------------------------------------------------------------


REL_DIFFERS = 0.01
"""Numbers closer than this (relative) are shown as equal in the table: 1% is below what a
handful of runs resolves, and a table where every row differs says nothing."""


def _apart(va: float | None, vb: float | None, abs_tol: float = 0.0) -> bool:
    """Whether two table values differ enough to mark the row."""
    if va is None or vb is None:
        return va is not vb
    return abs(vb - va) > max(abs_tol, REL_DIFFERS * max(abs(va), abs(vb)))


_VOLATILE_ARGS = frozenset(
    {"port", "host", "startup_time", "pid", "nccl_port", "dist_init_addr", "launch_command"}
)
"""Launch arguments that differ between any two starts of the same server (where it listens,
when it started); ``launch_command`` repeats the real arguments, which get rows of their own."""


def _agg(
    gpus: Sequence[GpuRunSummary], key: str, how: Callable[[list[float]], float]
) -> float | None:
    vals = [float(v) for g in gpus if (v := getattr(g, key)) is not None]
    return how(vals) if vals else None


def _gpu_rows(a: Snapshot, b: Snapshot, att: Attribution) -> list[Row]:
    ga, gb = _overall_gpus(a), _overall_gpus(b)
    rows: list[Row] = []

    def num_row(
        name: str, va: float | None, vb: float | None, spec: str, unit: str, key: bool
    ) -> None:
        sa, sb = _fmt(va, spec, unit), _fmt(vb, spec, unit)
        differs = sa != sb and _apart(va, vb, abs_tol=2.0 if unit == "%" else 0.0)
        rows.append(Row("gpu", name, sa, sb, differs, key, va, vb))

    num_row("SM clock, slowest GPU (mean)", att.clock_a_mhz, att.clock_b_mhz, ".0f", " MHz", True)
    rows.append(
        Row(
            "gpu",
            "straggler GPU",
            _text(att.straggler_a),
            _text(att.straggler_b),
            att.straggler_a != att.straggler_b,
            False,
            att.straggler_a,
            att.straggler_b,
        )
    )
    aggregates: tuple[tuple[str, str, Callable[[list[float]], float], str, str, bool], ...] = (
        ("SM clock, all GPUs (mean)", "sm_clock_mean_mhz", mean, ".0f", " MHz", True),
        ("SM clock (min)", "sm_clock_min_mhz", min, ".0f", " MHz", True),
        ("GPU temperature (max)", "temp_max_c", max, ".0f", " °C", True),
        ("HBM temperature (max)", "hbm_temp_max_c", max, ".0f", " °C", False),
        ("power per GPU (mean)", "power_mean_w", mean, ".0f", " W", True),
        ("energy per token (all GPUs)", "joules_per_token", math.fsum, ".2f", " J", False),
    )
    for name, key, how, spec, unit, is_key in aggregates:
        num_row(name, _agg(ga, key, how), _agg(gb, key, how), spec, unit, is_key)

    reasons: list[str] = []
    for g in [*ga, *gb]:
        for name in g.reason_fractions:
            if name not in reasons and name not in _IDLE_REASONS:
                reasons.append(name)

    def worst_pct(gpus: Sequence[GpuRunSummary], reason: str) -> float | None:
        fractions = [g.reason_fractions.get(reason) or 0.0 for g in gpus]
        return max(fractions) * 100 if fractions else None

    for name in reasons:
        num_row(
            f"time under {name} (worst GPU)",
            worst_pct(ga, name),
            worst_pct(gb, name),
            ".0f",
            "%",
            True,
        )

    def link(gpus: Sequence[GpuRunSummary]) -> tuple[str, Any]:
        links = [(g.pcie_gen, g.pcie_width) for g in gpus if g.pcie_gen is not None]
        if not links:
            return "—", None
        worst = min(links, key=lambda lw: ((lw[0] or 0), (lw[1] or 0)))
        return f"Gen{worst[0]} x{worst[1]}", list(worst)

    la, lb = link(ga), link(gb)
    rows.append(
        Row("gpu", "PCIe link (worst GPU)", la[0], lb[0], la[0] != lb[0], True, la[1], lb[1])
    )
    return rows


def _env_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    ea, eb = a.environment, b.environment
    rows: list[Row] = []

    def row(name: str, va: Any, vb: Any, key: bool = False) -> None:
        rows.append(Row("environment", name, _text(va), _text(vb), va != vb, key, va, vb))

    row("driver", ea.driver_version, eb.driver_version, True)
    row("CUDA", ea.cuda_driver_version, eb.cuda_driver_version)
    sa, sb = ea.gpus, eb.gpus
    row("GPUs", len(sa), len(sb))
    for name, key in (
        ("GPU model", "name"),
        ("max SM clock", "max_sm_clock_mhz"),
        ("power limit (W)", "power_limit_w"),
        ("persistence mode", "persistence_mode"),
        ("application clock", "app_sm_clock_mhz"),
        ("PCIe max", "max_pcie_gen"),
    ):
        row(name, _unique(g.get(key) for g in sa), _unique(g.get(key) for g in sb))
    return rows


def _server_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    sa, sb = a.server, b.server
    rows: list[Row] = []

    def row(name: str, va: Any, vb: Any, key: bool = False) -> None:
        rows.append(Row("server", name, _text(va), _text(vb), va != vb, key, va, vb))

    row("dialect", sa.dialect, sb.dialect)
    row("server version", sa.version, sb.version, True)
    row("model", sa.model, sb.model)
    spa, spb = sa.speculative, sb.speculative
    for key in ("enabled", "algorithm", "num_steps", "num_draft_tokens", "topk", "draft_model"):
        row(f"speculative {key.replace('_', ' ')}", spa.get(key), spb.get(key), key == "algorithm")
    la, lb = sa.launch_args, sb.launch_args
    for key in sorted((set(la) | set(lb)) - _VOLATILE_ARGS):
        if la.get(key) != lb.get(key):
            row(f"arg {key}", la.get(key), lb.get(key))
    return rows


def _config_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    ca, cb = a.config, b.config
    rows: list[Row] = []
    for key in (
        "max_tokens",
        "concurrency",
        "runs",
        "warmup",
        "prompts_source",
        "ignore_eos",
        "temperature",
    ):
        va, vb = ca.get(key), cb.get(key)
        rows.append(
            Row("config", key.replace("_", " "), _text(va), _text(vb), va != vb, False, va, vb)
        )
    return rows


def _result_rows(a: Snapshot, b: Snapshot, beyond_noise: bool) -> list[Row]:
    oa, ob = a.overall, b.overall
    rows: list[Row] = []

    def row(name: str, key: str, scale: float, spec: str, unit: str, is_key: bool) -> None:
        fa, fb = oa.get(key), ob.get(key)
        sa = _fmt_summary(fa, scale, spec)
        sb = _fmt_summary(fb, scale, spec)
        va = fa.mean if fa is not None else None
        vb = fb.mean if fb is not None else None
        if unit:
            sa, sb = (s + unit if s != "—" else s for s in (sa, sb))
        differs = beyond_noise if key == "tok_s" else sa != sb and _apart(va, vb)
        rows.append(Row("result", name, sa, sb, differs, is_key, va, vb))

    row("tok/s", "tok_s", 1.0, ".1f", "", True)
    row("decode tok/s (no TTFT)", "decode_tok_s", 1.0, ".1f", "", True)
    row("TTFT", "ttft_s", 1000.0, ".0f", " ms", False)
    row("step latency", "step_latency_s", 1000.0, ".2f", " ms", True)
    row("tokens per step", "tokens_per_step", 1.0, ".2f", "", False)
    row("accept length", "accept_length", 1.0, ".2f", "", True)
    row("tokens per run", "completion_tokens", 1.0, ".0f", "", False)
    return rows


def compare(
    a: Snapshot,
    b: Snapshot,
    *,
    a_name: str = "A",
    b_name: str = "B",
    min_change: float = MIN_CHANGE,
    min_share: float = MIN_SHARE,
) -> Comparison:
    """Compare snapshot ``b`` against ``a`` (the baseline); see the module docstring for the rule.

    Args:
        a: The earlier (baseline) snapshot, as read by ``specwatch.bench.snapshot.load_snapshot``.
        b: The later snapshot.
        a_name: How to call A in text (e.g. its file name).
        b_name: How to call B.
        min_change: Smallest relative tok/s change that counts.
        min_share: Share of the observed change the clock change must account for.

    Returns:
        The verdict, the numbers behind it and the side-by-side rows.
    """
    va, vb = run_tok_s(a), run_tok_s(b)
    sa, sb = summarize(va), summarize(vb)
    w = welch(va, vb)
    notes: list[str] = []
    for name, snap, vals in ((a_name, a, va), (b_name, b, vb)):
        if snap.interrupted:
            planned = snap.config.get("runs", "?")
            notes.append(f"{name} was interrupted: {len(vals)} of {planned} runs")
        if len(vals) < 2:
            notes.append(f"{name} has {len(vals)} run(s): no confidence interval, noise unknown")

    change = change_low = change_high = None
    observed = obs_low = obs_high = None
    if sa.mean and sb.mean is not None:
        observed = sb.mean / sa.mean
        change = observed - 1.0
        if w is not None:
            change_low, change_high = w.ci_low / sa.mean, w.ci_high / sa.mean
            obs_low, obs_high = 1.0 + change_low, 1.0 + change_high
    if change is None:
        beyond = False
    elif w is not None:
        beyond = w.significant and abs(change) >= min_change
    else:
        beyond = abs(change) >= min_change

    clock_a, idx_a = straggler_clock(a)
    clock_b, idx_b = straggler_clock(b)
    expected = clock_b / clock_a if clock_a and clock_b is not None else None
    share: float | None = None
    explained = False
    if expected is not None and observed is not None and observed > 0 and expected > 0:
        log_obs = math.log(observed)
        if log_obs != 0.0:
            share = math.log(expected) / log_obs
        inside = obs_low is not None and obs_high is not None and obs_low <= expected <= obs_high
        explained = (share is not None and share >= min_share) or inside

    attribution = Attribution(
        clock_a, clock_b, idx_a, idx_b, expected, observed, obs_low, obs_high, share, explained
    )

    pct = f"{change * 100:+.1f}%" if change is not None else "?"
    ci = (
        f" (95% CI {change_low * 100:+.1f}% to {change_high * 100:+.1f}%)"
        if change_low is not None and change_high is not None
        else ""
    )
    if change is None:
        verdict = VERDICT_NONE
        reason = "no tok/s figures to compare"
    elif not beyond:
        verdict = VERDICT_NONE
        why = "within noise" if w is None or not w.significant else f"smaller than {min_change:.0%}"
        reason = f"tok/s {pct}{ci}: {why}"
    elif expected is None:
        # Blaming the code without knowing the GPUs' state is the story's mistake in reverse.
        verdict = VERDICT_UNKNOWN
        missing = " and ".join(n for n, c in ((a_name, clock_a), (b_name, clock_b)) if c is None)
        reason = (
            f"tok/s {pct}{ci}; no SM clock readings in {missing}: benchmark on the GPU box "
            "with NVML to tell GPU state from code"
        )
    else:
        predicted = f"{(expected - 1) * 100:+.1f}%"
        clocks = f"slowest-GPU SM clock {clock_a:.0f} → {clock_b:.0f} MHz predicts {predicted}"
        if explained:
            verdict = VERDICT_GPU
            reason = f"tok/s {pct}{ci}; {clocks}"
        else:
            verdict = VERDICT_CODE
            part = f", {share * 100:.0f}% of the change" if share is not None and share > 0 else ""
            reason = f"tok/s {pct}{ci}; {clocks}{part}: the clocks do not account for it"

    rows = [
        *_result_rows(a, b, beyond),
        *_gpu_rows(a, b, attribution),
        *_env_rows(a, b),
        *_server_rows(a, b),
        *_config_rows(a, b),
    ]
    for row in rows:
        if row.section == "config" and row.differs and row.name in ("max tokens", "concurrency"):
            notes.append(f"{row.name} differs ({row.a} vs {row.b}): the runs are not like for like")
    return Comparison(
        a_name=a_name,
        b_name=b_name,
        tok_s_a=sa,
        tok_s_b=sb,
        welch=w,
        change=change,
        change_low=change_low,
        change_high=change_high,
        beyond_noise=beyond,
        attribution=attribution,
        verdict=verdict,
        reason=reason,
        rows=tuple(rows),
        notes=tuple(notes),
    )


__all__ = [
    "MIN_CHANGE",
    "MIN_SHARE",
    "VERDICTS",
    "VERDICT_CODE",
    "VERDICT_GPU",
    "VERDICT_NONE",
    "VERDICT_UNKNOWN",
    "Attribution",
    "Comparison",
    "Row",
    "compare",
    "run_tok_s",
    "straggler_clock",
]
