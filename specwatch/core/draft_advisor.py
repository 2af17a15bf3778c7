"""Speculation economics: which draft length pays, at which running batch, from live counters.

For each running-batch bin (see :mod:`specwatch.core.step_cost`) and each draft length
``k' = 0..K`` (0 is plain decoding):

* tokens per step ``1 + h·Σ_{i<=k'} p_i`` (``h`` the draft-hit share, see
  :mod:`specwatch.core.acceptance`), from that bin's own counters;
* step time: observed at ``K``, modelled elsewhere;
* system tok/s ``B · tokens / T_step(B, k')`` against plain ``B / T_plain(B)``; the gain is
  their ratio − 1. Speculation pays at ``k'`` when ``tokens / T_step > 1 / T_plain``.

``T_plain`` is not observable on a server that speculates: it comes from a baseline (the same
server without speculation, by batch), interpolated between measured batches, never beyond.
Every gain carries an interval (Wilson on the acceptance counts, t over windows on the step
time, combined at their extremes); a bin's verdict is "pays" or "loses" only when the interval
says so, else "unclear". The crossover is the batch from which every measured bin above loses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from specwatch.core.acceptance import (
    CONSTANT_MODEL,
    AcceptanceCounts,
    AcceptanceTable,
    Estimate,
    accept_length_table,
    acceptance_table,
    pool_counts,
    windows_words,
)
from specwatch.core.draft_syntax import EngineSyntax, engine_setting, engine_syntax
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo
from specwatch.core.step_cost import (
    StepBin,
    batch_of,
    interpolate,
    model_step_bounds,
    model_text,
    step_curve,
)
from specwatch.core.values import to_jsonable

PAYS, LOSES, UNCLEAR = "pays", "loses", "unclear"


@dataclass(frozen=True, slots=True)
class PlainBaseline:
    """Plain-decoding step time by running batch, and where it came from."""

    step_s: Mapping[int, float]
    source: str


@dataclass(frozen=True, slots=True)
class KOption:
    """One draft length at one batch."""

    k: int
    """Draft tokens per step; 0 is plain decoding."""
    tokens_per_step: Estimate
    step_s: Estimate
    tok_s: Estimate
    """System tokens per second, ``B · tokens / step``."""
    gain: Estimate
    """Over plain decoding: ``tok_s / plain tok_s − 1``."""
    modelled: bool
    """The step time is the model's, not observed (``k != K``)."""


@dataclass(frozen=True, slots=True)
class BatchAdvice:
    """The advice at one running batch."""

    batch: int
    windows: int
    step_s: Estimate | None
    """The observed step time at ``K``."""
    plain_step_s: float | None
    acceptance: AcceptanceTable | None
    cliff: float | None = None
    options: tuple[KOption, ...] = ()
    """k' = 0..K; empty when withheld."""
    best_k: int | None = None
    plausible_k: tuple[int, ...] = ()
    """Draft lengths whose gain interval reaches the best one's lower bound."""
    advised_k: int | None = None
    """The running ``K`` while it is plausible (no change the data cannot justify), else
    ``best_k``."""
    verdict: str | None = None
    """``"pays"``, ``"loses"`` or ``"unclear"``."""
    reason: str | None = None
    """Why this batch has no advice."""


@dataclass(frozen=True, slots=True)
class Advice:
    """The whole advice over a sequence of windows."""

    dialect: Dialect
    k_running: int | None
    acceptance: AcceptanceTable
    """Pooled over every window (the headline ``E[L(k')]`` table)."""
    bins: tuple[BatchAdvice, ...] = ()
    loses_from: int | None = None
    """The batch from which speculation loses at every measured batch above (point)."""
    loses_between: tuple[int, int | None] | None = None
    """Where the crossover lies given the intervals: from the first batch not surely paying to
    the first surely losing (``None``: not reached in the measured range)."""
    recommendation: str | None = None
    """In the engine's own syntax."""
    syntax: EngineSyntax | None = None
    """How this server takes a draft length, and where that was read."""
    main_batch: int | None = None
    """The batch with the most windows (the one a one-value engine is tuned for)."""
    assumptions: str = ""
    reason: str | None = None
    """Why there is no recommendation."""
    notes: tuple[str, ...] = field(default_factory=tuple)


def flat_baseline(
    step_ms: float, windows: Iterable[MetricsWindow], source: str | None = None
) -> PlainBaseline:
    """The same plain step time at every batch the windows held (``--baseline-itl MS``)."""
    batches = {b for w in windows if (b := batch_of(w)) is not None}
    steps = {b: step_ms / 1000.0 for b in sorted(batches)}
    return PlainBaseline(steps, source or f"--baseline-itl {step_ms:g} ms at every batch")


def advise(
    windows: Sequence[MetricsWindow],
    info: ServerInfo,
    plain: PlainBaseline | None,
    draft_s_per_token: float | None = None,
    *,
    min_drafts: float | None = None,
    requests: AcceptanceCounts | None = None,
    syntax: EngineSyntax | None = None,
) -> Advice:
    """The draft-length advice from ``windows`` of the server ``info`` describes.

    Args:
        windows: Windows in time order (live, from a recording, or built by a test).
        info: The detected server (dialect and speculative setup).
        plain: Plain step time by batch (a baseline run without speculation).
        draft_s_per_token: Drafting cost per draft token where measured; else the linear model.
        min_drafts: The sample floor of drafted steps (default ``acceptance.MIN_DRAFTS``).
        requests: Per-position counts from streamed requests (SGLang's per-request
            histograms), for windows that carry none; taken as the same at every batch.
        syntax: How the server takes a draft length (its command line read); default: what
            ``info`` says.
    """
    floor: dict[str, float] = {} if min_drafts is None else {"min_drafts": min_drafts}
    counted = pool_counts(windows)
    from_length = counted is None and requests is None and info.dialect is Dialect.SGLANG
    if from_length:
        pooled = accept_length_table(windows, info.spec)
    else:
        pooled = acceptance_table(counted or requests, info.spec, **floor)
    k = pooled.k_running
    assumptions = _assumptions(plain, draft_s_per_token, pooled)
    notes = _graph_notes(windows)
    if counted is None and requests is not None:
        notes += (
            f"per-position acceptance from {requests.windows} streamed requests' "
            "accepted-drafts histograms, taken as the same at every batch",
        )
    if from_length:
        notes += (
            "no per-position counters: acceptance from the mean accept length alone, under "
            "a constant per-position acceptance (wider intervals); a batch with too few "
            "windows of its own takes the fit over every batch",
        )
    s = syntax or engine_syntax(info)
    base = Advice(info.dialect, k, pooled, syntax=s, assumptions=assumptions, notes=notes)
    if pooled.reason is not None or k is None:
        return replace(base, reason=pooled.reason or "no draft length known")
    curve = step_curve(windows)
    shared = pooled if from_length else None
    bins = tuple(_bin(b, info, plain, draft_s_per_token, k, floor, requests, shared) for b in curve)
    if not bins:
        return replace(base, reason="no window says how many requests were running")
    advised = [b for b in bins if b.best_k is not None]
    if not advised:
        why = "; ".join(f"batch {b.batch}: {b.reason}" for b in bins if b.reason)
        return replace(base, bins=bins, reason=why or "no batch has advice")
    main = max(advised, key=lambda b: (b.windows, -b.batch)).batch
    per_batch = [(b.batch, b.advised_k or 0) for b in advised]
    loses_from, between = _crossover(advised)
    notes = (
        tuple(
            f"batch {b.batch} is a step-time cliff ({b.cliff:.1f}× its neighbours)"
            + (": speculation loses there alone" if b.verdict == LOSES else "")
            for b in bins
            if b.cliff is not None
        )
        + base.notes
        + _split_note(next(b for b in advised if b.batch == main), draft_s_per_token)
    )
    return replace(
        base,
        bins=bins,
        loses_from=loses_from,
        loses_between=between,
        recommendation=engine_setting(info.dialect, k, per_batch, main, s),
        main_batch=main,
        notes=notes,
    )


def _split_note(b: BatchAdvice, draft_s: float | None) -> tuple[str, ...]:
    """Name the shorter draft the linear model favours when only the step model's own range
    (all of the overhead per draft token, or all of it per step) keeps the advice at K."""
    if draft_s is not None or b.best_k is None or b.best_k == b.advised_k or not b.options:
        return ()
    best, kept = b.options[b.best_k], b.options[b.advised_k or 0]
    if not best.modelled or best.k == 0:
        return ()
    return (
        f"batch {b.batch}: k={best.k} gains {best.gain.value:+.0%} against {kept.gain.value:+.0%} "
        "if the step's overhead is per draft token, less if it is per step: "
        f"--draft-ms MS or a run at k={best.k} decides",
    )


def _graph_notes(windows: Sequence[MetricsWindow]) -> tuple[str, ...]:
    """Say when verify passes ran outside CUDA graphs (SGLang counts them): those steps are
    slower than a captured shape's, so the step curve mixes two costs."""
    shares = [w.cuda_graph_share for w in windows if w.cuda_graph_share is not None]
    if not shares or min(shares) >= 0.99:
        return ()
    outside = 1.0 - sum(shares) / len(shares)
    return (
        f"{outside:.0%} of verify passes ran outside CUDA graphs (mean of "
        f"{windows_words(len(shares))}): their steps cost more than a captured batch shape's",
    )


def _assumptions(plain: PlainBaseline | None, draft_s: float | None, table: AcceptanceTable) -> str:
    hit = (
        "every decode step drafts (draft-hit share unknown)"
        if table.draft_hit is None
        else f"draft-hit share {table.draft_hit:.2f}"
    )
    where = f"plain step from {plain.source}" if plain else "no plain step (no baseline given)"
    if table.model == CONSTANT_MODEL:
        how = (
            f"acceptance at k'<=K from a {CONSTANT_MODEL} at K (t interval over windows, "
            f"±{table.model_error:.0%} of accepted drafts for the model at k'<K)"
        )
    else:
        how = (
            "acceptance at k'<=K as counted at K (Wilson, 95% jointly, "
            f"±{table.model_error:.0%} of accepted drafts for the chain model at k'<K)"
        )
    return (
        f"chain drafting; {model_text(draft_s)}; {where}; {how}; {hit}; "
        "batch = requests running at each scrape"
    )


def _bin(
    b: StepBin,
    info: ServerInfo,
    plain: PlainBaseline | None,
    draft_s: float | None,
    k_running: int,
    floor: Mapping[str, float],
    requests: AcceptanceCounts | None = None,
    shared: AcceptanceTable | None = None,
) -> BatchAdvice:
    if shared is not None:
        own = accept_length_table(b.windows, info.spec)
        table = own if own.reason is None else shared
    else:
        table = acceptance_table(pool_counts(b.windows) or requests, info.spec, **floor)
    found = interpolate(plain.step_s, b.batch) if plain else None
    plain_s = found[0] if found else None
    head = BatchAdvice(b.batch, len(b.windows), b.step_s, plain_s, table, b.cliff)
    why = b.reason or table.reason
    if why is None and plain_s is None:
        why = "no plain-decoding baseline at this batch"
    if why is None and table.k_running != k_running:
        why = f"counted at k={table.k_running}, not the server's {k_running}"
    if why is not None or b.step_s is None or plain_s is None:
        return replace(head, reason=why or "no step time")
    options = tuple(_option(k, b, table, plain_s, draft_s, k_running) for k in range(k_running + 1))
    best = max(options, key=lambda o: o.gain.value)
    plausible = tuple(o.k for o in options if o.gain.high >= best.gain.low)
    drafting = options[1:]
    if best.k > 0 and best.gain.low > 0:
        verdict = PAYS
    elif all(o.gain.high < 0 for o in drafting):
        verdict = LOSES
    else:
        verdict = UNCLEAR
    advised = k_running if k_running in plausible else best.k
    return replace(
        head,
        options=options,
        best_k=best.k,
        plausible_k=plausible,
        advised_k=advised,
        verdict=verdict,
    )


def _option(
    k: int,
    b: StepBin,
    table: AcceptanceTable,
    plain_s: float,
    draft_s: float | None,
    k_running: int,
) -> KOption:
    assert b.step_s is not None
    obs = b.step_s
    step = model_step_bounds(obs, k, k_running, plain_s, draft_s)
    tokens = Estimate(*(table.tokens_per_step(k, bound) for bound in ("value", "low", "high")))
    batch = float(b.batch)
    # a step time whose interval reaches zero leaves the rate unbounded above, not huge
    tok_s = Estimate(
        batch * tokens.value / step.value,
        batch * tokens.low / step.high,
        batch * tokens.high / step.low if step.low > 0 else math.inf,
    )
    plain_tok_s = batch / plain_s
    gain = Estimate(*(x / plain_tok_s - 1.0 for x in (tok_s.value, tok_s.low, tok_s.high)))
    return KOption(k, tokens, step, tok_s, gain, modelled=k != k_running)


def _crossover(bins: Sequence[BatchAdvice]) -> tuple[int | None, tuple[int, int | None] | None]:
    """The batch from which speculation loses at every bin above, and its interval."""

    def first_of_tail(pred: Callable[[BatchAdvice], bool]) -> int | None:
        start: int | None = None
        for b in bins:
            start = (b.batch if start is None else start) if pred(b) else None
        return start

    point = first_of_tail(lambda b: b.best_k == 0)
    low = first_of_tail(lambda b: b.verdict != PAYS)
    high = first_of_tail(lambda b: b.verdict == LOSES)
    if low is None:
        return point, None
    return point, (low, high)


def advice_json(advice: Advice) -> dict[str, Any]:
    """``advice`` as plain JSON values (for ``--json`` and recordings)."""
    out: dict[str, Any] = to_jsonable(advice)
    return out


# --- the advice as plain lines, for specwatch advise and the TUI view -------------------------


UNBOUNDED = "unbounded"
"""An interval end the data do not bound (a step time whose interval reaches zero)."""


def _end(x: float, fmt: str) -> str:
    return UNBOUNDED if math.isinf(x) or math.isnan(x) else format(x, fmt)


def _pm(e: Estimate, digits: int = 2) -> str:
    f = f".{digits}f"
    return f"{e.value:{f}} [{_end(e.low, f)}, {_end(e.high, f)}]"


def _pct(e: Estimate) -> str:
    return f"{e.value * 100:+.0f}% [{_end(e.low * 100, '+.0f')}, {_end(e.high * 100, '+.0f')}]"


def acceptance_lines(table: AcceptanceTable) -> list[str]:
    """``E[L(k')]`` for k' = 1..K, or why it is withheld."""
    if table.reason is not None:
        return [f"acceptance withheld: {table.reason}"]
    k = table.k_running or 0
    if table.model == CONSTANT_MODEL:
        head = f"acceptance from the mean accept length (K={k}; above K: unknown): {CONSTANT_MODEL}"
    else:
        head = f"acceptance over {table.drafts:.0f} drafted steps (K={k}; above K: unknown)"
    out = [head]
    for i, (p, e) in enumerate(zip(table.p, table.expected_len, strict=True), start=1):
        out.append(f"  k'={i}  p_{i} {_pm(p)}   E[L] {_pm(e)}")
    if table.draft_hit is not None:
        out.append(f"  draft-hit share {table.draft_hit:.2f} of decode steps")
    return out


def batch_lines(b: BatchAdvice) -> list[str]:
    """One batch: step time, plain, the k' table and its verdict."""
    step = f"{b.step_s.value * 1000:.1f} ms" if b.step_s else "?"
    plain = f"{b.plain_step_s * 1000:.1f} ms" if b.plain_step_s is not None else "?"
    cliff = f"  CLIFF {b.cliff:.1f}×" if b.cliff is not None else ""
    head = f"batch {b.batch}: step {step}, plain {plain}, {windows_words(b.windows)}{cliff}"
    if b.reason is not None:
        return [f"{head}: withheld, {b.reason}"]
    out = [head]
    for o in b.options:
        if o.k == 0:
            continue
        how = "model" if o.modelled else "observed"
        out.append(
            f"  k'={o.k}  {o.tok_s.value:.0f} tok/s  gain {_pct(o.gain)}  "
            f"step {o.step_s.value * 1000:.1f} ms ({how})"
        )
    plain_tok_s = b.batch / b.plain_step_s if b.plain_step_s else 0.0
    best = "off" if b.best_k == 0 else f"k={b.best_k}"
    sure = {PAYS: "speculation pays", LOSES: "speculation loses"}.get(b.verdict or "", "unclear")
    advised = "off" if b.advised_k == 0 else f"k={b.advised_k}"
    out.append(
        f"  plain {plain_tok_s:.0f} tok/s; best {best} ({sure}; within the interval: "
        f"{', '.join(str(k) for k in b.plausible_k)}); advised {advised}"
    )
    return out


def _at_the_top(advice: Advice) -> list[str]:
    """What the highest advised batch says, only where its interval says it."""
    advised = [b for b in advice.bins if b.verdict is not None]
    if not advised or advice.loses_from is not None:
        return []
    top = advised[-1]
    if top.verdict == PAYS:
        return [f"speculation still pays at the highest advised batch ({top.batch})"]
    return [f"at the highest advised batch ({top.batch}) the interval cannot tell whether it pays"]


def advice_lines(advice: Advice) -> list[str]:
    """The whole advice as plain strings: recommendation first, then the evidence."""
    out: list[str] = []
    if advice.recommendation is None and advice.acceptance.reason is not None and not advice.bins:
        # Nothing was modelled: the one reason is the whole answer (the acceptance table's
        # refusal would only say it again).
        return [f"no recommendation: {advice.reason or advice.acceptance.reason}"]
    if advice.recommendation is not None:
        out.append(f"recommendation ({advice.dialect.value}): {advice.recommendation}")
    else:
        out.append(f"no recommendation: {advice.reason or 'not enough data'}")
    if advice.loses_from is not None:
        out.append(f"speculation loses from batch {advice.loses_from} up (measured range)")
    if advice.loses_between is not None:
        low, high = advice.loses_between
        upper = f"batch {high}" if high is not None else "beyond the measured range"
        out.append(f"  crossover between batch {low} and {upper}")
    else:
        out.extend(_at_the_top(advice))
    if advice.syntax is not None and advice.recommendation is not None:
        where = advice.syntax.source
        out.append(
            "syntax: the current spelling (the server's command line was not read)"
            if where == "assumed"
            else f"syntax: read from {where}"
        )
    out.extend(advice.notes)
    out.append(f"assumes: {advice.assumptions}")
    out.extend(acceptance_lines(advice.acceptance))
    for b in advice.bins:
        out.extend(batch_lines(b))
    return out


__all__ = [
    "LOSES",
    "PAYS",
    "UNBOUNDED",
    "UNCLEAR",
    "Advice",
    "BatchAdvice",
    "KOption",
    "PlainBaseline",
    "acceptance_lines",
    "advice_json",
    "advice_lines",
    "advise",
    "batch_lines",
    "flat_baseline",
]
