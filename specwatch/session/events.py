"""What a live session reports: plain frozen events, one per thing that happened.

Subscribers (the TUI's adapter, a recorder, a test) receive them from the session's threads and
tasks, in the order each source produced them. ``server`` is the endpoint's index in the
session's list, so one subscriber can follow several servers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.host import HostSpan
from specwatch.core.identity import ServerIdentity
from specwatch.core.profile import ProfileSummary
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.core.snapshot_records import BenchResult
from specwatch.session.verdict_state import LiveVerdictState


@dataclass(frozen=True, slots=True)
class ServerWaiting:
    """The server is not ready yet (down, loading, or refusing); the session keeps trying."""

    t: float
    state: str
    attempt: int
    elapsed_s: float
    detail: str
    server: int = 0


@dataclass(frozen=True, slots=True)
class ServerReady:
    """The server answered and was identified."""

    t: float
    info: ServerInfo
    server: int = 0


@dataclass(frozen=True, slots=True)
class ServerIdentified:
    """The code identity of the server that became ready (once per ready, a moment later)."""

    t: float
    identity: ServerIdentity
    server: int = 0


@dataclass(frozen=True, slots=True)
class ServerLost:
    """The server stopped answering (the poller goes back to waiting)."""

    t: float
    reason: str
    server: int = 0


@dataclass(frozen=True, slots=True)
class MetricsScraped:
    """One ``/metrics`` scrape turned into a window of deltas."""

    window: MetricsWindow
    server: int = 0


@dataclass(frozen=True, slots=True)
class GpuInventoryChanged:
    """The GPUs' fixed data: once when the source opens, then whenever any of it changes.

    Power limit, maximum clocks and the PCIe maximum link can change while specwatch watches
    (``nvidia-smi -pl 400``); every rule that compares a reading with a limit needs the new one.
    """

    inventory: GpuInventory


@dataclass(frozen=True, slots=True)
class GpuTicked:
    """One tick of every GPU."""

    tick: GpuTick


@dataclass(frozen=True, slots=True)
class HostSampled:
    """This host's CPU over the interval since the previous reading (the server's share where
    it runs here: the session's first server)."""

    t: float
    """The reading's time on the session's clock."""
    span: HostSpan


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """A benchmark event: ``started``, ``warmup_done``, ``run_start``, ``run_done``, ``error``..."""

    t: float
    kind: str
    index: int
    total: int
    message: str
    tok_s: float | None = None


@dataclass(frozen=True, slots=True)
class BenchFinished:
    """A benchmark ended.

    ``outcome`` is ``finished``, ``interrupted``, ``error`` (the result says why) or ``failed``
    (it crashed: no result, ``failure`` says why).
    """

    outcome: str
    result: BenchResult | None
    snapshot_path: Path | None
    snapshot_error: str | None
    """Why the snapshot could not be written (a full or read-only disk)."""
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class ProfileProgress:
    """Where a profile taken from the live monitor stands: ``phase`` is one of
    ``sources.profile.trigger.PHASES`` (asking, armed, capturing, writing, reading)."""

    t: float
    phase: str
    words: str
    files: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class ProfileFinished:
    """A profile ended: ``outcome`` is ``finished``, ``refused`` (the server cannot be
    profiled as asked), ``stopped`` or ``failed``; ``failure`` says why in one line."""

    t: float
    outcome: str
    verdict: str
    summary: ProfileSummary | None
    path: Path | None
    save_error: str | None
    failure: str | None


@dataclass(frozen=True, slots=True)
class RecordingStopped:
    """The session's recorder stopped on an error (a full disk); ``reason`` is one line."""

    t: float
    reason: str


@dataclass(frozen=True, slots=True)
class VerdictChanged:
    """The live verdict moved: its phase, reference, outcome or current window changed.

    The session judges the server at index ``server`` (its first) on the readings it emitted
    just before (:class:`specwatch.session.live_verdict.LiveVerdict`); ``t`` is the time of the
    newest reading taken in.
    """

    t: float
    state: LiveVerdictState
    server: int = 0


SessionEvent = (
    ServerWaiting
    | ServerReady
    | ServerIdentified
    | ServerLost
    | MetricsScraped
    | GpuInventoryChanged
    | GpuTicked
    | HostSampled
    | BenchProgress
    | BenchFinished
    | ProfileProgress
    | ProfileFinished
    | RecordingStopped
    | VerdictChanged
)
"""Everything a session emits."""
