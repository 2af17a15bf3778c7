"""The simulated inference engine: continuous batching, driven lazily by the clock.

Nothing runs on its own: :meth:`Engine.advance_to` executes every step whose end time is at or
before ``t``. A step is decided when it starts (its batch, its latency from the GPUs' pace at
that moment) and takes effect when it ends (tokens, acceptance draws, finished requests).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from specwatch.sim.config import SimConfig
from specwatch.sim.gpus import SimGpus
from specwatch.sim.truth import GroundTruth, RequestTruth, StepRecord


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """Tokens one request received at the end of one step."""

    t: float
    n: int
    """New tokens in this step (1 for the prefill token)."""
    total: int
    """Cumulative completion tokens after this step."""
    prefill: bool
    proposed: int = 0
    """The request's cumulative proposed drafts after this step."""
    accepted: int = 0
    """The request's cumulative accepted drafts after this step."""


@dataclass(eq=False, slots=True)
class SimRequest:
    """One request inside the engine (HTTP, background or a health probe)."""

    rid: str
    seq: int
    prompt_tokens: int
    max_tokens: int
    stop_at: int
    """Completion length at which it finishes (``max_tokens`` or an earlier seeded EOS)."""
    background: bool
    probe: bool
    t_arrival: float
    engine_index: int = 0
    endpoint: str = ""
    streaming: bool = True
    slot: int = 0
    t_admit: float | None = None
    t_first: float | None = None
    t_last: float | None = None
    t_end: float | None = None
    generated: int = 0
    steps: int = 0
    drafted_steps: int = 0
    accepted: int = 0
    proposed: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    histogram: list[int] = field(default_factory=list)
    """``histogram[j]`` = verify steps that accepted exactly ``j`` drafts."""
    step_latencies: list[float] = field(default_factory=list)
    per_step: list[tuple[int, int]] = field(default_factory=list)
    """(accepted, proposed) drafts of each decode step."""
    events: list[TokenEvent] = field(default_factory=list)
    finish_reason: str | None = None
    """``"length"``, ``"stop"`` or ``"abort"``; ``None`` while running."""
    prefill_s: float = 0.0

    @property
    def done(self) -> bool:
        """Finished (or aborted)."""
        return self.finish_reason is not None

    @property
    def aborted(self) -> bool:
        """Dropped by a restart."""
        return self.finish_reason == "abort"


class EngineListener(Protocol):
    """Who hears about engine progress (the server's telemetry)."""

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """``req`` got its first token at ``t``."""

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """A batch step ended; ``decoded`` holds (request, tokens, accepted, proposed)."""

    def on_finish(self, req: SimRequest, t: float) -> None:
        """``req`` finished at ``t``."""


@dataclass(slots=True)
class _Step:
    t_start: float
    t_end: float
    latency_s: float
    decode: list[SimRequest]
    prefill: list[SimRequest]
    pace: float
    warm: bool


class Engine:
    """Continuous batching over simulated GPUs. Not thread-safe: the world holds the lock."""

    def __init__(
        self,
        config: SimConfig,
        gpus: SimGpus,
        truth: GroundTruth,
        listener: EngineListener,
        rng: random.Random,
        start_t: float,
    ) -> None:
        self.config = config
        self.gpus = gpus
        self.truth = truth
        self.listener = listener
        self.rng = rng
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.step: _Step | None = None
        self._arrivals: list[tuple[float, int, int]] = []
        """Background users' next arrivals: (t, order, user)."""
        self._order = 0
        self._seq = 0
        self.t = start_t
        self.start_t = start_t
        for user in range(config.background_concurrency):
            self._schedule_user(user, start_t + self.rng.uniform(0.0, 1.0))

    # --- submitting ----------------------------------------------------------------------

    def submit(
        self,
        t: float,
        prompt_tokens: int,
        max_tokens: int,
        ignore_eos: bool = True,
        *,
        background: bool = False,
        probe: bool = False,
        endpoint: str = "",
        streaming: bool = True,
    ) -> SimRequest:
        """Queue a request arriving at ``t`` (the caller has advanced the engine to ``t``)."""
        max_tokens = max(1, max_tokens)
        stop_at = max_tokens
        if not ignore_eos and self.config.eos_per_token > 0:
            u = self.rng.random()
            natural = 1 + int(math.log(1.0 - u) / math.log(1.0 - self.config.eos_per_token))
            stop_at = min(max_tokens, natural)
        seq = self._seq
        self._seq += 1
        prefix = "bg" if background else ("probe" if probe else "req")
        req = SimRequest(
            rid=f"{prefix}-{seq:06d}",
            seq=seq,
            prompt_tokens=max(1, prompt_tokens),
            max_tokens=max_tokens,
            stop_at=stop_at,
            background=background,
            probe=probe,
            t_arrival=t,
            engine_index=seq % max(1, self.config.dp_engines),
            endpoint=endpoint,
            streaming=streaming,
            accepted_per_pos=[0] * self.config.max_accepted,
            histogram=[0] * (self.config.max_accepted + 1),
        )
        self.waiting.append(req)
        if self.step is None:
            # A request queued while the model loads runs once loading is done.
            self._start_step(max(t, self.start_t))
        return req

    def _schedule_user(self, user: int, t: float) -> None:
        heapq.heappush(self._arrivals, (t, self._order, user))
        self._order += 1

    def _arrive_background(self, t: float, user: int) -> None:
        lo, hi = self.config.background_prompt_tokens
        mlo, mhi = self.config.background_max_tokens
        prompt = self.rng.randint(lo, hi)
        # capped by the context, as a server caps a request's max_tokens
        cap = max(1, min(self.rng.randint(mlo, mhi), self.config.max_model_len - prompt))
        self.submit(t, prompt, cap, background=True, endpoint=f"user-{user}")

    # --- running -------------------------------------------------------------------------

    def next_time(self) -> float | None:
        """When something next happens (a step ends or a background user arrives)."""
        times = [self.step.t_end] if self.step else []
        if self._arrivals:
            times.append(self._arrivals[0][0])
        return min(times) if times else None

    def advance_to(self, t: float) -> None:
        """Execute every arrival and every step end at or before ``t``."""
        while True:
            step_end = self.step.t_end if self.step else math.inf
            arrival = self._arrivals[0][0] if self._arrivals else math.inf
            if arrival <= t and arrival <= step_end:
                at, _, user = heapq.heappop(self._arrivals)
                self.t = max(self.t, at)
                self._arrive_background(at, user)
                continue
            if step_end <= t:
                self._finish_step()
                continue
            break
        self.t = max(self.t, t)

    def _start_step(self, t0: float) -> None:
        cfg = self.config
        limit = cfg.max_running
        prefill: list[SimRequest] = []
        while self.waiting and len(self.running) + len(prefill) < limit:
            req = self.waiting.popleft()
            req.t_admit = t0
            req.slot = self._free_slot(prefill)
            prefill.append(req)
        decode = list(self.running)
        if not decode and not prefill:
            self.step = None
            self.gpus.advance_to(t0, 0.0)
            return
        self.gpus.advance_to(t0, 1.0)
        pace = self.gpus.pace_factor()
        warm = any(r.seq < cfg.warmup_requests for r in decode + prefill)
        ms = 0.0
        if decode:
            ms += cfg.decode_step_ms(len(decode))
        ms += cfg.prefill_ms * len(prefill)
        latency = ms / 1000.0 * pace * (cfg.warmup_factor if warm else 1.0)
        self.step = _Step(t0, t0 + latency, latency, decode, prefill, pace, warm)
        self.running.extend(prefill)

    def _free_slot(self, also: list[SimRequest]) -> int:
        used = {r.slot for r in self.running} | {r.slot for r in also}
        slot = 0
        while slot in used:
            slot += 1
        return slot

    def _draw_accepted(self, limit: int) -> int:
        accepted = 0
        for p in self.config.acceptance[:limit]:
            if self.rng.random() < p:
                accepted += 1
            else:
                break
        return accepted

    def _finish_step(self) -> None:
        step = self.step
        assert step is not None
        cfg = self.config
        e = step.t_end
        finished: list[SimRequest] = []
        tokens = decode_tokens = accepted_sum = proposed_sum = drafted = 0
        decoded: list[tuple[SimRequest, int, int, int]] = []
        # Read once per step: each property asks the server registry.
        drafts, max_accepted = cfg.drafts_per_step, cfg.max_accepted
        capped, in_full = cfg.drafts_capped_by_remaining, cfg.counts_cut_step_in_full
        skip = cfg.draft_skip_share if drafts else 0.0
        for req in step.decode:
            remaining = req.stop_at - req.generated
            proposed = drafts
            if skip and self.rng.random() < skip:
                proposed = 0
            if capped:
                proposed = min(proposed, max(0, remaining - 1))
            limit = min(max_accepted, proposed)
            drawn = self._draw_accepted(limit) if limit > 0 else 0
            n = min(1 + drawn, remaining)
            # What the server counts: vLLM counts a step cut by max_tokens in full.
            acc = drawn if in_full else n - 1
            req.generated += n
            req.steps += 1
            req.accepted += acc
            req.proposed += proposed
            if proposed > 0:
                req.drafted_steps += 1
                drafted += 1
            for i in range(acc):
                req.accepted_per_pos[i] += 1
            if req.histogram:
                req.histogram[acc] += 1
            last = req.t_last if req.t_last is not None else step.t_start
            req.step_latencies.append(e - last)
            req.per_step.append((acc, proposed))
            req.t_last = e
            req.events.append(TokenEvent(e, n, req.generated, False, req.proposed, req.accepted))
            tokens += n
            decode_tokens += n
            accepted_sum += acc
            proposed_sum += proposed
            decoded.append((req, n, acc, proposed))
            if req.generated >= req.stop_at:
                finished.append(req)
        for req in step.prefill:
            req.generated = 1
            req.t_first = e
            req.t_last = e
            req.prefill_s = e - (req.t_admit if req.t_admit is not None else step.t_start)
            req.events.append(TokenEvent(e, 1, 1, True))
            tokens += 1
            self.listener.on_prefill(req, e)
            if req.generated >= req.stop_at:
                finished.append(req)
        record = StepRecord(
            t_start=step.t_start,
            t_end=e,
            latency_s=step.latency_s,
            decode_requests=len(step.decode),
            prefill_requests=len(step.prefill),
            tokens=tokens,
            decode_tokens=decode_tokens,
            accepted_drafts=accepted_sum,
            proposed_drafts=proposed_sum,
            drafted_requests=drafted,
            pace_factor=step.pace,
            warmup=step.warm,
        )
        self.truth.add_step(record)
        self.listener.on_step(e, record, decoded)
        for req in finished:
            self._finish(req, e, "length" if req.stop_at >= req.max_tokens else "stop")
        self.step = None
        self._start_step(e)

    def _finish(self, req: SimRequest, t: float, reason: str) -> None:
        req.finish_reason = reason
        req.t_end = t
        if req in self.running:
            self.running.remove(req)
        self.listener.on_finish(req, t)
        if req.background:
            user = int(req.endpoint.split("-")[-1])
            lo, hi = self.config.background_think_s
            self._schedule_user(user, t + self.rng.uniform(lo, hi))
        elif not req.probe:
            self.truth.add_request(request_truth(req))

    def abort(self, req: SimRequest, t: float) -> None:
        """Abort one request (its client went away)."""
        if req.done:
            return
        if req in self.waiting:
            self.waiting.remove(req)
        if self.step is not None:
            if req in self.step.decode:
                self.step.decode.remove(req)
            if req in self.step.prefill:
                self.step.prefill.remove(req)
        self._finish(req, t, "abort")

    def abort_all(self, t: float) -> list[SimRequest]:
        """Drop every request (a restart); returns the HTTP ones that were in flight."""
        dropped: list[SimRequest] = []
        for req in [*self.running, *self.waiting]:
            req.finish_reason = "abort"
            req.t_end = t
            if not req.background and not req.probe:
                dropped.append(req)
        self.running.clear()
        self.waiting.clear()
        self.step = None
        self._arrivals.clear()
        return dropped


def request_truth(req: SimRequest) -> RequestTruth:
    """The ground-truth record of a finished request."""
    t_first = req.t_first if req.t_first is not None else req.t_arrival
    return RequestTruth(
        request_id=req.rid,
        prompt_tokens=req.prompt_tokens,
        completion_tokens=req.generated,
        steps=req.steps,
        accepted_drafts=req.accepted,
        proposed_drafts=req.proposed,
        step_latencies_s=tuple(req.step_latencies),
        ttft_s=t_first - req.t_arrival,
        t_start=req.t_arrival,
        t_end=req.t_end if req.t_end is not None else t_first,
        finish_reason=req.finish_reason or "length",
        accepted_per_position=tuple(req.accepted_per_pos),
        endpoint=req.endpoint,
        drafted_steps=req.drafted_steps,
    )
