"""The verdict rule: a reference and a current set of figures in, one :class:`Outcome` out.

``specwatch compare`` calls :func:`judge` with one :class:`Figures` per snapshot (per-run tok/s);
a live verdict calls it with a reference window and the current window. The rule, in order:

1. **Change beyond noise.** Welch's t-test on the tok/s samples gives a 95% confidence interval
   for ``mean(current) − mean(reference)``. The change counts when that interval excludes 0
   *and* the relative change is at least ``min_change`` (2%); without an interval (fewer than
   two samples on a side) the 2% alone decides. Otherwise: **no significant change**.
2. **GPU state.** If decode followed the SM clock, tok/s would scale by
   ``expected = clock(current) / clock(reference)`` (the slowest busy GPU's clock). With the
   DRAM activity known (the share of a step that waits on HBM), ``expected`` blends the SM and
   memory clock ratios by that share (:func:`specwatch.core.memory_bound.blended_ratio`): an
   8% SM clock drop on a decode 80% memory-bound predicts −1.7%, and does not explain −8%. The
   change is **explained by GPU state** when ``expected`` moves the same way and accounts for
   at least ``min_share`` (75%) of the change in log terms, or lies inside the 95% interval of
   the observed ratio. A clock change larger than the tok/s change still explains it (decode
   is partly memory-bound). Without a DRAM reading, where the SM clock does not explain it, the
   **memory clock** term (:func:`memory_term`) may: a power cap that lowers the memory clock
   slows a memory-bound decode about as much, and the reason then names the memory clock.
3. **Acceptance.** At a fixed step time tok/s scales with the accept length (tokens per verify
   step). **Acceptance changed** when the accept length moved by at least
   :data:`ACCEPT_MIN_CHANGE` in the direction of tok/s and accounts for ``min_share`` of it.
4. **Host CPU.** **Host CPU contention** when the slower side's server was short of CPU and
   the faster side's was not, by the rule of :mod:`specwatch.core.host` (its threads' wait for
   a CPU, the run queue against the cores, steal). Before load: a starved server also
   processes prompts more slowly, which reads as a change of load.
5. **Load.** **Load changed** when the mean running requests differ by more than
   :data:`LOAD_REL_CHANGE` (25%) and at least :data:`LOAD_MIN_RUNNING` requests, or prompt tok/s
   by more than 25% and at least :data:`LOAD_MIN_PROMPT_TOK_S`, or the DRAM bytes read per
   token by 5% (more work per token: longer contexts read more KV cache): the two measurements
   were not taken under the same load, so the comparison cannot blame the code.
6. No SM clock readings on a side: **GPU state unknown** (blaming the code without knowing the
   GPUs' state is the story's mistake in reverse). Otherwise **not explained by GPU state**.

Above all of these, **configuration changed** when the two sides' launch configurations differ
(:func:`specwatch.core.config_differences.config_differences`: a draft length, speculation switched
off, another model or parallelism), with or without a change beyond noise: measurements under
two configurations are not like for like, and what the rule found otherwise follows in the
reasons.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specwatch.core.config_differences import (
    ConfigDifference,
    config_differences,
    differences_text,
)
from specwatch.core.host import HostSpan, host_contention
from specwatch.core.launch_config import LaunchConfig
from specwatch.core.memory_bound import blended_ratio, bytes_per_token_change, carried_by_memory
from specwatch.core.outcomes import Outcome
from specwatch.core.stats import Summary, Welch, mean, summarize, welch

MIN_CHANGE = 0.02
"""Smallest relative tok/s change that counts, however tight the confidence interval."""
MIN_SHARE = 0.75
"""Share of the observed change (log terms) a cause must account for."""
ACCEPT_MIN_CHANGE = 0.02
"""Smallest relative accept-length change that can explain anything."""
LOAD_REL_CHANGE = 0.25
"""Relative change of running requests or prompt tok/s that counts as a load change."""
LOAD_MIN_RUNNING = 0.5
"""…and at least this many requests apart (1.0 against 1.2 running is no change of load)."""
LOAD_MIN_PROMPT_TOK_S = 10.0
"""…and at least this many prompt tok/s apart."""


@dataclass(frozen=True, slots=True)
class Figures:
    """What one side of a comparison measured; ``None`` where it is not known."""

    tok_s: tuple[float, ...]
    """tok/s samples: one per run (a snapshot) or per interval (a live window)."""
    slowest_sm_clock_mhz: float | None = None
    """Mean SM clock of the slowest busy GPU."""
    board_max_sm_clock_mhz: float | None = None
    """That GPU's maximum SM clock (for the deficit: ``−7%``)."""
    clock_reasons: frozenset[str] = frozenset()
    """Clock-event reasons active on a busy GPU (idle ones excluded)."""
    running_requests: float | None = None
    prompt_tok_s: float | None = None
    accept_length: float | None = None
    slowest_mem_clock_mhz: float | None = None
    """The lowest mean memory clock of a busy GPU (a memory-bound decode follows it)."""
    dram_active: float | None = None
    """Mean DRAM activity of the busy GPUs (0-1): the share of a step that waits on HBM."""
    dram_per_token: float | None = None
    """``Σ dram_active × memory clock / tok/s``: proportional to the bytes read per token
    (:mod:`specwatch.core.memory_bound`)."""
    host: HostSpan | None = None
    """The host's CPU over the side's runs or window (:mod:`specwatch.core.host`)."""
    launch: LaunchConfig | None = None
    """The server's launch configuration (``None``: not known)."""

    @property
    def mean_tok_s(self) -> float | None:
        """Mean tok/s, ``None`` with no samples."""
        return mean(self.tok_s) if self.tok_s else None

    @property
    def clock_deficit(self) -> float | None:
        """``clock / max − 1`` of the slowest GPU (``−0.07`` for 7% below its maximum)."""
        clock, top = self.slowest_sm_clock_mhz, self.board_max_sm_clock_mhz
        if clock is None or not top:
            return None
        return clock / top - 1.0


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict and the numbers behind it."""

    outcome: Outcome
    reasons: tuple[str, ...]
    """Sentences with the numbers behind the verdict, the deciding one first."""
    tok_s_reference: Summary
    tok_s_current: Summary
    welch: Welch | None
    change: float | None
    """Relative change of mean tok/s, ``current / reference − 1``."""
    change_low: float | None
    change_high: float | None
    beyond_noise: bool
    expected_ratio: float | None
    """``clock(current) / clock(reference)``."""
    observed_ratio: float | None
    observed_ratio_low: float | None
    observed_ratio_high: float | None
    share: float | None
    """``ln expected / ln observed``: 1.0 means the clocks account for all of the change."""
    explained_by_clock: bool
    accept_share: float | None = None
    """``ln (accept length ratio) / ln observed``."""
    load_changes: tuple[str, ...] = ()
    """What about the load differs (``"running requests 1.0 → 3.1"``)."""
    term: str = "SM clock"
    """The clock whose change carried a GPU-state verdict (``"memory clock"``: see
    :func:`memory_term`)."""
    host: str | None = None
    """Why the slower side was short of CPU (:func:`specwatch.core.host.host_contention`)."""
    configuration: tuple[ConfigDifference, ...] = ()
    """The launch settings that differ (``configuration changed``)."""

    @property
    def reason(self) -> str:
        """The reasons as one line."""
        return "; ".join(self.reasons)

    @property
    def noise(self) -> float | None:
        """Half the width of the t interval of the relative change (``0.09`` for ±9%), before
        :attr:`change_low` is cut at −100%."""
        w, m = self.welch, self.tok_s_reference.mean
        if w is not None and m:
            return (w.ci_high - w.ci_low) / 2.0 / m
        if self.change_low is None or self.change_high is None:
            return None
        return (self.change_high - self.change_low) / 2.0  # an older recording's, kept whole


def _apart(a: float | None, b: float | None, rel: float, floor: float) -> bool:
    if a is None or b is None:
        return False
    return abs(b - a) > max(floor, rel * max(abs(a), abs(b)))


def load_changes(reference: Figures, current: Figures) -> tuple[str, ...]:
    """What about the load differs beyond the thresholds (empty when it is the same or unknown)."""
    out: list[str] = []
    ra, rb = reference.running_requests, current.running_requests
    if _apart(ra, rb, LOAD_REL_CHANGE, LOAD_MIN_RUNNING):
        out.append(f"running requests {ra:.1f} → {rb:.1f}")
    pa, pb = reference.prompt_tok_s, current.prompt_tok_s
    if _apart(pa, pb, LOAD_REL_CHANGE, LOAD_MIN_PROMPT_TOK_S):
        out.append(f"prompt tok/s {pa:.0f} → {pb:.0f}")
    work = bytes_per_token_change(reference.dram_per_token, current.dram_per_token)
    if work is not None:
        more = "more" if work > 0 else "less"
        out.append(f"DRAM bytes per token {work * 100:+.1f}% ({more} work per token)")
    return tuple(out)


def _share(ratio: float | None, observed: float | None) -> float | None:
    if ratio is None or observed is None or ratio <= 0 or observed <= 0:
        return None
    log_obs = math.log(observed)
    return None if log_obs == 0.0 else math.log(ratio) / log_obs


def _clock_words(f: Figures) -> str:
    deficit = f.clock_deficit
    if deficit is None:
        return ""
    active = ", ".join(sorted(f.clock_reasons)) or "no clock-event reason"
    return f"{deficit * 100:+.1f}% of its {f.board_max_sm_clock_mhz:.0f} MHz maximum, {active}"


MEM_MIN_CHANGE = 0.02
"""Smallest relative memory-clock change that can explain anything."""


def memory_term(
    reference: Figures,
    current: Figures,
    observed: float | None,
    low: float | None,
    high: float | None,
) -> tuple[str, float] | None:
    """The memory-clock term: (its words, its share of the change; 1.0 when the predicted ratio
    lies in the observed interval), when the memory clock moved by :data:`MEM_MIN_CHANGE`.

    A power cap lowers the memory clock too, and a memory-bound decode follows it where the SM
    clock alone predicts too little.
    """
    ma, mb = reference.slowest_mem_clock_mhz, current.slowest_mem_clock_mhz
    if not ma or mb is None or abs(mb / ma - 1.0) < MEM_MIN_CHANGE:
        return None
    ratio = mb / ma
    share = _share(ratio, observed)
    if low is not None and high is not None and low <= ratio <= high:
        share = 1.0
    if share is None:
        return None
    return f"memory clock {ma:.0f} → {mb:.0f} MHz ({(ratio - 1) * 100:+.1f}%)", share


def judge(
    reference: Figures,
    current: Figures,
    *,
    reference_name: str = "the reference",
    current_name: str = "the current one",
    min_change: float = MIN_CHANGE,
    min_share: float = MIN_SHARE,
) -> Judgement:
    """Judge ``current`` against ``reference`` (see the module docstring for the rule)."""
    va, vb = list(reference.tok_s), list(current.tok_s)
    sa, sb = summarize(va), summarize(vb)
    w = welch(va, vb)
    change = change_low = change_high = None
    observed = obs_low = obs_high = None
    if sa.mean and sb.mean is not None:
        observed = sb.mean / sa.mean
        change = observed - 1.0
        if w is not None:
            # tok/s is never negative, so no change is below -100%: the t interval cut there
            # covers the true change as often as the whole one (a contended side's runs spread
            # wide enough to reach past it)
            change_low, change_high = max(-1.0, w.ci_low / sa.mean), w.ci_high / sa.mean
            obs_low, obs_high = 1.0 + change_low, 1.0 + change_high
    if change is None:
        beyond = False
    elif w is not None:
        beyond = w.significant and abs(change) >= min_change
    else:
        beyond = abs(change) >= min_change

    clock_a, clock_b = reference.slowest_sm_clock_mhz, current.slowest_sm_clock_mhz
    sm_ratio = clock_b / clock_a if clock_a and clock_b is not None else None
    mem_a, mem_b = reference.slowest_mem_clock_mhz, current.slowest_mem_clock_mhz
    mem_ratio = mem_b / mem_a if mem_a and mem_b is not None else None
    dram = reference.dram_active if reference.dram_active is not None else current.dram_active
    expected, blended = (
        (None, False) if sm_ratio is None else blended_ratio(sm_ratio, mem_ratio, dram)
    )
    share = _share(expected, observed)
    inside = (
        expected is not None
        and obs_low is not None
        and obs_high is not None
        and obs_low <= expected <= obs_high
    )
    explained = expected is not None and ((share is not None and share >= min_share) or inside)
    # With the DRAM activity known the blend already weighs the memory clock by its share.
    memory = (
        None
        if explained or blended
        else memory_term(reference, current, observed, obs_low, obs_high)
    )
    acc_a, acc_b = reference.accept_length, current.accept_length
    acc_ratio = acc_b / acc_a if acc_a and acc_b is not None else None
    accept_share = _share(acc_ratio, observed)
    accept_explains = (
        acc_ratio is not None
        and abs(acc_ratio - 1.0) >= ACCEPT_MIN_CHANGE
        and accept_share is not None
        and accept_share >= min_share
    )
    loads = load_changes(reference, current)
    host = None
    if change is not None:
        slower, faster = (current, reference) if change < 0 else (reference, current)
        names = (current_name, reference_name) if change < 0 else (reference_name, current_name)
        host = host_contention(slower.host, faster.host, slower_name=names[0], faster_name=names[1])

    pct = f"{change * 100:+.1f}%" if change is not None else "?"
    ci = (
        f" (95% CI {change_low * 100:+.1f}% to {change_high * 100:+.1f}%)"
        if change_low is not None and change_high is not None
        else ""
    )
    head = f"tok/s {pct}{ci}"
    reasons: list[str] = []
    clocks = ""
    if expected is not None and clock_a is not None and clock_b is not None:
        clocks = f"slowest-GPU SM clock {clock_a:.0f} → {clock_b:.0f} MHz"
        if blended and dram is not None:
            if mem_a is not None and mem_b is not None and mem_ratio != 1.0:
                clocks += f", memory clock {mem_a:.0f} → {mem_b:.0f} MHz"
            clocks += f" at {dram:.0%} DRAM activity (decode is memory-bound)"
        clocks += f" predicts {(expected - 1) * 100:+.1f}%"
    if change is None:
        outcome = Outcome.NO_CHANGE
        reasons.append("no tok/s figures to compare")
    elif not beyond and host is not None:
        # a contended side's runs spread wide, so "within noise" would clear a measurement the
        # host spoiled (a real llama-server beside CPU hogs, docs/bench-compare.md)
        outcome = Outcome.HOST
        why = "within noise" if w is None or not w.significant else f"smaller than {min_change:.0%}"
        reasons.append(f"{head}: {why}, but {host}; benchmark again on a quiet host")
    elif not beyond:
        outcome = Outcome.NO_CHANGE
        why = "within noise" if w is None or not w.significant else f"smaller than {min_change:.0%}"
        reasons.append(f"{head}: {why}")
    elif explained or (memory is not None and memory[1] >= min_share):
        outcome = Outcome.GPU
        if explained:
            reasons.append(f"{head}; {clocks}")
        else:
            assert memory is not None
            reasons.append(f"{memory[0]} explains {pct} tok/s (decode is memory-bound)")
        if words := _clock_words(current):
            reasons.append(f"{current_name}: slowest GPU {words}")
    elif accept_explains and acc_a is not None and acc_b is not None:
        outcome = Outcome.ACCEPTANCE
        reasons.append(
            f"{head}; accept length {acc_a:.2f} → {acc_b:.2f} "
            f"({(acc_b / acc_a - 1) * 100:+.1f}%) accounts for it"
        )
    elif host is not None:
        outcome = Outcome.HOST
        reasons.append(f"{head}; {host}")
    elif loads:
        outcome = Outcome.LOAD
        reasons.append(f"{head}; load changed: {', '.join(loads)}")
    elif expected is None:
        outcome = Outcome.UNKNOWN
        missing = " and ".join(
            n for n, c in ((reference_name, clock_a), (current_name, clock_b)) if c is None
        )
        reasons.append(
            f"{head}; no SM clock readings in {missing}: benchmark on the GPU box "
            "with NVML to tell GPU state from code"
        )
    else:
        outcome = Outcome.CODE
        part = f", {share * 100:.0f}% of the change" if share is not None and share > 0 else ""
        reasons.append(f"{head}; {clocks}{part}: the clocks do not account for it")
    configuration = config_differences(reference.launch, current.launch)
    if configuration:
        outcome = Outcome.CONFIG
        reasons.insert(0, f"configuration changed: {differences_text(configuration)}")
    return Judgement(
        outcome=outcome,
        reasons=tuple(reasons),
        tok_s_reference=sa,
        tok_s_current=sb,
        welch=w,
        change=change,
        change_low=change_low,
        change_high=change_high,
        beyond_noise=beyond,
        expected_ratio=expected,
        observed_ratio=observed,
        observed_ratio_low=obs_low,
        observed_ratio_high=obs_high,
        share=share,
        explained_by_clock=explained,
        accept_share=accept_share,
        load_changes=loads,
        host=host,
        term=_term(explained, blended, memory, sm_ratio, mem_ratio, dram),
        configuration=configuration,
    )


def _term(
    explained: bool,
    blended: bool,
    memory: tuple[str, float] | None,
    sm_ratio: float | None,
    mem_ratio: float | None,
    dram: float | None,
) -> str:
    """The clock whose change carried a GPU-state verdict."""
    if explained and blended and sm_ratio is not None and dram is not None:
        return "memory clock" if carried_by_memory(sm_ratio, mem_ratio, dram) else "SM clock"
    return "SM clock" if explained or memory is None else "memory clock"


__all__ = [
    "ACCEPT_MIN_CHANGE",
    "LOAD_MIN_PROMPT_TOK_S",
    "LOAD_MIN_RUNNING",
    "LOAD_REL_CHANGE",
    "MEM_MIN_CHANGE",
    "MIN_CHANGE",
    "MIN_SHARE",
    "Figures",
    "Judgement",
    "judge",
    "load_changes",
    "memory_term",
]
