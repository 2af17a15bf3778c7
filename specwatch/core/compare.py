"""Compare two benchmark snapshots: did tok/s change, what differs, and is it the GPUs or the code?

The verdict rule lives in :mod:`specwatch.core.judge` (a live verdict uses the same one): tok/s
beyond noise (Welch's 95% interval and at least 2%), then whether the slowest busy GPU's SM
clock accounts for the change, then accept length, then load; no clock readings leave the GPU
state unknown. Here the snapshots become the rule's inputs (:mod:`specwatch.core.snapshot_figures`),
the side-by-side table is built (:mod:`specwatch.core.compare_rows`) and, when both snapshots
recorded the server process's code identity (schema 3), the explanation starts with
"same code and libraries" or names both commits. Launch configurations that differ
(:mod:`specwatch.core.launch_config`) make the verdict **configuration changed**, and then the
explanation never says "same code": the code may be the same, the comparison is not.

The verdicts, their wording and exit codes are :class:`specwatch.core.outcomes.Outcome`; which
GPUs count as busy and which one is the straggler is :mod:`specwatch.core.gpu`.
Everything here is pure: validated :class:`~specwatch.core.snapshot_records.Snapshot` objects
in, a :class:`Comparison` out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.clocks import policy_difference
from specwatch.core.compare_rows import (
    Row,
    code_rows,
    config_rows,
    env_rows,
    gpu_rows,
    host_rows,
    launch_rows,
    result_rows,
    server_rows,
)
from specwatch.core.config_differences import ConfigDifference
from specwatch.core.energy import energy_change
from specwatch.core.identity import IdentityComparison, identity_differences
from specwatch.core.judge import MIN_CHANGE, MIN_SHARE, judge
from specwatch.core.launch_config import LaunchConfig
from specwatch.core.outcomes import Outcome
from specwatch.core.snapshot_figures import figures, run_tok_s, straggler_clock
from specwatch.core.snapshot_records import Snapshot
from specwatch.core.stats import Summary, Welch
from specwatch.core.steady import steady_note

VERDICT_GPU = Outcome.GPU
VERDICT_CODE = Outcome.CODE
VERDICT_NONE = Outcome.NO_CHANGE
VERDICT_UNKNOWN = Outcome.UNKNOWN
VERDICT_LOAD = Outcome.LOAD
VERDICT_ACCEPTANCE = Outcome.ACCEPTANCE
VERDICT_HOST = Outcome.HOST
VERDICT_CONFIG = Outcome.CONFIG
VERDICTS = tuple(Outcome)


@dataclass(frozen=True, slots=True)
class Attribution:
    """Clock-predicted against observed tok/s ratio."""

    clock_a_mhz: float | None
    clock_b_mhz: float | None
    straggler_a: int | None
    """Index of the GPU most often the straggler in A (:func:`~specwatch.core.gpu.straggler`)."""
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
    code: IdentityComparison | None = None
    """How the server processes' code identities compare; ``None`` when one was not recorded."""
    code_summary: str | None = None
    """``"same code and libraries"``, or both commits when they differ; in front of the reason."""
    load_changes: tuple[str, ...] = ()
    """What about the load differs (``specwatch.core.judge.load_changes``)."""
    configuration: tuple[ConfigDifference, ...] = ()
    """The launch settings that differ (:mod:`specwatch.core.config_differences`)."""
    launch: tuple[LaunchConfig | None, LaunchConfig | None] = (None, None)
    """Both sides' launch configurations (``None``: nothing recorded)."""

    @property
    def wording(self) -> str:
        """The verdict as printed: with the same code on both sides, what is left to look at."""
        same = (
            self.code is not None and self.code.same_code_and_libraries and not self.configuration
        )
        return self.verdict.worded(same_code=same)

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
            "code": None
            if self.code is None
            else {
                "summary": self.code_summary,
                "same_code_and_libraries": self.code.same_code_and_libraries,
                "differences": [
                    {"name": d.label, "a": d.before, "b": d.after} for d in self.code.differences
                ],
                "caveats": list(self.code.caveats),
            },
            "load_changes": list(self.load_changes),
            "configuration": {
                "a": None if self.launch[0] is None else self.launch[0].to_json(),
                "b": None if self.launch[1] is None else self.launch[1].to_json(),
                "differences": [
                    {"name": d.name, "a": d.before, "b": d.after, "origin": d.origin}
                    for d in self.configuration
                ],
            },
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


def code_summary(
    a: Snapshot, b: Snapshot, configuration: tuple[ConfigDifference, ...] = ()
) -> tuple[IdentityComparison | None, str | None]:
    """How the two servers' code compares, and the words put in front of the verdict's reason.

    ``"same code and libraries"`` when both identities name their code and nothing differs
    and the launch configurations do not differ (``configuration``): beside a configuration
    change "same code" would read as "same server"; both commits when they differ; the first
    differences (``NCCL_PROTO: LL -> Simple``) when the commit is the same; ``None`` when
    either identity is missing or sameness cannot be claimed for another reason (unknown code,
    uncommitted changes: the caveats say which).
    """
    ia, ib = a.server.process, b.server.process
    if ia is None or ib is None:
        return None, None
    diff = identity_differences(ia, ib)
    if diff.same_code_and_libraries:
        return diff, None if configuration else "same code and libraries"
    if ia.commit != ib.commit:
        return diff, f"different code: commit {ia.short_commit or '?'} → {ib.short_commit or '?'}"
    if diff.differences:
        shown = [d.line() for d in diff.differences[:3]]
        more = ", …" if len(diff.differences) > 3 else ""
        return diff, f"same commit, but {', '.join(shown)}{more}"
    return diff, None


def compare(
    a: Snapshot,
    b: Snapshot,
    *,
    a_name: str = "A",
    b_name: str = "B",
    min_change: float = MIN_CHANGE,
    min_share: float = MIN_SHARE,
) -> Comparison:
    """Compare snapshot ``b`` against ``a`` (the baseline); the rule is :func:`judge`'s.

    Args:
        a: The earlier (baseline) snapshot, as read by ``specwatch.bench.snapshot.load_snapshot``.
        b: The later snapshot.
        a_name: How to call A in text (e.g. its file name).
        b_name: How to call B.
        min_change: Smallest relative tok/s change that counts.
        min_share: Share of the observed change a cause must account for.

    Returns:
        The verdict, the numbers behind it and the side-by-side rows.
    """
    figures_a, figures_b = figures(a), figures(b)
    j = judge(
        figures_a,
        figures_b,
        reference_name=a_name,
        current_name=b_name,
        min_change=min_change,
        min_share=min_share,
    )
    notes: list[str] = []
    for name, snap in ((a_name, a), (b_name, b)):
        n = len(run_tok_s(snap))
        if snap.interrupted:
            planned = snap.config.get("runs", "?")
            notes.append(f"{name} was interrupted: {n} of {planned} runs")
        if n < 2:
            notes.append(f"{name} has {n} run(s): no confidence interval, noise unknown")
    policies = policy_difference(a.gpu_environment.gpus, b.gpu_environment.gpus)
    if policies is not None:
        notes.append(f"different clock policies: {a_name} {policies[0]}; {b_name} {policies[1]}")
    for name, snap in ((a_name, a), (b_name, b)):
        unsteady = steady_note(name, snap.steady)
        if unsteady is not None:
            notes.append(unsteady)
    clock_a, idx_a = straggler_clock(a)
    clock_b, idx_b = straggler_clock(b)
    attribution = Attribution(
        clock_a,
        clock_b,
        idx_a,
        idx_b,
        j.expected_ratio,
        j.observed_ratio,
        j.observed_ratio_low,
        j.observed_ratio_high,
        j.share,
        j.explained_by_clock,
    )
    code, summary = code_summary(a, b, j.configuration)
    if a.server.process is None or b.server.process is None:
        for name, snap in ((a_name, a), (b_name, b)):
            if snap.server.process is None:
                notes.append(
                    f"{name}: server code identity {snap.server.process_note or 'not recorded'}"
                )
    rows = [
        *result_rows(a, b, j.beyond_noise),
        *gpu_rows(a, b, (clock_a, clock_b), (idx_a, idx_b)),
        *host_rows(a, b),
        *env_rows(a, b),
        *server_rows(a, b),
        *launch_rows(a, b),
        *code_rows(a, b),
        *config_rows(a, b),
    ]
    energy = energy_change(a, b).note(tok_s_level=not j.beyond_noise)
    if energy is not None:
        notes.append(energy)
    for row in rows:
        if row.section == "config" and row.differs and row.name in ("max tokens", "concurrency"):
            notes.append(f"{row.name} differs ({row.a} vs {row.b}): the runs are not like for like")
    reason = j.reason if summary is None else f"{summary}; {j.reason}"
    return Comparison(
        a_name=a_name,
        b_name=b_name,
        tok_s_a=j.tok_s_reference,
        tok_s_b=j.tok_s_current,
        welch=j.welch,
        change=j.change,
        change_low=j.change_low,
        change_high=j.change_high,
        beyond_noise=j.beyond_noise,
        attribution=attribution,
        verdict=j.outcome,
        reason=reason,
        rows=tuple(rows),
        notes=tuple(notes),
        code=code,
        code_summary=summary,
        load_changes=j.load_changes,
        configuration=j.configuration,
        launch=(figures_a.launch, figures_b.launch),
    )


__all__ = [
    "VERDICTS",
    "VERDICT_ACCEPTANCE",
    "VERDICT_CODE",
    "VERDICT_CONFIG",
    "VERDICT_GPU",
    "VERDICT_HOST",
    "VERDICT_LOAD",
    "VERDICT_NONE",
    "VERDICT_UNKNOWN",
    "Attribution",
    "Comparison",
    "code_summary",
    "compare",
]
