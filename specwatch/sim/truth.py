"""Ground truth: what the simulated engine really did, for tests to compare readings against."""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One engine (batch) step."""

    t_start: float
    t_end: float
    latency_s: float
    decode_requests: int
    """Requests that got decode (verify) tokens in this step."""
    prefill_requests: int
    tokens: int
    """Tokens produced: decode tokens plus the first token of each prefilled request."""
    decode_tokens: int
    accepted_drafts: int
    proposed_drafts: int
    drafted_requests: int
    """Decode requests that had at least one draft token this step."""
    pace_factor: float
    warmup: bool


@dataclass(frozen=True, slots=True)
class TruthWindow:
    """The engine's real work over the steps that completed in ``(t0, t1]``."""

    t0: float
    t1: float
    tokens: int
    request_steps: int
    """Request-verify-steps (one per decoding request per batch step)."""
    batch_steps: int
    """Batch steps that decoded at least one request."""
    accepted_drafts: int
    proposed_drafts: int
    tok_s: float
    accept_length: float | None
    """``1 + accepted / request steps with a draft`` (bonus included); ``None`` without drafts."""
    acceptance_rate: float | None
    """``accepted / proposed`` drafts; ``None`` without drafts."""
    mean_step_latency_s: float | None
    """Mean latency of the batch steps that decoded (each step counted once)."""
    decode_tokens: int = 0
    request_step_latency_s: float | None = None
    """Mean latency over request steps (each step weighted by its batch size): what per-request
    inter-step intervals (vLLM's ``inter_token_latency_seconds``) average to."""
    drafted_steps: int = 0


@dataclass(frozen=True, slots=True)
class RequestTruth:
    """One finished HTTP request (background traffic is not listed)."""

    request_id: str
    prompt_tokens: int
    completion_tokens: int
    steps: int
    """Decode (verify) steps; the first token came from prefill."""
    accepted_drafts: int
    proposed_drafts: int
    step_latencies_s: tuple[float, ...]
    """Interval before each decode step's tokens (the step latency as this request felt it)."""
    ttft_s: float
    t_start: float
    t_end: float
    finish_reason: str = "length"
    """``"length"``, ``"stop"`` or ``"abort"`` (dropped by a restart)."""
    accepted_per_position: tuple[int, ...] = ()
    endpoint: str = ""
    drafted_steps: int = 0
    """Decode steps that carried a draft (llama.cpp drops some: see ``draft_skip_share``)."""


class GroundTruth:
    """Thread-safe record of every step and every finished HTTP request."""

    def __init__(self, max_steps: int | None = None) -> None:
        self.max_steps = max_steps
        """Keep at most about this many steps (the oldest go first); ``None`` keeps all."""
        self._lock = threading.Lock()
        self._finished = threading.Condition(self._lock)
        self._steps: list[StepRecord] = []
        self._ends: list[float] = []
        self._requests: list[RequestTruth] = []
        self.health_generations = 0
        """Generations started by SGLang's ``/health`` / ``/health_generate`` (model work)."""
        self.endpoint_hits: Counter[str] = Counter()
        """``"GET /metrics"`` → how many times it was served."""
        self.scrape_times: list[float] = []
        """Clock times at which ``/metrics`` was rendered."""
        self.restart_times: list[float] = []

    # --- recording (the engine and server) -----------------------------------------------

    def add_step(self, step: StepRecord) -> None:
        """Record one finished batch step (steps arrive in time order)."""
        with self._lock:
            self._steps.append(step)
            self._ends.append(step.t_end)
            if self.max_steps is not None and len(self._steps) > self.max_steps:
                # Trim a tenth at a time so that a long-running demo stays O(1) per step.
                cut = len(self._steps) - self.max_steps + self.max_steps // 10
                del self._steps[:cut]
                del self._ends[:cut]

    def add_request(self, req: RequestTruth) -> None:
        """Record one finished HTTP request."""
        with self._lock:
            self._requests.append(req)
            self._finished.notify_all()

    def wait_requests(self, n: int, timeout: float | None = 10.0) -> bool:
        """Block until ``n`` HTTP requests have finished (or were aborted)."""
        with self._finished:
            return self._finished.wait_for(lambda: len(self._requests) >= n, timeout)

    def hit(self, method: str, path: str) -> None:
        """Count a served endpoint."""
        with self._lock:
            self.endpoint_hits[f"{method} {path}"] += 1

    def add_health_generation(self) -> None:
        """Note one generation that a health probe caused."""
        with self._lock:
            self.health_generations += 1

    def add_scrape(self, t: float) -> None:
        """Note when ``/metrics`` was rendered."""
        with self._lock:
            self.scrape_times.append(t)

    def add_restart(self, t: float) -> None:
        """Note a restart."""
        with self._lock:
            self.restart_times.append(t)

    # --- reading (tests) ------------------------------------------------------------------

    def steps(self, t0: float = float("-inf"), t1: float = float("inf")) -> list[StepRecord]:
        """The batch steps that completed in ``(t0, t1]``."""
        with self._lock:
            lo = bisect.bisect_right(self._ends, t0)
            hi = bisect.bisect_right(self._ends, t1)
            return self._steps[lo:hi]

    def window(self, t0: float, t1: float) -> TruthWindow:
        """Totals and means over the steps that completed in ``(t0, t1]``."""
        steps = self.steps(t0, t1)
        tokens = sum(s.tokens for s in steps)
        decode_tokens = sum(s.decode_tokens for s in steps)
        req_steps = sum(s.decode_requests for s in steps)
        decoding = [s for s in steps if s.decode_requests > 0]
        accepted = sum(s.accepted_drafts for s in steps)
        proposed = sum(s.proposed_drafts for s in steps)
        drafted = sum(s.drafted_requests for s in steps)
        span = t1 - t0
        return TruthWindow(
            t0=t0,
            t1=t1,
            tokens=tokens,
            request_steps=req_steps,
            batch_steps=len(decoding),
            accepted_drafts=accepted,
            proposed_drafts=proposed,
            tok_s=tokens / span if span > 0 else 0.0,
            accept_length=1.0 + accepted / drafted if drafted else None,
            acceptance_rate=accepted / proposed if proposed else None,
            mean_step_latency_s=(
                sum(s.latency_s for s in decoding) / len(decoding) if decoding else None
            ),
            decode_tokens=decode_tokens,
            request_step_latency_s=(
                sum(s.latency_s * s.decode_requests for s in decoding) / req_steps
                if req_steps
                else None
            ),
            drafted_steps=drafted,
        )

    def requests(self) -> list[RequestTruth]:
        """Finished HTTP requests (not background traffic), in completion order."""
        with self._lock:
            return list(self._requests)
