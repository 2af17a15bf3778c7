"""One profile of a server's steps, from asking its profiler to the kept profile file: the
pipeline ``specwatch profile`` runs in the foreground and the live monitor's key runs on a
thread of its own while the session keeps watching.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specwatch.core.profile import ProfileSummary, profile_to_json, verdict
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import ServerInfo
from specwatch.session.events import ProfileFinished, ProfileProgress, SessionEvent
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.profile.trigger import Phase, ProfileRefused, ProfileRun

PROFILE_SCHEMA = 1
PREFIX = "specwatch"
SETTING_NAMES = (
    "disable_cuda_graph",
    "cuda_graph_bs",
    "cuda_graph_max_bs",
    "cuda_graph_backend_decode",
    "cuda_graph_bs_decode",
    "cuda_graph_max_bs_decode",
    "enforce_eager",
    "max_cudagraph_capture_size",
    "cudagraph_capture_sizes",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_num_draft_tokens",
    "tp_size",
)
"""The engine's CUDA-graph and speculation settings a profile keeps beside its verdict."""


@dataclass(frozen=True, slots=True)
class ProfileOptions:
    """What to ask for, and how long to wait (the ``specwatch profile`` options)."""

    steps: int = 20
    out_dir: Path = Path("specwatch-snapshots")
    capture_s: float = 120.0
    files_deadline_s: float = 300.0
    trace_dir: Path | None = None
    label: str | None = None


@dataclass(frozen=True, slots=True)
class Captured:
    """A profile read and kept."""

    doc: Mapping[str, Any]
    """The profile file's content."""
    summary: ProfileSummary
    words: str
    """The verdict."""
    path: Path | None
    save_error: str | None
    """Why the file could not be written, when it was not."""


def engine_settings(info: ServerInfo) -> dict[str, str]:
    """The engine's CUDA-graph settings as it exposes them (SGLang's ``/server_info``)."""
    args = info.launch_args or {}
    return {n: sanitize_line(str(args[n]), 120) for n in SETTING_NAMES if args.get(n) is not None}


async def capture_profile(
    client: Any,
    info: ServerInfo,
    options: ProfileOptions,
    report: Callable[[Phase], None] | None = None,
    live_step_ms: float | None = None,
) -> Captured:
    """Plan, trigger, wait for and read one profile of the server ``client`` talks to, and
    write its profile file into ``options.out_dir``.

    Raises:
        ProfileRefused: The server cannot be profiled as asked (one line says why).
        ServerError: The server cannot be reached.
        TraceError: No trace file could be read.
    """
    from specwatch.sources.identity.process import NOTE_REMOTE, identify_server
    from specwatch.sources.profile.trigger import plan_profile, run_profile

    identity = await asyncio.to_thread(identify_server, info.base_url)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out_dir = options.out_dir.absolute()
    plan = plan_profile(
        info.dialect,
        steps=options.steps,
        out_dir=out_dir / f"traces-{stamp}",
        prefix=f"{PREFIX}-{stamp}",
        cmdline=identity.cmdline,
        environment=identity.env(),
        local=NOTE_REMOTE not in identity.notes,
        pid_known=identity.pid is not None,
        trace_dir=options.trace_dir,
    )
    if plan.start_body.get("output_dir"):
        try:
            plan.trace_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProfileRefused(f"cannot make {plan.trace_dir}: {exc.strerror}") from exc
    run = await run_profile(
        client,
        plan,
        capture_s=options.capture_s,
        files_deadline_s=options.files_deadline_s,
        report=report,
    )
    total = sum(f.size for f in run.files)
    if report is not None:
        report(Phase("reading", f"reading {len(run.files)} trace files ({total / 1e6:.1f} MB)"))
    # The streaming read is CPU work: off the loop, so a front end's drawing goes on.
    return await asyncio.to_thread(_read_and_keep, run, info, options, out_dir, live_step_ms)


def _read_and_keep(
    run: ProfileRun,
    info: ServerInfo,
    options: ProfileOptions,
    out_dir: Path,
    live_step_ms: float | None,
) -> Captured:
    from specwatch.bench.snapshot import SnapshotError, write_snapshot
    from specwatch.sources.profile.trace import read_profile

    total = sum(f.size for f in run.files)
    t0 = time.monotonic()
    summary = read_profile([f.path for f in run.files], engine=info.dialect.value)
    seconds = time.monotonic() - t0
    settings = engine_settings(info)
    words = verdict(summary, settings)
    doc: dict[str, Any] = {
        "kind": "profile",
        "schema": PROFILE_SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run.started_at)),
        "label": f"{options.label}-profile" if options.label else "profile",
        "engine": {
            "name": info.dialect.value,
            "version": info.version,
            "model": info.model,
            "url": info.base_url,
        },
        "settings": settings,
        "steps_asked": run.plan.steps,
        "trace_files": [{"path": str(f.path), "bytes": f.size} for f in run.files],
        "trigger_s": round(run.seconds, 3),
        "read_s": round(seconds, 3),
        "read_mb_s": round(total / 1e6 / seconds, 1) if seconds > 0 else None,
        "stopped": run.stopped,
        "notes": list(run.notes),
        "live_step_ms": round(live_step_ms, 3) if live_step_ms is not None else None,
        **profile_to_json(summary),
        "verdict": words,
    }
    path: Path | None = None
    error: str | None = None
    try:
        path = write_snapshot(doc, out_dir)
    except SnapshotError as exc:
        error = str(exc)
    return Captured(doc, summary, words, path, error)


class ProfileJob:
    """One profile taken while a session watches, on a thread with its own loop and client.

    Progress comes back as :class:`ProfileProgress` events and the end as one
    :class:`ProfileFinished`; :meth:`cancel` stops it, a vLLM profiling session included.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        info: ServerInfo,
        options: ProfileOptions,
        emit: Callable[[SessionEvent], None],
        clock: Callable[[], float] = time.monotonic,
        live_step_ms: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.endpoint = endpoint
        self.info = info
        self.options = options
        self.emit = emit
        self.clock = clock
        self.live_step_ms = live_step_ms
        self.done = threading.Event()
        self.captured: Captured | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._cancelled = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Started and not yet ended."""
        return self._thread is not None and not self.done.is_set()

    def start(self) -> None:
        """Run on a daemon thread of its own."""
        self._thread = threading.Thread(target=self.run, name="specwatch-profile", daemon=True)
        self._thread.start()

    def run(self) -> None:
        """Take the profile (blocking); always ends with one :class:`ProfileFinished`."""
        outcome, failure = "failed", "the profile did not run"
        try:
            asyncio.run(self._main())
            outcome, failure = "finished", ""
        except ProfileRefused as exc:
            outcome, failure = "refused", str(exc)
        except asyncio.CancelledError:
            outcome = "stopped"
            failure = "stopped; the server's profiling session was stopped"
        except Exception as exc:  # a server error, a bad trace, a bug: one line, never a crash
            failure = sanitize_line(str(exc) or type(exc).__name__, 300)
        finally:
            c = self.captured
            self.emit(
                ProfileFinished(
                    self.clock(),
                    outcome,
                    c.words if c is not None else "",
                    c.summary if c is not None else None,
                    c.path if c is not None else None,
                    c.save_error if c is not None else None,
                    sanitize_line(failure, 300) if failure else None,
                )
            )
            self.done.set()

    async def _main(self) -> None:
        from specwatch.sources.http.client import ServerClient

        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        if self._cancelled.is_set():
            raise asyncio.CancelledError

        def report(phase: Phase) -> None:
            self.emit(
                ProfileProgress(self.clock(), phase.name, phase.words, phase.files, phase.bytes)
            )

        async with ServerClient(self.endpoint, timeout_s=10.0) as client:
            self.captured = await capture_profile(
                client, self.info, self.options, report, self.live_step_ms()
            )

    def cancel(self) -> None:
        """Stop at once (the stop request to vLLM is still sent). Idempotent."""
        self._cancelled.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(task.cancel)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)


__all__ = [
    "PROFILE_SCHEMA",
    "Captured",
    "ProfileJob",
    "ProfileOptions",
    "capture_profile",
    "engine_settings",
]
