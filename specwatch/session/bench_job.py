"""A benchmark run while the session watches, on its own thread, event loop and HTTP client.

Its own loop keeps a front end's drawing from sitting between a streamed chunk and its timestamp.
Progress comes back as events; the snapshot is written where ``specwatch bench`` writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specwatch.core.identity import ServerIdentity
from specwatch.core.server import ServerInfo
from specwatch.session.events import BenchFinished, BenchProgress, SessionEvent
from specwatch.sources.http.endpoint import Endpoint

if TYPE_CHECKING:
    from specwatch.bench.runner import BenchEvent
    from specwatch.core.snapshot_records import BenchConfig, BenchResult
    from specwatch.sources.gpu_reader import GpuReader


class BenchJob:
    """One benchmark against a watched server (run :meth:`run` on a thread, or :meth:`start`).

    Args:
        endpoint: The server.
        info: The server as detected.
        sampler: The session's GPU sampler (its ticks become the per-run GPU summaries).
        out_dir: Where the snapshot is written.
        emit: Where events go (called on the job's thread).
        config: What to run (the ``specwatch bench`` defaults when ``None``).
        clock: Monotonic seconds for progress events (the session's clock).
        command: The command line recorded in the snapshot.
        identify: Reads the server's code identity for the snapshot, on the job's thread
            before the first run (``None``: the snapshot records no identity).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        info: ServerInfo,
        sampler: GpuReader | None,
        out_dir: Path,
        emit: Callable[[SessionEvent], None],
        config: BenchConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        command: Sequence[str] = ("specwatch", "(live benchmark)"),
        identify: Callable[[str, ServerInfo], ServerIdentity] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.info = info
        self.sampler = sampler
        self.out_dir = out_dir
        self.emit = emit
        self.config = config
        self.clock = clock
        self.command = list(command)
        self.identify = identify
        self.identity: ServerIdentity | None = None
        """The server's code identity as recorded in the snapshot (once read)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel: asyncio.Event | None = None
        self._cancel_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self.done = threading.Event()
        """Set once the benchmark ended and its snapshot was written (or failed to be)."""
        self.snapshot_path: Path | None = None
        self.result: BenchResult | None = None
        """What it measured, once ended (``None`` before, or when it failed)."""
        self.save_error: str | None = None
        """Why no snapshot was written, when none was."""

    def start(self) -> None:
        """Run on a daemon thread of its own."""
        self._thread = threading.Thread(target=self.run, name="specwatch-bench", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Started and not yet ended."""
        return self._thread is not None and not self.done.is_set()

    def cancel(self) -> None:
        """Stop after the run in flight; the finished runs are kept (thread-safe)."""
        self._cancel_requested.set()
        loop, ev = self._loop, self._cancel
        if loop is not None and ev is not None:
            # A closed loop means the benchmark already ended: nothing left to stop.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(ev.set)

    def _on_event(self, event: BenchEvent) -> None:
        tok_s = event.run.tok_s if event.run is not None and not event.run.warmup else None
        self.emit(
            BenchProgress(self.clock(), event.kind, event.index, event.total, event.message, tok_s)
        )

    async def _main(self) -> BenchResult:
        from specwatch.bench.runner import run_benchmark
        from specwatch.core.snapshot_records import BenchConfig
        from specwatch.sources.host import sampler_for
        from specwatch.sources.http.client import ServerClient

        self._loop = asyncio.get_running_loop()
        self._cancel = asyncio.Event()
        if self._cancel_requested.is_set():
            self._cancel.set()
        config = self.config or BenchConfig()
        self.emit(BenchProgress(self.clock(), "started", 0, config.warmup, "warming up"))
        async with ServerClient(self.endpoint, timeout_s=60.0) as client:
            return await run_benchmark(
                client,
                self.info,
                config,
                sampler=self.sampler,
                on_event=self._on_event,
                cancel=self._cancel,
                clock=self.clock,
                host=sampler_for(self.identity),
            )

    def run(self) -> None:
        """Run the benchmark to the end, save the snapshot, emit the result. Never raises."""
        try:
            self._run()
        finally:
            self.done.set()

    def _read_identity(self) -> None:
        if self.identify is None:
            return
        try:
            self.identity = self.identify(self.endpoint.base_url, self.info)
        except Exception as e:  # the runs matter more than knowing the code: note it, go on
            self.identity = ServerIdentity(notes=(f"identity not read: {type(e).__name__}",))

    def _run(self) -> None:
        # Read before the runs, as `specwatch bench` does: the process measured is the one read.
        self._read_identity()
        try:
            result = asyncio.run(self._main())
        except Exception as e:  # subscribers must hear about any failure
            self.emit(BenchProgress(self.clock(), "error", 0, 0, str(e)))
            self.emit(BenchFinished("failed", None, None, None, f"{type(e).__name__}: {e}"))
            return
        self.result = result
        error: str | None = None
        if not any(r.tok_s is not None for r in result.runs):
            # Stopped in warmup (or every run failed): an empty snapshot would compare as
            # "no significant change". The CLI saves nothing in this case too.
            error = "no measured run finished: nothing saved"
        else:
            error = self._save(result)
        self.save_error = error
        kind = "finished" if result.ok else ("interrupted" if result.interrupted else "error")
        self.emit(BenchProgress(self.clock(), kind, len(result.runs), result.config.runs, kind))
        self.emit(BenchFinished(kind, result, self.snapshot_path, error))

    def stopped_line(self, how: str) -> str:
        """One line on what a benchmark stopped ``how`` (``"by SIGTERM"``, ``"on quitting"``) kept:
        how many runs, and where, as ``specwatch bench`` says it."""
        result = self.result
        if not self.done.is_set():
            return f"benchmark stopped {how}; its snapshot was not written in time"
        if result is None:
            return f"benchmark stopped {how}; it had failed: nothing saved"
        if not any(r.tok_s is not None for r in result.runs):
            return f"benchmark stopped {how} before its first run finished; nothing saved"
        kept = f"{len(result.runs)} of {result.config.runs} runs"
        if self.snapshot_path is None:
            return f"benchmark stopped {how}; {kept} NOT saved: {self.save_error}"
        partial = " (partial snapshot)" if result.interrupted else ""
        return f"benchmark stopped {how}; {kept} saved{partial}: {self.snapshot_path}"

    def _save(self, result: BenchResult) -> str | None:
        try:
            from specwatch.bench.snapshot import build_snapshot, write_snapshot

            secrets = [self.endpoint.api_key] if self.endpoint.api_key else []
            snap = build_snapshot(result, self.command, secrets=secrets, identity=self.identity)
            self.snapshot_path = write_snapshot(snap, self.out_dir)
        except Exception as e:  # a full or read-only disk: say so, keep the results
            return f"snapshot not saved: {e}"
        return None
