"""Per-position acceptance from windowed counters: ``p_i`` and ``E[L(k')]`` with bounds.

With chain drafting, vLLM and llama.cpp count, for every verify step that carried a draft, the
accepted tokens at each draft position. Position ``i`` (1-based) is counted only when the first
``i`` drafts were all accepted, so ``p_i = Δaccepted_per_pos[i-1] / Δnum_drafts`` is the
probability of that, and for any ``k' <= K`` (the draft tokens the server runs)::

    E[L(k')] = 1 + Σ_{i<=k'} p_i        (tokens per drafted verify step, bonus included)

Nothing is known above ``K``. Each ``p_i`` carries a Wilson interval on its counts, at a level
that makes the K of them hold together with 95% confidence (Bonferroni); the bounds of ``E[L]``
sum the bounds of the ``p_i`` (they rise and fall together). Below
``MIN_DRAFTS`` drafted steps, or with tree drafting (SGLang ``topk > 1``, where positions are
not a chain), the table is withheld with the reason.

The chain formula carries an error of its own at ``k' < K``: a server restarted at ``k'``
starts its drafts at other places in the text, so its ``p_i`` are not quite the ones counted
at ``K``. The bounds at ``k' < K`` widen the accepted drafts per step (``E[L] − 1``) by the
relative :data:`CHAIN_MODEL_ERROR`, calibrated on real servers (see docs/).

Where a server counts no positions (SGLang's ``/metrics``), :func:`accept_length_table` fits
one constant per-position acceptance ``a`` to the mean accept length at ``K``
(``p_i = a^i``), with the t interval of the windows' accept lengths and the wider relative
:data:`CONSTANT_MODEL_ERROR`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

from specwatch.core.server import MetricsWindow, SpecConfig
from specwatch.core.stats import mean_ci

CONFIDENCE = 0.95
"""For the whole table: each of the K positions gets ``1 − (1 − CONFIDENCE)/K`` (Bonferroni)."""
MIN_DRAFTS = 200.0
"""Drafted verify steps below which acceptance is not reported: a Wilson interval at p=0.5 is
then wider than ±0.07 per position."""
CHAIN_MODEL_ERROR = 0.10
"""Relative error of the chain formula's accepted drafts per step at ``k' < K`` (calibrated on
real vLLM and llama.cpp servers, draft model and n-gram, K=4 restarted at 2 and 3: docs/)."""
CONSTANT_MODEL_ERROR = 0.20
"""The same for a constant per-position acceptance fitted to the mean accept length: twice
what its calibration on the same runs gave, since the drafters it is for (SGLang's EAGLE heads)
were not among those calibrated and their acceptance need not fall off like a^i (docs/)."""
MIN_LENGTH_WINDOWS = 5
"""Windows with an accept length below which the constant-acceptance fit is not made."""
CHAIN_MODEL = "chain counts per position"
CONSTANT_MODEL = "constant per-position acceptance a^i fitted to the mean accept length"
CHAIN_SLACK = 0.02
"""How far a later position's rate may exceed an earlier one's before the counts are judged not
to be chain counts (counting noise between scrapes of a live server)."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A value with the interval it is known to within."""

    value: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class AcceptanceCounts:
    """Counter deltas summed over windows."""

    drafts: float
    """Verify steps that carried a draft."""
    accepted_per_pos: tuple[float, ...]
    """Accepted drafts at each position, position 1 first."""
    decode_steps: float | None
    """Request decode steps with a draft or not; ``None`` unless every window had it."""
    windows: int


@dataclass(frozen=True, slots=True)
class AcceptanceTable:
    """What the counters say about draft lengths up to the one the server runs."""

    k_running: int | None
    """``K``: draft tokens per verify step (positions the server counts)."""
    drafts: float
    p: tuple[Estimate, ...] = ()
    """``p_i`` for i = 1..K: the first i drafts all accepted. Empty when withheld."""
    expected_len: tuple[Estimate, ...] = ()
    """``E[L(k')]`` for k' = 1..K, per drafted step. Empty when withheld."""
    draft_hit: float | None = None
    """Share of decode steps that carried a draft (an n-gram miss drafts nothing)."""
    reason: str | None = None
    """Why the table is withheld; ``None`` when it is given."""
    model: str = CHAIN_MODEL
    """How ``p_i`` were found: counted per position, or fitted to the mean accept length."""
    model_error: float = CHAIN_MODEL_ERROR
    """The relative error added to ``E[L] − 1`` at ``k' < K`` (see the module)."""

    def tokens_per_step(self, k: int, bound: str = "value") -> float:
        """Expected tokens per decode step at ``k`` drafts, steps without a draft included.

        ``bound`` is ``"value"``, ``"low"`` or ``"high"``; ``k = 0`` is plain decoding.
        """
        if k <= 0:
            return 1.0
        e = self.expected_len[k - 1]
        hit = 1.0 if self.draft_hit is None else self.draft_hit
        return 1.0 + hit * (float(getattr(e, bound)) - 1.0)


def windows_words(n: int) -> str:
    """``"1 window"``, ``"3 windows"``: a count of windows as the advisor's lines say it."""
    return f"{n} window" if n == 1 else f"{n} windows"


def z_for(positions: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided normal quantile giving ``positions`` intervals joint ``confidence``."""
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / (2.0 * max(1, positions)))


def wilson(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` trials (``n > 0``)."""
    p = min(1.0, max(0.0, successes / n))
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def usable(w: MetricsWindow) -> bool:
    """A window with a span and no restart inside it."""
    return w.dt > 0 and not w.restarted


def pool_counts(windows: Iterable[MetricsWindow]) -> AcceptanceCounts | None:
    """Sum the per-position counts of ``windows`` (``None`` when none carries them).

    Windows whose number of positions differs from the most common one (the server was
    restarted with another ``K``) are left out.
    """
    rows = [
        w
        for w in windows
        if usable(w) and w.spec_drafts is not None and w.spec_accepted_per_pos is not None
    ]
    if not rows:
        return None
    k = Counter(len(w.spec_accepted_per_pos or ()) for w in rows).most_common(1)[0][0]
    rows = [w for w in rows if len(w.spec_accepted_per_pos or ()) == k]
    per_pos = [0.0] * k
    for w in rows:
        for i, c in enumerate(w.spec_accepted_per_pos or ()):
            per_pos[i] += c
    steps = [w.decode_steps for w in rows]
    return AcceptanceCounts(
        drafts=sum(w.spec_drafts or 0.0 for w in rows),
        accepted_per_pos=tuple(per_pos),
        decode_steps=None if any(s is None for s in steps) else sum(s or 0.0 for s in steps),
        windows=len(rows),
    )


def counts_from_histograms(histograms: Iterable[Sequence[float]]) -> AcceptanceCounts | None:
    """Chain counts from per-request "exactly ``j`` drafts accepted" histograms, pooled.

    SGLang's ``spec_correct_drafts_histogram[j]`` (``spec_accept_histogram`` in 0.5.10) counts a
    request's verify steps that accepted exactly ``j`` drafts; with chain drafting a step that
    accepted ``j`` accepted positions 1..j, so position ``i`` was accepted in
    ``Σ_{j>=i} h[j]`` steps out of ``Σ_j h[j]``. ``None`` without a usable histogram.
    """
    rows = [
        [float(x) for x in h]
        for h in histograms
        if len(h) >= 2 and all(math.isfinite(float(x)) and float(x) >= 0 for x in h)
    ]
    if not rows:
        return None
    k = max(len(h) for h in rows) - 1
    exactly = [sum(h[j] for h in rows if j < len(h)) for j in range(k + 1)]
    drafts = sum(exactly)
    if drafts <= 0:
        return None
    per_pos = tuple(sum(exactly[i:]) for i in range(1, k + 1))
    return AcceptanceCounts(drafts, per_pos, None, len(rows))


HISTOGRAM_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
"""SGLang's per-request accepted-drafts histogram: the 0.5.16+ name, then the 0.5.10 one."""


def drafts_histogram(stats: Mapping[str, Any]) -> tuple[float, ...] | None:
    """A request's accepted-drafts histogram from its server stats (``None``: none there)."""
    for key in HISTOGRAM_KEYS:
        found = stats.get(key)
        if isinstance(found, list | tuple) and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in found
        ):
            return tuple(float(x) for x in found)
    return None


def refusal(spec: SpecConfig | None) -> str | None:
    """Why the chain formula does not apply to this setup; ``None`` when it does."""
    if spec is not None and spec.topk is not None and spec.topk > 1:
        return (
            f"tree drafting (topk={spec.topk}): positions are branches, not a chain, so "
            "E[L] = 1 + Σ p_i does not hold"
        )
    if spec is not None and spec.enabled is False:
        return "speculative decoding is off on this server"
    return None


def acceptance_table(
    counts: AcceptanceCounts | None,
    spec: SpecConfig | None = None,
    min_drafts: float = MIN_DRAFTS,
) -> AcceptanceTable:
    """``p_i`` and ``E[L(k')]`` with Wilson bounds, or the reason they are withheld."""
    why = refusal(spec)
    k = len(counts.accepted_per_pos) if counts else None
    drafts = counts.drafts if counts else 0.0
    if why is not None:
        return AcceptanceTable(k, drafts, reason=why)
    if counts is None or not counts.accepted_per_pos:
        return AcceptanceTable(
            k,
            drafts,
            reason="no per-position acceptance counters in these windows (vLLM "
            "spec_decode_num_accepted_tokens_per_pos, llama.cpp builds that export it; SGLang "
            "gives it per request only: a recording with a benchmark run in it)",
        )
    if drafts < min_drafts:
        return AcceptanceTable(
            k,
            drafts,
            reason=f"{drafts:.0f} drafted steps, fewer than the {min_drafts:.0f} needed",
        )
    rates = [c / drafts for c in counts.accepted_per_pos]
    for i in range(1, len(rates)):
        if rates[i] > rates[i - 1] + CHAIN_SLACK:
            return AcceptanceTable(
                k,
                drafts,
                reason=f"position {i + 1} accepted more often than position {i}: these are "
                "not chain counts, so E[L] = 1 + Σ p_i does not hold",
            )
    z = z_for(len(rates))
    p = tuple(
        Estimate(r, *wilson(c, drafts, z))
        for r, c in zip(rates, counts.accepted_per_pos, strict=True)
    )
    hit = None
    if counts.decode_steps:
        hit = min(1.0, drafts / counts.decode_steps)
    return AcceptanceTable(k, drafts, p, chain_lengths(p, CHAIN_MODEL_ERROR), hit)


def chain_lengths(p: Sequence[Estimate], model_error: float) -> tuple[Estimate, ...]:
    """``E[L(k')]`` for k' = 1..K from the ``p_i``: bounds summed, then widened at ``k' < K``
    by ``model_error`` of the accepted drafts (``E[L] − 1``)."""
    out: list[Estimate] = []
    total = Estimate(1.0, 1.0, 1.0)
    for i, e in enumerate(p, start=1):
        total = Estimate(total.value + e.value, total.low + e.low, total.high + e.high)
        if i == len(p):
            out.append(total)
            continue
        cap = 1.0 + i
        out.append(
            Estimate(
                total.value,
                1.0 + (total.low - 1.0) * (1.0 - model_error),
                min(cap, 1.0 + (total.high - 1.0) * (1.0 + model_error)),
            )
        )
    return tuple(out)


def constant_acceptance(accepted_per_step: float, k: int) -> float:
    """The ``a`` with ``Σ_{i<=k} a^i = accepted_per_step`` (0 at none, 1 at every draft)."""
    if accepted_per_step <= 0.0:
        return 0.0
    if accepted_per_step >= k:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2.0
        if sum(mid**i for i in range(1, k + 1)) < accepted_per_step:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def spec_k(spec: SpecConfig | None) -> int | None:
    """Draft tokens per verify step from a detected setup (chain: the steps; SGLang's draft
    tokens count the root)."""
    if spec is None:
        return None
    if spec.num_steps is not None and spec.num_steps > 0:
        return spec.num_steps
    if spec.num_draft_tokens is not None and spec.num_draft_tokens > 1:
        return spec.num_draft_tokens - 1
    return None


def accept_length_table(
    windows: Iterable[MetricsWindow], spec: SpecConfig | None
) -> AcceptanceTable:
    """``p_i = a^i`` with ``a`` fitted to the windows' mean accept length at ``K`` (bonus
    included), or the reason it is withheld; for servers that count no positions."""
    why = refusal(spec)
    k = spec_k(spec)
    lengths = [
        w.accept_length
        for w in windows
        if usable(w) and w.accept_length is not None and math.isfinite(w.accept_length)
    ]
    base = AcceptanceTable(k, 0.0, model=CONSTANT_MODEL, model_error=CONSTANT_MODEL_ERROR)
    if why is not None:
        return replace(base, reason=why)
    if k is None:
        return replace(base, reason="the server does not say how many draft tokens it runs")
    if len(lengths) < MIN_LENGTH_WINDOWS:
        return replace(
            base,
            reason=f"{windows_words(len(lengths))} with an accept length, fewer than the "
            f"{MIN_LENGTH_WINDOWS} needed",
        )
    m = sum(lengths) / len(lengths)
    ci = mean_ci(lengths)
    lo, hi = ci if ci is not None else (m, m)
    a = [constant_acceptance(x - 1.0, k) for x in (m, lo, hi)]
    p = tuple(Estimate(a[0] ** i, a[1] ** i, a[2] ** i) for i in range(1, k + 1))
    expected = list(chain_lengths(p, CONSTANT_MODEL_ERROR))
    # at K the mean itself was measured: its own interval, not the fit's
    expected[-1] = Estimate(m, max(1.0, lo), min(1.0 + k, hi))
    return replace(base, p=p, expected_len=tuple(expected))


__all__ = [
    "CHAIN_MODEL",
    "CHAIN_MODEL_ERROR",
    "CONFIDENCE",
    "CONSTANT_MODEL",
    "CONSTANT_MODEL_ERROR",
    "HISTOGRAM_KEYS",
    "MIN_DRAFTS",
    "AcceptanceCounts",
    "AcceptanceTable",
    "Estimate",
    "accept_length_table",
    "acceptance_table",
    "chain_lengths",
    "constant_acceptance",
    "counts_from_histograms",
    "drafts_histogram",
    "pool_counts",
    "refusal",
    "spec_k",
    "usable",
    "wilson",
    "windows_words",
    "z_for",
]
