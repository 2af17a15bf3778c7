"""The benchmark and the comparison, as the TUI starts them.

A benchmark runs on a worker thread with its own event loop and HTTP client, so the UI's drawing
never sits between a streamed chunk and its timestamp. Progress comes back as messages; the
snapshot is written where ``specwatch bench`` writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from specwatch.core.server import ServerInfo
from specwatch.sources.endpoint import Endpoint
from specwatch.ui.messages import BenchFinished, BenchProgress

if TYPE_CHECKING:
    from specwatch.bench.runner import BenchConfig, BenchEvent, BenchResult
    from specwatch.core.compare import Comparison
    from specwatch.core.snapshot_records import Snapshot
    from specwatch.sources.nvml import GpuSampler


def result_text(result: BenchResult) -> str:
    """The benchmark's runs and results, as ``specwatch bench`` prints them."""
    from specwatch.bench.report import results_lines, run_lines

    return "\n".join([*run_lines(result), *results_lines(result)])


class BenchJob:
    """One benchmark started from the TUI (run :meth:`run` on a worker thread).

    Args:
        endpoint: The server.
        info: The server as detected.
        sampler: The app's GPU sampler (its ticks become the per-run GPU summaries).
        out_dir: Where the snapshot is written.
        post: Where progress messages go (thread-safe ``App.post_message``).
        config: What to run (the ``specwatch bench`` defaults when ``None``).
        clock: Monotonic seconds for marks on the graph (the sampler's clock).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        info: ServerInfo,
        sampler: GpuSampler | None,
        out_dir: Path,
        post: Callable[[Message], object],
        config: BenchConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.info = info
        self.sampler = sampler
        self.out_dir = out_dir
        self.post = post
        self.config = config
        self.clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel: asyncio.Event | None = None
        self._cancel_requested = threading.Event()
        self.done = threading.Event()
        """Set once the benchmark ended and its snapshot was written (or failed to be)."""
        self.snapshot_path: Path | None = None

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
        self.post(
            BenchProgress(self.clock(), event.kind, event.index, event.total, event.message, tok_s)
        )

    async def _main(self) -> BenchResult:
        from specwatch.bench.runner import BenchConfig, run_benchmark
        from specwatch.sources.client import ServerClient

        self._loop = asyncio.get_running_loop()
        self._cancel = asyncio.Event()
        if self._cancel_requested.is_set():
            self._cancel.set()
        config = self.config or BenchConfig()
        self.post(BenchProgress(self.clock(), "started", 0, config.warmup, "warming up"))
        async with ServerClient(self.endpoint, timeout_s=60.0) as client:
            return await run_benchmark(
                client,
                self.info,
                config,
                sampler=self.sampler,
                on_event=self._on_event,
                cancel=self._cancel,
            )

    def run(self) -> None:
        """Run the benchmark to the end, save the snapshot, post the result. Never raises."""
        try:
            self._run()
        finally:
            self.done.set()

    def _run(self) -> None:
        try:
            result = asyncio.run(self._main())
        except Exception as e:  # the app must hear about any failure, never lose the worker
            self.post(BenchProgress(self.clock(), "error", 0, 0, str(e)))
            self.post(BenchFinished("benchmark failed", f"{type(e).__name__}: {e}", None, None))
            return
        body = result_text(result)
        error: str | None = None
        path: str | None = None
        try:
            from specwatch.bench.snapshot import build_snapshot, write_snapshot

            secrets = [self.endpoint.api_key] if self.endpoint.api_key else []
            snap = build_snapshot(result, ["specwatch", "(TUI benchmark)"], secrets=secrets)
            self.snapshot_path = write_snapshot(snap, self.out_dir)
            path = str(self.snapshot_path)
        except Exception as e:  # a full or read-only disk: say so, keep the results on screen
            error = f"snapshot not saved: {e}"
        kind = "finished" if result.ok else ("interrupted" if result.interrupted else "error")
        self.post(BenchProgress(self.clock(), kind, len(result.runs), result.config.runs, kind))
        title = "benchmark " + ("finished" if result.ok else kind)
        self.post(BenchFinished(title, body, path, error))


def latest_snapshots(directory: Path, n: int = 2) -> list[Path]:
    """The ``n`` newest ``*.json`` files in ``directory``, oldest first."""
    try:
        files = [p for p in directory.glob("*.json") if p.is_file()]
    except OSError:
        return []
    files.sort(key=lambda p: (p.stat().st_mtime, p.name))
    return files[-n:]


def comparison_text(c: Comparison, a: Snapshot, b: Snapshot) -> str:
    """The comparison as ``specwatch compare`` prints it (``specwatch.bench.report``)."""
    from specwatch.bench.report import comparison_lines

    return "\n".join(comparison_lines(c, a, b))


def compare_latest(directory: Path) -> tuple[str, str]:
    """Compare the two newest snapshots in ``directory``: (title, text). Never raises."""
    files = latest_snapshots(directory)
    if len(files) < 2:
        return (
            "compare snapshots",
            f"need two snapshots in {directory} (found {len(files)}); press b to benchmark",
        )
    try:
        from specwatch.bench.report import no_finished_run
        from specwatch.bench.snapshot import load_snapshot
        from specwatch.core.compare import compare

        a = load_snapshot(files[0])
        b = load_snapshot(files[1])
        for path, snap in ((files[0], a), (files[1], b)):
            if snap.finished_runs == 0:
                return ("compare snapshots", no_finished_run(path.name))
        c = compare(a, b, a_name=files[0].name, b_name=files[1].name)
    except Exception as e:  # a malformed snapshot: one clear line instead of a crash
        return ("compare snapshots", f"cannot compare {files[0].name} and {files[1].name}: {e}")
    return (f"compare: {c.verdict.wording}", comparison_text(c, a, b))


__all__: Sequence[str] = ["BenchJob", "compare_latest", "comparison_text", "result_text"]
