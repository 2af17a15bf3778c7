"""The draft advisor's result as plain lines, for ``specwatch advise`` and the TUI view."""

from __future__ import annotations

import math

from specwatch.core.acceptance import CONSTANT_MODEL, AcceptanceTable, Estimate, windows_words
from specwatch.core.draft_advisor import LOSES, PAYS, Advice, BatchAdvice

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


__all__ = ["UNBOUNDED", "acceptance_lines", "advice_lines", "batch_lines"]
