"""Energy per token: GPU power over a metrics window against the tokens it generated, and the
share of it spent on rejected draft tokens. Pure: fed GPU ticks and windows, no NVML here.

The live figure (:class:`PowerLog`) sums each GPU's energy counter growth over the window (its
power readings integrated over the window's ``dt`` where it has no counter) against the window's
generated tokens; a benchmark's (:func:`run_energy`) adds the counters' growth over the runs
(``GpuRunSummary.energy_j``). Which GPUs count is stated in the figure: the busy GPUs of a
benchmark, every GPU the source reads live (a node's other tenants included; the fleet's
Prometheus source reads only the server's). A figure without a power reading is ``None`` with
the reason, never an estimate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.core.gpu import GpuTick
    from specwatch.core.gpu_summary import GpuRunSummary
    from specwatch.core.server import MetricsWindow, SpecConfig
    from specwatch.core.snapshot_records import Snapshot

KEPT_TICKS = 600
"""GPU ticks kept for the windows to come: minutes at the default rates."""
STALE_S = 5.0
"""A window whose newest GPU tick is older than this (before its end) has no power reading."""


@dataclass(frozen=True, slots=True)
class Energy:
    """GPU energy against generated tokens over one window or benchmark."""

    joules: float | None
    """GPU energy over the span (``None``: not known, see :attr:`reason`)."""
    tokens: float | None
    """Tokens generated over the span."""
    seconds: float
    gpus: tuple[int, ...] = ()
    """The GPUs counted, by index."""
    scope: str = ""
    """Which GPUs those are, in words (``"all read"``, ``"busy"``)."""
    reason: str | None = None
    """Why :attr:`tokens_per_joule` is unknown."""
    rejected_share: float | None = None
    """Share of the verify steps' positions that held a rejected draft token."""
    rejected_reason: str | None = None
    """Why :attr:`rejected_share` is unknown."""

    @property
    def tokens_per_joule(self) -> float | None:
        """Tokens per joule of GPU energy."""
        if self.joules is None or not self.tokens or self.joules <= 0:
            return None
        return self.tokens / self.joules

    @property
    def joules_per_token(self) -> float | None:
        """Joules of GPU energy per token."""
        if self.joules is None or not self.tokens or self.tokens <= 0:
            return None
        return self.joules / self.tokens

    @property
    def power_w(self) -> float | None:
        """Mean power summed over the GPUs counted."""
        return self.joules / self.seconds if self.joules is not None and self.seconds > 0 else None

    @property
    def rejected_joules(self) -> float | None:
        """Joules spent on rejected draft positions (:attr:`rejected_share` of the energy)."""
        if self.joules is None or self.rejected_share is None:
            return None
        return self.joules * self.rejected_share

    def words(self) -> str:
        """One line: ``2.91 tok/J · 0.344 J/tok · 812 W over GPUs 0–7 (all read) · rejected
        drafts 18% (146 W)``, or ``unknown: why``."""
        per_j, per_tok = self.tokens_per_joule, self.joules_per_token
        if per_j is None or per_tok is None:
            power = self.power_w
            known = f" ({power:.0f} W over {self.gpu_words()})" if power is not None else ""
            return f"unknown: {self.reason or 'no tokens'}{known}"
        out = f"{per_j:.3g} tok/J · {per_tok:.3g} J/tok · {self.power_w or 0:.0f} W over "
        out += self.gpu_words()
        rejected = self.rejected_joules
        if rejected is not None and self.rejected_share is not None and self.seconds > 0:
            out += f" · rejected drafts {self.rejected_share:.0%} ({rejected / self.seconds:.0f} W)"
        else:
            out += f" · rejected drafts unknown: {self.rejected_reason or 'not reported'}"
        return out

    def gpu_words(self) -> str:
        """``GPUs 0–7 (all read)``, ``GPU 2 (busy)``."""
        ids = self.gpus
        if not ids:
            return "no GPUs"
        run = len(ids) > 2 and list(ids) == list(range(ids[0], ids[-1] + 1))
        names = f"{ids[0]}–{ids[-1]}" if run else ",".join(map(str, ids))
        head = "GPU" if len(ids) == 1 else "GPUs"
        return f"{head} {names} ({self.scope})" if self.scope else f"{head} {names}"


def draft_length(spec: SpecConfig | None) -> int | None:
    """Drafts a verify step carries: SGLang's chain (``num_steps``; its ``num_draft_tokens``
    counts the root too), else ``num_draft_tokens`` (vLLM's ``num_speculative_tokens``)."""
    if spec is None:
        return None
    return spec.num_steps if spec.num_steps else spec.num_draft_tokens


def rejected_share(
    w: MetricsWindow, drafts_per_step: int | None = None
) -> tuple[float | None, str | None]:
    """Share of the window's verified positions that held a rejected draft, or why unknown.

    A verify step with ``k`` drafts computes ``k + 1`` positions and keeps the accepted ones
    and the bonus token; the rejected positions are ``k × (1 − acceptance)``, or
    ``k + 1 − accept length``. With the counts (``spec_drafts``, ``spec_accepted_per_pos``)
    plain decode steps (``decode_steps`` beyond the drafted ones) join the denominator at one
    position each. ``k`` is the window's number of positions, else ``drafts_per_step``.
    """
    positions = w.per_position_acceptance
    k = len(positions) if positions else drafts_per_step or 0
    drafts, accepted = w.spec_drafts, w.spec_accepted_per_pos
    if k and drafts and accepted is not None:
        rejected = max(0.0, drafts * k - sum(accepted))
        plain = max(0.0, (w.decode_steps or 0.0) - drafts)
        return rejected / (drafts * (k + 1) + plain), None
    rate = w.draft_acceptance_rate
    if k and rate is not None:
        return k * (1.0 - rate) / (k + 1), None
    if k and w.accept_length is not None:
        return min(1.0, max(0.0, (k + 1 - w.accept_length) / (k + 1))), None
    if rate is None and w.accept_length is None:
        return None, "the server reports no draft acceptance"
    if not k:
        return None, "the server reports no draft length"
    return None, "no drafts verified in the window"


class PowerLog:
    """The newest GPU ticks' power readings, for the energy of each window as it arrives."""

    def __init__(self, keep: int = KEPT_TICKS) -> None:
        self._ticks: deque[tuple[float, tuple[tuple[int, float | None, str], ...]]] = deque(
            maxlen=keep
        )
        self._counters: deque[tuple[float, dict[int, float]]] = deque(maxlen=keep)

    def add(self, tick: GpuTick) -> None:
        """Take one tick (oldest first); a failed tick reads as no power."""
        readings = tuple(
            (s.index, None if s.lost else s.power_w, _why(s.lost, s.missing.get("power_w")))
            for s in tick.samples
        )
        self._ticks.append((tick.t, readings))
        counters = {s.index: s.energy_j for s in tick.samples if s.energy_j is not None}
        self._counters.append((tick.t, counters))

    def clear(self) -> None:
        """Forget every tick (the GPU source changed)."""
        self._ticks.clear()
        self._counters.clear()

    def energy(
        self, w: MetricsWindow, no_gpus: str | None = None, spec: SpecConfig | None = None
    ) -> Energy:
        """The energy of window ``w``: each GPU's energy counter over ``(t − dt, t]`` where
        it has one at both ends, else its power readings integrated over the window.

        A reading covers the time since the one before it (NVML's power is an average over
        the past interval), the newest one holds to the window's end, and with no reading
        inside the window the one just before it holds over the whole window (a GPU rate no
        faster than the scrape still gives every window a figure).

        Args:
            w: The window (``dt > 0``).
            no_gpus: Why there are no GPU readings at all, when that is known.
            spec: The server's speculative setup (its draft length).
        """
        tokens = w.tokens if w.tokens is not None else _rate_tokens(w)
        share, share_why = rejected_share(w, draft_length(spec))

        def unknown(reason: str, gpus: tuple[int, ...] = ()) -> Energy:
            return Energy(None, tokens, w.dt, gpus, "all read", reason, share, share_why)

        t0, t1 = w.t - w.dt, w.t
        inside = [k for k in self._ticks if t0 < k[0] <= t1]
        before = [k for k in self._ticks if k[0] <= t0][-1:]
        newest = inside[-1][0] if inside else before[0][0] if before else None
        if newest is None or newest < t1 - max(w.dt, STALE_S):
            return unknown(no_gpus or "no GPU readings over the window")
        readings: dict[int, list[tuple[float, float]]] = {}
        held: dict[int, float] = {}
        why: dict[int, str] = {}
        for ticks, into in ((before, held), (inside, None)):
            for t, gpus_read in ticks:
                for index, power, reason in gpus_read:
                    readings.setdefault(index, [])
                    if power is None:
                        why.setdefault(index, reason)
                    elif into is not None:
                        into[index] = power
                    else:
                        readings[index].append((t, power))
        gpus = tuple(sorted(readings))
        if not gpus:
            return unknown(no_gpus or "no GPUs read")
        counted = self._counted(t0, t1, gpus)
        joules = 0.0
        for index in gpus:
            if index in counted:
                joules += counted[index]
                continue
            points = readings[index]
            if not points and index not in held:
                reason = why.get(index, "N/A")
                return unknown(f"GPU {index} gives no power reading ({reason})", gpus)
            if not points:
                joules += held[index] * w.dt
                continue
            prev = t0
            for t, power in points:
                joules += power * (t - prev)
                prev = t
            joules += points[-1][1] * (t1 - prev)
        if tokens is None:
            return unknown("the server reports no generated-token count", gpus)
        idle = None if tokens > 0 else "no tokens generated in the window"
        return Energy(joules, tokens, w.dt, gpus, "all read", idle, share, share_why)

    def _counted(self, t0: float, t1: float, gpus: tuple[int, ...]) -> dict[int, float]:
        """Each GPU's energy counter growth between the newest ticks at or before ``t0`` and
        ``t1``, scaled to the window: the board's own integral of its power, which a reading
        taken at an instant misses when the load moves within a tick."""
        start = [c for c in self._counters if c[0] <= t0][-1:]
        end = [c for c in self._counters if t0 < c[0] <= t1][-1:]
        if not start or not end or end[0][0] <= start[0][0]:
            return {}
        (ta, a), (tb, b) = start[0], end[0]
        scale = (t1 - t0) / (tb - ta)
        return {i: (b[i] - a[i]) * scale for i in gpus if i in a and i in b and b[i] >= a[i]}


def _why(lost: bool, missing: str | None) -> str:
    return "lost" if lost else missing or "N/A"


def _rate_tokens(w: MetricsWindow) -> float | None:
    return None if w.gen_tok_s is None else w.gen_tok_s * w.dt


def run_energy(
    gpus: Sequence[GpuRunSummary],
    seconds: float,
    accept_length: float | None = None,
    draft_length: int | None = None,
) -> Energy:
    """A benchmark's energy: the energy counters' growth summed over ``gpus`` (its busy GPUs),
    against the tokens the per-GPU joules per token were taken over.

    The rejected share is ``(k + 1 − accept length) / (k + 1)`` for ``k`` drafts a step (the
    accept length counts the bonus token): the same share :func:`rejected_share` takes from
    the acceptance rate, over the verify steps only.
    """
    ids = tuple(sorted(g.index for g in gpus))
    share: float | None = None
    why: str | None = None
    if accept_length is None:
        why = "the server reports no draft acceptance"
    elif not draft_length:
        why = "the server reports no draft length"
    else:
        share = min(1.0, max(0.0, (draft_length + 1 - accept_length) / (draft_length + 1)))

    def figure(joules: float | None, tokens: float | None, reason: str | None) -> Energy:
        return Energy(joules, tokens, seconds, ids, "busy", reason, share, why)

    if not gpus:
        return figure(None, None, "no busy GPU readings")
    lacking = [g.index for g in gpus if g.energy_j is None]
    if lacking:
        return figure(None, None, f"GPU {lacking[0]} has no energy counter reading")
    tokens = next(
        (g.energy_j / g.joules_per_token for g in gpus if g.energy_j and g.joules_per_token),
        None,
    )
    joules = sum(g.energy_j or 0.0 for g in gpus)
    return figure(joules, tokens, None if tokens else "no tokens counted")


def snapshot_energy(snap: Snapshot) -> Energy:
    """:func:`run_energy` of a snapshot: its busy GPUs over its measured runs."""
    from specwatch.core.snapshot_figures import overall_gpus

    return run_energy(
        overall_gpus(snap),
        sum(r.wall_s for r in snap.runs),
        snap.accept_length,
        draft_length(snap.server.speculative),
    )


def run_joules_per_token(snap: Snapshot) -> list[float]:
    """Each measured run's joules per token, summed over its busy GPUs (runs lacking one are
    skipped): the samples a change in energy per token is judged on."""
    from specwatch.core.gpu import busy_summaries

    out: list[float] = []
    for run in snap.runs:
        busy = busy_summaries(run.gpus)
        if busy and all(g.joules_per_token is not None for g in busy):
            out.append(sum(g.joules_per_token or 0.0 for g in busy))
    return out


@dataclass(frozen=True, slots=True)
class EnergyChange:
    """Energy per token of two benchmarks, judged as tok/s is: Welch's 95% interval over the
    runs and at least the verdict's smallest change."""

    a: Energy
    b: Energy
    change: float | None
    """Relative change of joules per token, ``B / A − 1``."""
    beyond_noise: bool
    noise_known: bool
    """Both sides have two runs or more with a figure (else the change is taken as it is)."""

    def note(self, tok_s_level: bool) -> str | None:
        """``energy per token +12% (0.344 → 0.385 J/tok) at level tok/s``, when it moved."""
        if self.change is None or not self.beyond_noise:
            return None
        ja, jb = self.a.joules_per_token, self.b.joules_per_token
        level = " at level tok/s: the same speed costs more power" if self.change > 0 else ""
        if not tok_s_level:
            level = ""
        elif self.change < 0:
            level = " at level tok/s: the same speed for less power"
        noise = "" if self.noise_known else " (noise unknown: fewer than two runs)"
        return (
            f"energy per token {self.change * 100:+.0f}% ({ja:.3g} → {jb:.3g} J/tok){level}{noise}"
        )


def energy_change(a: Snapshot, b: Snapshot) -> EnergyChange:
    """How energy per token moved from ``a`` to ``b``."""
    from specwatch.core.judge import MIN_CHANGE
    from specwatch.core.stats import welch

    ea, eb = snapshot_energy(a), snapshot_energy(b)
    ja, jb = ea.joules_per_token, eb.joules_per_token
    if ja is None or jb is None or ja <= 0:
        return EnergyChange(ea, eb, None, False, False)
    change = jb / ja - 1.0
    w = welch(run_joules_per_token(a), run_joules_per_token(b))
    big = abs(change) >= MIN_CHANGE
    if w is None:
        return EnergyChange(ea, eb, change, big, False)
    return EnergyChange(ea, eb, change, big and w.significant, True)


__all__ = [
    "KEPT_TICKS",
    "STALE_S",
    "Energy",
    "EnergyChange",
    "PowerLog",
    "draft_length",
    "energy_change",
    "rejected_share",
    "run_energy",
    "run_joules_per_token",
    "snapshot_energy",
]
