"""The ``specwatch profile`` subcommand: trigger the server's own profiler for a few decode steps,
wait for its traces, read them, say where the verify step's time goes and keep a profile JSON."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from specwatch.commands.arguments import add_server_arguments, positive, positive_int, say_error

if TYPE_CHECKING:
    from specwatch.sources.profile.trigger import Phase, ProfileRun

PROFILE_SCHEMA = 1
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
PREFIX = "specwatch"


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch profile``."""
    add_server_arguments(p, fleet=False)
    p.add_argument(
        "--steps", type=positive_int, default=20, help="decode steps to profile (default 20)"
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=None,
        help="where the profile JSON (and SGLang's traces) go (default ./specwatch-snapshots)",
    )
    p.add_argument("--json", action="store_true", help="print the profile JSON on stdout")
    p.add_argument(
        "--capture",
        type=positive,
        default=120.0,
        metavar="S",
        help="seconds to wait for the profiled steps; a server with no load runs none "
        "(default 120)",
    )
    p.add_argument(
        "--wait-files",
        type=positive,
        default=300.0,
        metavar="S",
        help="seconds to wait for the server to finish writing its traces (default 300)",
    )
    p.add_argument("--label", default=None, help="a label for the profile file's name")
    p.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where a vLLM server writes its traces (its torch_profiler_dir), when its command"
        " line cannot be read here",
    )


def run_profile_command(args: argparse.Namespace) -> int:
    """Run one profile; print the summary (or JSON) on stdout.

    Returns:
        0 when a profile was read, 1 when the server cannot be profiled (one line says why),
        2 for bad arguments, 3 when the server cannot be reached.
    """
    import asyncio

    from specwatch.sources.http.endpoint import parse_endpoint

    urls = args.url if isinstance(args.url, list) else [args.url]
    try:
        endpoint = parse_endpoint(urls[-1], getattr(args, "api_key", None))
    except ValueError as exc:
        say_error("specwatch profile", exc)
        return EXIT_USAGE
    out_dir = (args.out or Path("specwatch-snapshots")).absolute()
    runner = asyncio.Runner()
    try:
        return runner.run(_main(endpoint, args, out_dir, sys.stdout, sys.stderr))
    except KeyboardInterrupt:
        say_error("specwatch profile", "interrupted; the server's profiling session was stopped")
        return 130
    finally:
        runner.close()


async def _main(
    endpoint: Any, args: argparse.Namespace, out_dir: Path, out: TextIO, err: TextIO
) -> int:
    import asyncio

    from specwatch.sources.detect import detect
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.server_errors import ServerError
    from specwatch.sources.identity.process import NOTE_REMOTE, identify_server
    from specwatch.sources.profile.trigger import ProfileRefused, plan_profile, run_profile

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    caught: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):

        def cancel(sig: signal.Signals = sig) -> None:
            caught.append(sig.name)
            if task is not None:
                task.cancel()

        loop.add_signal_handler(sig, cancel)

    def report(phase: Phase) -> None:
        print(f"specwatch profile: {phase.words}", file=err, flush=True)

    try:
        async with ServerClient(endpoint, timeout_s=10.0) as client:
            try:
                info = await detect(client)
            except ServerError as exc:
                say_error("specwatch profile", exc, err)
                return EXIT_UNREACHABLE
            identity = await asyncio.to_thread(identify_server, endpoint.base_url)
            local = NOTE_REMOTE not in identity.notes
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            try:
                plan = plan_profile(
                    info.dialect,
                    steps=args.steps,
                    out_dir=out_dir / f"traces-{stamp}",
                    prefix=f"{PREFIX}-{stamp}",
                    cmdline=identity.cmdline,
                    environment=identity.env(),
                    local=local,
                    pid_known=identity.pid is not None,
                    trace_dir=args.trace_dir,
                )
                if plan.start_body.get("output_dir"):
                    plan.trace_dir.mkdir(parents=True, exist_ok=True)
                run = await run_profile(
                    client,
                    plan,
                    capture_s=args.capture,
                    files_deadline_s=args.wait_files,
                    report=report,
                )
            except ProfileRefused as exc:
                say_error("specwatch profile", exc, err)
                return EXIT_REFUSED
            except ServerError as exc:
                say_error("specwatch profile", exc, err)
                return EXIT_UNREACHABLE
            except OSError as exc:
                say_error("specwatch profile", f"cannot make {out_dir}: {exc.strerror}", err)
                return EXIT_REFUSED
    except asyncio.CancelledError:
        if caught:
            say_error(
                "specwatch profile",
                f"{caught[0]}: stopped; the server's profiling session was stopped",
                err,
            )
            return 128 + int(getattr(signal, caught[0]).value)
        raise
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    return _report(run, info, args, out_dir, out, err)


def _report(
    run: ProfileRun, info: Any, args: argparse.Namespace, out_dir: Path, out: TextIO, err: TextIO
) -> int:
    import orjson

    from specwatch.bench.snapshot import SnapshotError, write_snapshot
    from specwatch.core.profile import profile_to_json, verdict
    from specwatch.sources.profile.trace import TraceError, read_profile

    total = sum(f.size for f in run.files)
    print(
        f"specwatch profile: reading {len(run.files)} trace files ({total / 1e6:.1f} MB)",
        file=err,
        flush=True,
    )
    t0 = time.monotonic()
    try:
        summary = read_profile([f.path for f in run.files], engine=info.dialect.value)
    except TraceError as exc:
        say_error("specwatch profile", exc, err)
        return EXIT_REFUSED
    seconds = time.monotonic() - t0
    settings = _settings(info)
    words = verdict(summary, settings)
    doc: dict[str, Any] = {
        "kind": "profile",
        "schema": PROFILE_SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run.started_at)),
        "label": f"{args.label}-profile" if args.label else "profile",
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
        **profile_to_json(summary),
        "verdict": words,
    }
    try:
        path = write_snapshot(doc, out_dir)
    except SnapshotError as exc:
        say_error("specwatch profile", f"{exc}; the summary is printed below", err)
        path = None
    if args.json:
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        from specwatch.core.profile import summary_lines

        for line in summary_lines(summary):
            print(line, file=out)
        print(words, file=out)
    if path is not None:
        print(f"specwatch profile: saved {path}", file=err)
    return EXIT_OK


def _settings(info: Any) -> dict[str, str]:
    """The engine's CUDA-graph settings as it exposes them (SGLang's ``/server_info``)."""
    names = (
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
    args = info.launch_args or {}
    from specwatch.core.sanitize import sanitize_line

    return {n: sanitize_line(str(args[n]), 120) for n in names if args.get(n) is not None}
