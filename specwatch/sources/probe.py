"""``specwatch probe``: detect a server, stream once, read one metrics window and the GPUs.

The result is a :class:`ProbeResult`; :func:`probe_to_dict` turns it into the JSON document the
CLI prints (the scripting interface); :func:`specwatch.commands.probe.render_text` makes the short
readable report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specwatch import __version__
from specwatch.core.config_health import config_health, health_json
from specwatch.core.goodput import DEFAULT_SLO, Slo, histogram_goodput
from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.host import HostSpan
from specwatch.core.identity import ServerIdentity
from specwatch.core.launch_config import server_with_arguments
from specwatch.core.server import ChunkArrival, MetricsWindow, ServerInfo, StreamResult
from specwatch.core.snapshot_records import SnapshotServer
from specwatch.core.values import to_jsonable
from specwatch.sources import probe_gpus
from specwatch.sources.detect import detect, wait_ready
from specwatch.sources.dialects.llamacpp_timings import TIMINGS_STEP_NOTE
from specwatch.sources.host import HostSampler
from specwatch.sources.http.client import PROBE_DEADLINE_S, ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.process import identify as identify_server
from specwatch.sources.stream import stream_completion
from specwatch.sources.stream_steps import CUT_STEP_NOTE, TOKENS_PER_STEP_NOTE
from specwatch.sources.watcher import MetricsWatcher

DEFAULT_PROMPT = (
    "Write a detailed, step-by-step explanation of how a hash map handles collisions, "
    "with a short example in Python."
)

SCHEMA_VERSION = 6
"""Version of the JSON document: 2 added ``schema_version`` and one GPU entry shape for NVML
and dcgm-exporter (``node``, ``source``, every key present, nulls explained in ``missing``);
3 added ``verdict``, the live verdict the probe's readings give; 4 added ``host`` (this
host's CPU over the stream or the passive window) and each GPU's ``dram_active`` and
``tensor_active``; 5 added ``health``, the configuration rules on the metrics window
(``metrics`` gained ``kv_capacity_tokens``, ``finished_in_window`` and ``latency_cdf``); 6
added ``goodput``, the share of the window's requests within ``--slo-ttft`` / ``--slo-tpot``."""

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_USAGE = 2
EXIT_STREAM_FAILED = 3


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Everything one probe found."""

    base_url: str
    info: ServerInfo | None
    stream: StreamResult | None
    window: MetricsWindow | None
    inventory: GpuInventory | None
    tick: GpuTick | None
    error: str | None = None
    """Why the server could not be probed (unreachable, not ready, wrong key)."""
    problem: str = "unreachable"
    """The word for ``error``: ``unreachable``, ``loading`` (HTTP 503), ``authorisation
    required`` (401/403), ``not HTTP``, ``too large``, ``redirected``, ``no answer``."""
    identity: ServerIdentity | None = None
    """The server process's code identity (``None``: not read); notes say why it is partial."""
    passive: bool = False
    """No request that makes the server do model work was sent (``probe --passive``)."""
    host: HostSpan | None = None
    """This host's CPU over the stream (or the passive window): load, run queue, steal,
    frequency, the processes that used most of it."""

    @property
    def exit_code(self) -> int:
        """0 ok, 1 server unreachable / not ready, 3 reached but the stream failed."""
        if self.info is None:
            return EXIT_UNREACHABLE
        if self.passive:
            return EXIT_OK
        if self.stream is None or self.stream.error or not self.stream.completion_tokens:
            return EXIT_STREAM_FAILED
        return EXIT_OK


def _read_gpus(nvml: object | None, dcgm: Sequence[str]) -> tuple[GpuInventory, GpuTick | None]:
    read = probe_gpus.read_gpus(nvml, dcgm)
    return read.inventory, read.tick


async def probe(
    endpoint: Endpoint,
    *,
    max_tokens: int = 256,
    timeout_s: float = 30.0,
    wait_s: float = 0.0,
    prompt: str = DEFAULT_PROMPT,
    nvml: object | None = None,
    dcgm: Sequence[str] = (),
    read_gpus: bool = True,
    on_status: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    deadline_s: float = PROBE_DEADLINE_S,
    identify: Callable[[str, ServerInfo], ServerIdentity] | None = identify_server,
    passive_s: float | None = None,
) -> ProbeResult:
    """Probe the server at ``endpoint`` once. Never raises for server trouble.

    Args:
        endpoint: Where the server is.
        max_tokens: Tokens for the one stream.
        timeout_s: Per-request timeout (connect, and each read of the stream).
        wait_s: Wait this long for a server that is down or loading (0: do not wait).
        prompt: The prompt to stream.
        nvml: A pynvml-like object (tests pass a fake); ``None`` is the real NVML.
        dcgm: dcgm-exporter addresses; when given, the GPUs are read there instead of NVML.
        read_gpus: Read the GPUs once while the stream runs.
        on_status: Progress lines (waiting attempts).
        clock: Seconds, for the stream's arrival times and the metrics window.
        deadline_s: Wall-clock limit of each request, the stream included.
        identify: Reads the server process's code identity, on a thread once the stream is
            over (``None``: not read).
        passive_s: Send no completion: read the server's own figures over a window this many
            seconds long instead (``probe --passive``), so that a probe of a serving box adds
            no load to it.
    """
    async with ServerClient(endpoint, timeout_s=timeout_s, deadline_s=deadline_s) as client:
        try:
            if wait_s > 0:
                info = await wait_ready(
                    client,
                    on_attempt=(
                        None
                        if on_status is None
                        else lambda s: on_status(
                            f"attempt {s.attempt} after {s.elapsed_s:.1f} s: {s.state} {s.detail}"
                        )
                    ),
                    timeout_s=wait_s,
                    interval_s=min(2.0, max(0.2, wait_s / 20)),
                )
            else:
                info = await detect(client)
        except ServerError as exc:
            inventory, tick = (
                await asyncio.to_thread(_read_gpus, nvml, dcgm) if read_gpus else (None, None)
            )
            return ProbeResult(
                endpoint.base_url, None, None, None, inventory, tick, str(exc), problem_word(exc)
            )
        watcher = MetricsWatcher(client, info, clock=clock)
        await watcher.scrape()
        if passive_s is not None:
            return await _passive(
                endpoint, info, watcher, passive_s, nvml, dcgm, read_gpus, identify
            )
        first_chunk = asyncio.Event()

        def chunk_seen(_: ChunkArrival) -> None:
            first_chunk.set()

        gpu_task: asyncio.Task[tuple[GpuInventory, GpuTick | None]] | None = None
        if read_gpus:
            gpu_task = asyncio.create_task(_gpus_when(first_chunk, nvml, dcgm))
        # Detection and the scrape leave young objects behind: a young collection then came
        # due while the request was written, inside the measured TTFT, in every probe (3.5-26
        # ms of wall time on a loaded 2-core machine). It runs now, before the clock starts.
        host = HostSampler()
        await asyncio.to_thread(host.sample)
        gc.collect(1)
        stream = await stream_completion(
            client, info, prompt, max_tokens, clock=clock, on_chunk=chunk_seen
        )
        first_chunk.set()
        host_span = await asyncio.to_thread(host.sample, True)
        # Reading the process's identity costs tens of ms of CPU: started before the stream
        # it landed inside the measured TTFT on a small machine, so it waits for the stream.
        id_task = None
        if identify is not None:
            id_task = asyncio.create_task(asyncio.to_thread(identify, endpoint.base_url, info))
        window = await watcher.scrape()
        inventory, tick = (None, None) if gpu_task is None else await gpu_task
        identity = await _identity(id_task)
        return ProbeResult(
            endpoint.base_url,
            server_with_arguments(info, identity),
            stream_checked(stream, window),
            window,
            inventory,
            tick,
            identity=identity,
            host=host_span,
        )


async def _passive(
    endpoint: Endpoint,
    info: ServerInfo,
    watcher: MetricsWatcher,
    window_s: float,
    nvml: object | None,
    dcgm: Sequence[str],
    read_gpus: bool,
    identify: Callable[[str, ServerInfo], ServerIdentity] | None,
) -> ProbeResult:
    """The server's own figures over ``window_s`` (two scrapes), the GPUs read between them."""
    gpus = asyncio.create_task(asyncio.to_thread(_read_gpus, nvml, dcgm)) if read_gpus else None
    id_task = None
    if identify is not None:
        id_task = asyncio.create_task(asyncio.to_thread(identify, endpoint.base_url, info))
    host = HostSampler()
    await asyncio.to_thread(host.sample)
    # The window is the measurement itself: the server's counters move over it on their own.
    await asyncio.sleep(window_s)
    window = await watcher.scrape()
    host_span = await asyncio.to_thread(host.sample, True)
    inventory, tick = (None, None) if gpus is None else await gpus
    identity = await _identity(id_task)
    return ProbeResult(
        endpoint.base_url,
        server_with_arguments(info, identity),
        None,
        window,
        inventory,
        tick,
        identity=identity,
        passive=True,
        host=host_span,
    )


async def _identity(task: asyncio.Task[ServerIdentity] | None) -> ServerIdentity | None:
    if task is None:
        return None
    try:
        return await task
    except Exception as exc:  # knowing the code is extra: a failure is a note, not an error
        return ServerIdentity(notes=(f"identity not read: {type(exc).__name__}",))


def problem_word(exc: ServerError) -> str:
    """How the probe report words a server it could not probe."""
    if exc.loading:
        return "loading"
    if exc.unauthorised:
        return "authorisation required"
    if exc.kind == "garbage" and "not HTTP" in str(exc):
        return "not HTTP"
    return {
        "too_large": "too large",
        "redirect": "redirected",
        "deadline": "no answer",
        "hung": "no answer",
        "http": "error",
    }.get(exc.kind, "unreachable")


async def _gpus_when(
    started: asyncio.Event, nvml: object | None, dcgm: Sequence[str]
) -> tuple[GpuInventory, GpuTick | None]:
    # read while the stream runs, so clocks and power show the server under load
    await started.wait()
    return await asyncio.to_thread(_read_gpus, nvml, dcgm)


# --- JSON -------------------------------------------------------------------------------------


STREAM_KEYS = (
    "completion_tokens",
    "prompt_tokens",
    "ttft_s",
    "decode_tok_s",
    "tok_s",
    "wall_s",
    "decode_s",
    "steps",
    "tokens_per_step",
    "step_latency_mean_s",
    "step_latency_p50_s",
    "step_latency_p90_s",
    "step_latency_p99_s",
    "accept_length",
    "draft_acceptance_rate",
    "counts_exact",
    "count_source",
    "finish_reason",
    "error",
)


def _stream_dict(stream: StreamResult | None, why: str) -> dict[str, Any]:
    if stream is None:
        out: dict[str, Any] = {key: None for key in STREAM_KEYS}
        out["reasons"] = {key: why for key in STREAM_KEYS}
        return out
    out = {key: to_jsonable(getattr(stream, key)) for key in STREAM_KEYS}
    out["chunks"] = len(stream.chunks)
    out["server_stats"] = to_jsonable(stream.server_stats)
    out["notes"] = dict(stream.notes)
    reasons: dict[str, str] = {}
    for key in STREAM_KEYS:
        if out[key] is None and key not in ("error", "finish_reason"):
            reasons[key] = stream.notes.get(key) or stream.error or _default_reason(key, stream)
    out["reasons"] = reasons
    return out


def _default_reason(key: str, stream: StreamResult) -> str:
    if key in ("accept_length", "draft_acceptance_rate"):
        return "the server reported no per-request speculative stats"
    if key in ("decode_tok_s", "decode_s", "steps", "tokens_per_step") or key.startswith(
        "step_latency"
    ):
        return "fewer than two chunks carried tokens"
    if key == "prompt_tokens":
        return "the server did not report the prompt length"
    return "not reported"


NOT_EVERY_STEP = "not every step drafted"
"""How the note of a stream figure left to the window begins (:func:`stream_checked`)."""
STEP_NOTES = (TOKENS_PER_STEP_NOTE, CUT_STEP_NOTE, TIMINGS_STEP_NOTE)
"""The notes of an accept length worked out from the stream's steps."""


def stream_checked(stream: StreamResult, window: MetricsWindow) -> StreamResult:
    """``stream`` without the speculative figures it worked out from its steps where the
    window's counters show steps that drafted nothing (n-gram drafting finding no match): its
    accept length is then its tokens a step, and its acceptance estimate takes every step as
    drafting ``k`` tokens; both read far below the server's own counts (docs/live.md). A rate
    the server gave for the request itself (llama.cpp's timings) stays."""
    per_step, drafted = window.tokens_per_step, window.accept_length
    if per_step is None or drafted is None or drafted - per_step < 0.005:
        return stream
    why = (
        f"{NOT_EVERY_STEP} ({per_step:.2f} tokens a step against an accept length of "
        f"{drafted:.2f} in the server's counters): the window's figure is the drafts'"
    )
    notes = dict(stream.notes)
    length, rate = stream.accept_length, stream.draft_acceptance_rate
    if length is not None and notes.get("accept_length") in STEP_NOTES:
        notes["accept_length"], length = why, None
    if rate is not None and notes.get("draft_acceptance_rate", "").endswith("the stream's steps"):
        notes["draft_acceptance_rate"], rate = why, None
    if notes == stream.notes:
        return stream
    return dataclasses.replace(
        stream, accept_length=length, draft_acceptance_rate=rate, notes=notes
    )


def health_window(w: MetricsWindow, stream: StreamResult | None) -> MetricsWindow:
    """The window the configuration rules read: without the probe's own request (``stream``).
    It ends at the probe's own token cap (finish reason ``length``), and counted it read as the
    server truncating its traffic: 100% of one request, on every probe of an idle vLLM."""
    reason = stream.finish_reason if stream is not None else None
    if not reason:
        return w

    def minus_ours(counts: Mapping[str, float]) -> Mapping[str, float]:
        if counts.get(reason, 0.0) < 1.0:
            return counts
        return {**counts, reason: counts[reason] - 1.0}

    return dataclasses.replace(
        w,
        finished_in_window=minus_ours(w.finished_in_window),
        finished_by_reason=minus_ours(w.finished_by_reason),
    )


def _window_dict(window: MetricsWindow | None) -> dict[str, Any] | None:
    if window is None:
        return None
    plain: dict[str, Any] = to_jsonable(window)
    return plain


def probe_to_dict(
    result: ProbeResult, verdict: dict[str, Any] | None = None, slo: Slo = DEFAULT_SLO
) -> dict[str, Any]:
    """The JSON document of a probe (``null`` values carry a reason nearby).

    Args:
        result: What the probe found.
        verdict: The live verdict of the probe's readings, as JSON
            (:func:`specwatch.session.verdict_report.probe_verdict_json`; the CLI gives it).
        slo: Goodput's objectives (``--slo-ttft`` / ``--slo-tpot``).
    """
    info = result.info
    server: dict[str, Any] | None = None
    if info is not None:  # as a benchmark snapshot keeps it, the address named "url"
        server = SnapshotServer.of(info, result.identity, missing="not read").to_json()
        server = {"url": server.pop("base_url"), **server}
    else:
        server = {
            "url": result.base_url,
            "dialect": None,
            "version": None,
            "model": None,
            "speculative": {"enabled": None},
            "error": result.error,
            "problem": result.problem,
        }
    why = result.error or ("passive probe: no request sent" if result.passive else "no stream ran")
    gpus, gpus_reason = probe_gpus.gpus_document(result.inventory, result.tick)
    return {
        "schema_version": SCHEMA_VERSION,
        "specwatch": __version__,
        "passive": result.passive,
        "ok": result.exit_code == EXIT_OK,
        "error": result.error or (result.stream.error if result.stream else None),
        "server": server,
        "stream": _stream_dict(result.stream, why),
        "metrics": _window_dict(result.window),
        "metrics_reason": (
            info.metrics_reason if info is not None and info.metrics_enabled is False else None
        ),
        "gpus": gpus,
        "gpus_reason": gpus_reason,
        "host": None if result.host is None else to_jsonable(result.host),
        "verdict": verdict,
        "health": (
            None
            if result.window is None
            else health_json(config_health(info, health_window(result.window, result.stream)))
        ),
        "goodput": (
            None
            if result.window is None
            else histogram_goodput(result.window.latency_cdf, slo).to_json()
        ),
    }


# --- text -------------------------------------------------------------------------------------


__all__ = [
    "DEFAULT_PROMPT",
    "EXIT_OK",
    "EXIT_STREAM_FAILED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "NOT_EVERY_STEP",
    "SCHEMA_VERSION",
    "ProbeResult",
    "health_window",
    "probe",
    "probe_to_dict",
    "stream_checked",
]
