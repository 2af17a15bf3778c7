"""Asking a server's own profiler for a few steps, from outside, and waiting for its files.

SGLang mounts ``POST /start_profile`` always and stops by itself after ``num_steps``; vLLM
mounts ``/start_profile`` and ``/stop_profile`` only when started with ``--profiler-config`` and
keeps its session open until ``/stop_profile`` (a second start is refused meanwhile), so
:func:`run_profile` sends the stop on every way out, ^C and signals included. llama.cpp and
plain OpenAI servers have no profiler endpoint. The traces land on the server's disk: only a
server on this host can be profiled and read.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import Dialect
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.server_errors import ServerError

DEFAULT_STEPS = 20
VLLM_FLAG = (
    '--profiler-config \'{"profiler":"torch","torch_profiler_dir":"/abs/dir",'
    '"torch_profiler_with_stack":false}\''
)
"""The flag a vLLM server needs for ``/start_profile`` (stacks off: they make traces huge)."""
START_DEADLINE_S = 30.0
"""An armed profiler answers at once; SGLang's answer waits for the scheduler's next turn."""
SETTLE_S = 2.0
"""Seconds a trace file's size must hold still before it counts as written."""
POLL_S = 0.25
MAX_FILES = 512
"""Trace files taken of one profile (a TP x DP x PP world of 512 ranks)."""
MAX_NAME = 200

PHASES = ("asking", "armed", "capturing", "writing", "reading", "done")


class ProfileRefused(Exception):
    """The server cannot be profiled as asked; ``str()`` is one line saying why and what to do."""


@dataclass(frozen=True, slots=True)
class TraceFile:
    """One trace file the server wrote."""

    path: Path
    size: int


@dataclass(frozen=True, slots=True)
class Phase:
    """Where a profile stands, as :func:`run_profile` reports it."""

    name: str
    """One of :data:`PHASES`."""
    words: str
    files: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    """How one engine is asked."""

    engine: Dialect
    trace_dir: Path
    """Where the server writes (on this host)."""
    prefix: str
    start_body: Mapping[str, Any]
    stops: bool
    """Whether ``/stop_profile`` must be sent (vLLM)."""
    steps: int


@dataclass(frozen=True, slots=True)
class ProfileRun:
    """What a finished trigger produced."""

    plan: ProfilePlan
    files: tuple[TraceFile, ...]
    started_at: float
    """Unix time the profiler was armed."""
    seconds: float
    """From the start request to the last file written."""
    stopped: bool = False
    """``/stop_profile`` was answered (vLLM)."""
    notes: tuple[str, ...] = field(default=())


def _option(cmdline: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(cmdline):
        if arg == name and i + 1 < len(cmdline):
            return cmdline[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def vllm_profiler_dir(cmdline: Sequence[str], environment: Mapping[str, str]) -> str | None:
    """The directory a vLLM server writes torch traces to: ``--profiler-config``'s
    ``torch_profiler_dir`` (``profiler_config`` in a JSON string or dotted options), else the
    older ``VLLM_TORCH_PROFILER_DIR``; ``None`` when the server was started without one."""
    raw = _option(cmdline, "--profiler-config")
    if raw is not None:
        try:
            config = orjson.loads(raw)
        except orjson.JSONDecodeError:
            config = None
        if isinstance(config, Mapping):
            value = config.get("torch_profiler_dir")
            if isinstance(value, str) and value:
                return value
    dotted = _option(cmdline, "--profiler-config.torch_profiler_dir")
    if dotted:
        return dotted
    old = environment.get("VLLM_TORCH_PROFILER_DIR")
    return old or None


def sglang_body(steps: int, out_dir: Path, prefix: str) -> dict[str, Any]:
    """SGLang's ``/start_profile`` body: decode steps only, no stacks and no shapes (over HTTP
    both default to true, which makes traces huge)."""
    return {
        "output_dir": str(out_dir),
        "num_steps": steps,
        "activities": ["CPU", "GPU"],
        "with_stack": False,
        "record_shapes": False,
        "profile_by_stage": True,
        "profile_stages": ["decode"],
        "profile_prefix": prefix,
    }


def plan_profile(
    engine: Dialect,
    *,
    steps: int,
    out_dir: Path,
    prefix: str,
    cmdline: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
    local: bool = True,
    pid_known: bool = True,
    trace_dir: Path | None = None,
) -> ProfilePlan:
    """How to ask ``engine`` for ``steps`` profiled steps.

    Raises:
        ProfileRefused: The engine has no profiler endpoint, or the server is not on this host
            (its traces would land on its own disk).
    """
    if engine in (Dialect.LLAMACPP, Dialect.OPENAI):
        name = "llama.cpp" if engine is Dialect.LLAMACPP else "this OpenAI-compatible server"
        raise ProfileRefused(
            f"{name} has no profiler endpoint: profile SGLang or vLLM servers"
            " (or run the server under nsys yourself)"
        )
    if not local:
        raise ProfileRefused(
            "the server is not on this host: its profiler writes the traces to its own disk;"
            " run specwatch profile on the server's machine"
        )
    if engine is Dialect.SGLANG:
        return ProfilePlan(
            engine, out_dir, prefix, sglang_body(steps, out_dir, prefix), stops=False, steps=steps
        )
    read = vllm_profiler_dir(cmdline, environment or {})
    where = str(trace_dir) if trace_dir is not None else read
    if where is None and cmdline:
        raise ProfileRefused(f"vLLM was started without a profiler: restart it with {VLLM_FLAG}")
    if where is None:
        why = "its process is not visible" if not pid_known else "its command line is unread"
        raise ProfileRefused(
            f"cannot tell where vLLM writes its traces ({why}): its --profiler-config names"
            " the directory; give it with --trace-dir, or run specwatch profile as the server's"
            " user on its host"
        )
    body = {"profile_prefix": prefix, "max_iterations": steps}
    return ProfilePlan(engine, Path(where), prefix, body, stops=True, steps=steps)


def _short(text: str) -> str:
    return sanitize_line(text, 160)


async def _post(
    client: ServerClient, path: str, body: Mapping[str, Any] | None, deadline_s: float
) -> httpx.Response:
    request = client.http.build_request(
        "POST",
        path,
        content=orjson.dumps(body if body is not None else {}),
        headers={"Content-Type": "application/json"},
    )
    return await client.answer(request, path, limit=64 * 1024, deadline_s=deadline_s)


async def start_profile(client: ServerClient, plan: ProfilePlan) -> None:
    """Arm the server's profiler.

    Raises:
        ProfileRefused: 404 (vLLM without ``--profiler-config``), a session already running,
            a key refused, or any other error status: one line each.
        ServerError: The server cannot be reached or does not answer in time.
    """
    response = await _post(client, "/start_profile", plan.start_body, START_DEADLINE_S)
    status = response.status_code
    if status < 400:
        return
    body = _short(response.text)
    if status == 404 and plan.engine is Dialect.VLLM:
        raise ProfileRefused(f"vLLM has no /start_profile (HTTP 404): restart it with {VLLM_FLAG}")
    if status == 409 or "already" in body.lower():
        raise ProfileRefused(
            f"the server is already profiling (HTTP {status}: {body}); wait for it to end"
            + (" or POST /stop_profile" if plan.stops else "")
        )
    if status in (401, 403):
        raise ProfileRefused(
            f"the server refused the key for /start_profile (HTTP {status}): give its admin key"
            " with --api-key"
        )
    raise ProfileRefused(f"/start_profile answered HTTP {status}: {body or 'no body'}")


async def stop_profile(client: ServerClient) -> bool:
    """Send vLLM's ``/stop_profile``; ``True`` when it was answered with success."""
    try:
        response = await _post(client, "/stop_profile", None, START_DEADLINE_S)
    except ServerError:
        return False
    return response.status_code < 400


_VLLM_RANK = re.compile(r"rank\d+\.\d+\.pt\.trace\.json(\.gz)?$")


def trace_files(plan: ProfilePlan, since: float) -> list[TraceFile]:
    """The trace files of this profile in the plan's directory: named with its prefix,
    modified after ``since`` (Unix time), one per rank (vLLM's front-end trace left out)."""
    try:
        entries = list(os.scandir(plan.trace_dir))
    except OSError:
        return []
    found: list[TraceFile] = []
    for entry in entries[: MAX_FILES * 8]:
        name = entry.name
        if len(name) > MAX_NAME or not name.startswith(plan.prefix):
            continue
        if plan.engine is Dialect.VLLM:
            if "async_llm" in name or not _VLLM_RANK.search(name):
                continue
        elif not (name.endswith(".trace.json.gz") or name.endswith(".trace.json")):
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if st.st_mtime + 1.0 < since:
            continue
        found.append(TraceFile(Path(entry.path), st.st_size))
        if len(found) >= MAX_FILES:
            break
    return sorted(found, key=lambda f: f.path.name)


async def wait_for_files(
    plan: ProfilePlan,
    since: float,
    *,
    deadline_s: float,
    settle_s: float = SETTLE_S,
    report: Callable[[Phase], None] | None = None,
) -> list[TraceFile]:
    """Poll the plan's directory until its trace files exist and have stopped growing for
    ``settle_s``; ``[]`` when none appeared before ``deadline_s``.

    Raises:
        ProfileRefused: Files appeared but were still growing at the deadline.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    last: list[TraceFile] = []
    still_since = loop.time()
    while True:
        files = trace_files(plan, since)
        now = loop.time()
        if files != last:
            last, still_since = files, now
            if report is not None and files:
                total = sum(f.size for f in files)
                report(Phase("writing", _writing_words(files), len(files), total))
        elif files and now - still_since >= settle_s:
            return files
        if now >= end:
            if files:
                total = sum(f.size for f in files)
                raise ProfileRefused(
                    f"the server was still writing {len(files)} trace files ({total / 1e6:.1f} MB)"
                    f" in {plan.trace_dir} after {deadline_s:.0f} s: give --wait-files longer"
                )
            return []
        await asyncio.sleep(POLL_S)


def _writing_words(files: Sequence[TraceFile]) -> str:
    total = sum(f.size for f in files)
    return f"waiting for the server to write: {len(files)} files, {total / 1e6:.1f} MB so far"


async def run_profile(
    client: ServerClient,
    plan: ProfilePlan,
    *,
    capture_s: float = 120.0,
    files_deadline_s: float = 300.0,
    report: Callable[[Phase], None] | None = None,
) -> ProfileRun:
    """Arm the profiler, wait for its steps and its files, and always stop a vLLM session.

    ``capture_s`` bounds the wait for the profiled steps (a server with no load runs none);
    ``files_deadline_s`` the wait for the files to be written once the steps are done.

    Raises:
        ProfileRefused: As :func:`start_profile`, no files written, or files still growing.
        ServerError: The server cannot be reached.
    """

    def say(name: str, words: str) -> None:
        if report is not None:
            report(Phase(name, words))

    say("asking", f"asking {plan.engine.value} to profile {plan.steps} steps")
    since = time.time()
    t0 = time.monotonic()
    await start_profile(client, plan)
    say("armed", f"profiler armed; capturing {plan.steps} steps into {plan.trace_dir}")
    stopped = False
    notes: list[str] = []
    try:
        say("capturing", f"capturing {plan.steps} steps (the server must be serving requests)")
        files = await wait_for_files(plan, since, deadline_s=capture_s, report=report)
        if plan.stops:
            stopped = await _stop_shielded(client)
            if not files:
                files = await wait_for_files(
                    plan, since, deadline_s=files_deadline_s, report=report
                )
    finally:
        if plan.stops and not stopped:
            stopped = await _stop_shielded(client)
    if not files:
        raise ProfileRefused(
            f"no trace file appeared in {plan.trace_dir} within {capture_s:.0f} s of arming"
            f" the profiler: the server runs steps only while it serves requests"
            f" (send load, or give --capture longer)"
        )
    if plan.stops and not stopped:
        notes.append("/stop_profile was not answered: the server's profiling session may be open")
    return ProfileRun(
        plan, tuple(files), since, time.monotonic() - t0, stopped=stopped, notes=tuple(notes)
    )


async def _stop_shielded(client: ServerClient) -> bool:
    """``/stop_profile`` that a cancellation (^C) does not cut short."""
    task = asyncio.ensure_future(stop_profile(client))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise
