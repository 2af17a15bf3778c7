"""``specwatch bench``: its options and the benchmark.

It prints progress the way the story's script did, then a results block, writes a
snapshot and prints its path. Ctrl-C, SIGTERM or SIGHUP stops it and keeps the finished runs in
a snapshot marked interrupted (a second signal while saving is noted, never half-writes it);
a snapshot that cannot be written is reported in one line while the results are still
printed (exit status 1). Against a server on this machine, the code identity of its process
(commit, allow-listed environment, NCCL and torch versions) is read once before the runs and
recorded in the snapshot (``server.process``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from specwatch.commands.arguments import (
    add_dcgm_argument,
    add_fleet_arguments,
    add_server_arguments,
    add_slo_arguments,
    concurrencies,
    count,
    positive,
    positive_int,
    say_error,
    shared_help,
    slo_of,
)
from specwatch.core.outcomes import EXIT_ERROR, EXIT_USAGE

if TYPE_CHECKING:
    from specwatch.bench.runner import BenchEvent
    from specwatch.bench.shield import SignalLog
    from specwatch.commands.clocks import Locked
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.snapshot_records import BenchConfig, BenchResult
    from specwatch.sim.demo import StoryServer
    from specwatch.sources.gpu_reader import GpuReader
    from specwatch.sources.host import HostSampler
    from specwatch.sources.http.endpoint import Endpoint

EXIT_FAILED = EXIT_ERROR
DEFAULT_DIR = "specwatch-snapshots"
"""Where snapshots go without ``--out`` (``bench.snapshot.DEFAULT_DIR``, spelt out so that
``bench --help`` stays light; a test keeps the two equal)."""


# --- bench ----------------------------------------------------------------------------------


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch bench``."""
    add_server_arguments(p, fleet=False)
    p.add_argument("-n", "--runs", type=positive_int, default=5, help="measured runs (default: 5)")
    p.add_argument("--warmup", type=count, default=2, help="warmup requests first (default: 2)")
    p.add_argument(
        "--max-tokens", type=positive_int, default=2048, help=shared_help("--max-tokens", 2048)
    )
    p.add_argument(
        "--steady",
        action="store_true",
        help="after the warmups, keep warming up until the GPUs' SM clock, memory clock and"
        " temperature are steady (see --steady-window), at most --steady-limit seconds",
    )
    p.add_argument(
        "--steady-limit",
        type=positive,
        default=300.0,
        metavar="S",
        help="longest --steady wait before measuring anyway, seconds (default: 300)",
    )
    p.add_argument(
        "--steady-window",
        type=positive,
        default=10.0,
        metavar="S",
        help="window of the steady-state slopes, seconds (default: 10; thresholds per second: SM"
        " and memory clock 2 MHz, temperature 0.1 °C)",
    )
    p.add_argument(
        "--lock-clocks",
        metavar="base|max|MHZ|SM,MEM",
        default=None,
        help="root only: lock the GPU and memory clocks for the benchmark and restore them"
        " afterwards (for A/B tests of code, not capacity claims); MHZ sets the SM clock, the"
        " memory clock goes to its default",
    )
    p.add_argument("--label", default=None, help="a name for this benchmark (in the file name)")
    add_slo_arguments(p)
    p.add_argument(
        "-c",
        "--concurrency",
        type=concurrencies,
        default=[1],
        metavar="N[,N...]",
        help="parallel streams per run (default: 1); a list such as 1,4,16 runs one benchmark"
        " per value, each saved as its own snapshot (label suffix -cN)",
    )
    p.add_argument(
        "--prompts",
        metavar="FILE",
        default=None,
        help="prompts, one per line or a JSON list (default: a built-in varied set)",
    )
    p.add_argument("--seed", type=int, default=0, help="order of the built-in prompts (default: 0)")
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=None,
        help=shared_help("--out", f"./{DEFAULT_DIR}"),
    )
    p.add_argument("--json", action="store_true", help="print the snapshot on stdout")
    p.add_argument("--no-gpu", action="store_true", help=shared_help("--no-gpu"))
    p.add_argument(
        "--gpu-interval",
        type=positive,
        default=0.5,
        metavar="S",
        help=shared_help("--gpu-interval", 0.5),
    )
    p.add_argument(
        "--wait",
        type=positive,
        default=None,
        metavar="S",
        help=shared_help("--wait", "no wait"),
    )
    p.add_argument(
        "--timeout",
        type=positive,
        default=120.0,
        metavar="S",
        help=shared_help("--timeout", 120),
    )
    p.add_argument(
        "--deadline",
        type=positive,
        default=None,
        metavar="S",
        help=shared_help("--deadline", "60; a run's stream 60 + 0.25 per token"),
    )
    add_fleet_arguments(
        p.add_argument_group("GPUs from Prometheus (the benchmarked server's node, by host)")
    )
    demo = p.add_argument_group("demo (the story on the simulator, instead of --url)")
    demo.add_argument(
        "--demo",
        choices=("cold", "hot", "warming"),
        default=None,
        help="benchmark a simulated server whose 8 simulated GPUs are held cold or hot, or"
        " start cold and heat up under load (warming)",
    )
    demo.add_argument(
        "--demo-step-factor",
        type=positive,
        default=1.0,
        metavar="F",
        help="make the simulated verify step F times slower (imitates a code regression)",
    )
    add_dcgm_argument(p)


ACCEPT_AUTHORITY = (
    "  Accept length: the server's counters are authoritative (they count the drafted steps; "
    "the stream's tokens per chunk also count steps that drafted nothing, and miss steps the "
    "server merges into one chunk)"
)
ACCEPT_FROM_STREAM = (
    "  Accept length: from the stream's tokens per chunk (the server reported no counters; "
    "an upper bound when it merges steps into one chunk)"
)


def results_block(result: BenchResult) -> list[str]:
    """The lines printed after the runs (``specwatch.bench.report.results_lines``), with which
    accept-length figure is the authoritative one."""
    from specwatch.bench.report import results_lines

    lines = results_lines(result)
    if any(r.server_accept_length is not None for r in result.runs):
        note = ACCEPT_AUTHORITY
    elif result.overall.accept_length.mean is not None:
        note = ACCEPT_FROM_STREAM
    else:
        return lines
    at = max((i + 1 for i, x in enumerate(lines) if "accept length" in x), default=len(lines))
    return [*lines[:at], note, *lines[at:]]


async def _bench(
    args: argparse.Namespace,
    endpoint: Endpoint,
    config: BenchConfig,
    sampler: GpuReader | None,
    progress: TextIO,
    log: SignalLog,
    host: HostSampler | None = None,
) -> tuple[BenchResult | None, str | None, int | None]:
    """Connect, run; returns (result, secret, signal number that stopped it)."""
    import asyncio
    import signal
    import time

    from specwatch.bench.progress_line import ProgressLine
    from specwatch.bench.report import safe
    from specwatch.bench.runner import run_benchmark
    from specwatch.bench.shield import loop_signals, print_lines
    from specwatch.core.clocks import UNLOCKED_LINE, any_unlocked
    from specwatch.sources.detect import WaitStatus, detect, wait_ready
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.server_errors import ServerError

    secret = endpoint.api_key
    cancel = asyncio.Event()
    stopped_by: list[int] = []
    main_task = asyncio.current_task()
    connecting = True

    def on_signal(sig: int) -> None:
        # While connecting there is nothing to keep: stop at once (a hung server would
        # otherwise hold Ctrl-C for the whole --timeout). During the runs the first signal
        # already cancels the streams in flight; the task is never cancelled, so a second one
        # cannot lose the finished runs.
        if connecting and main_task is not None:
            main_task.cancel()
        stopped_by.append(sig)
        log(sig)  # the shield then keeps later stop signals from killing the way out
        cancel.set()

    live = ProgressLine(progress)
    run_now: list[tuple[str, float]] = []
    waited: list[str] = []

    def say(line: str) -> None:
        # A closed pipe (``| head``) or a vanished terminal must not cost the runs.
        live.clear()
        print_lines(progress, [safe(line)])

    def on_event(e: BenchEvent) -> None:
        if e.kind == "warmup_done":
            say(f"  {e.message}")
            if e.index == e.total:
                say("")
        elif e.kind == "steady_wait":
            live.show(f"  {e.message}", force=True)
        elif e.kind == "steady":
            # Said with the steady state, just before the runs: where it bears on them.
            inventory = (
                None if getattr(args, "clocks_locked", False) else sampler and sampler.inventory
            )
            if inventory and any_unlocked(inventory.gpus):
                say(f"  Clocks unlocked: {UNLOCKED_LINE}")
            say(f"  {e.message}")
            say("")
        elif e.kind == "run_start":
            run_now[:] = [(f"Run {e.index}/{e.total}", time.monotonic())]
            live.show(f"  Run {e.index}/{e.total}: waiting for the first token", force=True)
        elif e.kind in ("run_done", "error"):
            run_now.clear()
            say(f"  {e.message}")

    def on_tokens(tokens: int) -> None:
        if not run_now:
            return
        label, t0 = run_now[0]
        elapsed = time.monotonic() - t0
        rate = f", {tokens / elapsed:.1f} tok/s" if elapsed > 0 else ""
        live.show(f"  {label}: {tokens} tokens in {elapsed:.1f}s{rate}")

    def on_wait(w: WaitStatus) -> None:
        if w.state == "ready":
            live.clear()
            return
        text = safe(f"  waiting for the server (attempt {w.attempt}, {w.elapsed_s:.0f} s): ")
        if live.live:  # one line, updated in place
            live.show(text + safe(w.detail), force=True)
        elif not waited or waited[-1] != w.detail:  # off a terminal: only what changed
            waited.append(w.detail)
            say(text + w.detail)

    say(f"Benchmarking {endpoint}")
    say(
        f"  max_tokens={config.max_tokens}, num_runs={config.runs}, warmup={config.warmup}"
        + (f", concurrency={config.concurrency}" if config.concurrency > 1 else "")
    )
    say("")
    with loop_signals(on_signal, log):
        if log.first is not None:  # it came after the shield, before the loop took over
            return None, secret, log.first
        async with ServerClient(
            endpoint, timeout_s=args.timeout, deadline_s=getattr(args, "deadline", None)
        ) as client:
            try:
                if args.wait:
                    info = await wait_ready(client, on_wait, timeout_s=args.wait)
                else:
                    info = await detect(client)
                if info.keyless:  # its /metrics are open, its streams are not
                    raise _Failure(info.keyless)
                if info.routed:  # which of the router's models the runs measure
                    say(f"  {info.routed}")
                if sampler is not None and sampler.inventory is None:
                    inv = await asyncio.to_thread(sampler.open)
                    if not inv.available:
                        say(f"  (GPU readings off: {inv.reason})")
            except ServerError as exc:
                raise _Failure(str(exc)) from None
            except asyncio.CancelledError:
                return None, secret, stopped_by[0] if stopped_by else signal.SIGINT
            if cancel.is_set():
                return None, secret, stopped_by[0]
            connecting = False
            result = await run_benchmark(
                client, info, config, sampler, on_event, cancel, on_tokens=on_tokens, host=host
            )
            live.clear()
    return result, secret, stopped_by[0] if stopped_by else None


class _Failure(Exception):
    """A one-line reason the benchmark could not start."""


def run_bench(
    args: argparse.Namespace,
    *,
    sampler: GpuReader | None = None,
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run ``specwatch bench``; returns the exit status.

    Args:
        args: Parsed options.
        sampler: GPU sampler to use (tests pass one over a fake NVML); by default the
            ``--dcgm`` exporters when given, else the real NVML unless ``--no-gpu``.
        argv: The command line recorded in the snapshot (default ``sys.argv``).
        stdout: Where results (or ``--json``) go.
        stderr: Where errors go.
    """
    import dataclasses

    from specwatch.core.snapshot_records import BenchConfig

    # sys.stdout is None when the process started with its stdout closed (``>&-``)
    out = stdout or sys.stdout or open(os.devnull, "w")  # noqa: SIM115
    err = stderr or sys.stderr or open(os.devnull, "w")  # noqa: SIM115
    progress = err if args.json else out
    levels = args.concurrency if isinstance(args.concurrency, list) else [args.concurrency]
    if len(levels) > 1 and args.json:
        print("specwatch bench: --json prints one snapshot: give one concurrency", file=err)
        return EXIT_USAGE
    slo = slo_of(args)
    config = BenchConfig(
        runs=args.runs,
        warmup=args.warmup,
        max_tokens=args.max_tokens,
        concurrency=levels[0],
        label=args.label,
        prompts_file=args.prompts,
        seed=args.seed,
        gpu_interval_s=args.gpu_interval,
        steady=args.steady,
        steady_limit_s=args.steady_limit,
        steady_window_s=args.steady_window,
        slo_ttft_s=slo.ttft_s,
        slo_tpot_s=slo.tpot_s,
    )

    if isinstance(args.url, list):  # repeatable for a fleet; a benchmark takes one server
        args.url = args.url[-1] if args.url else None
    demo: StoryServer | None = None
    if args.demo is not None:
        if args.url:
            print("specwatch bench: give --url or --demo, not both", file=err)
            return EXIT_USAGE
        # Imported here: the simulator (aiohttp) is not needed to benchmark a real server.
        from specwatch.sim.demo import start_story_server

        demo = start_story_server(args.demo, args.demo_step_factor)
        args.url = demo.url
    elif not args.url:
        print("specwatch bench: --url is required (or --demo cold|hot)", file=err)
        return EXIT_USAGE
    try:
        status = 0
        for c in levels:
            label = f"{args.label}-c{c}" if args.label else f"c{c}"
            one = len(levels) == 1
            level = config if one else dataclasses.replace(config, concurrency=c, label=label)
            status = _run_bench(args, level, sampler, demo, argv, out, err, progress)
            if status != 0:  # a failure or an interruption ends the list there
                break
        return status
    finally:
        if demo is not None:
            demo.stop()


def _run_bench(
    args: argparse.Namespace,
    config: BenchConfig,
    sampler: GpuReader | None,
    demo: StoryServer | None,
    argv: Sequence[str] | None,
    out: TextIO,
    err: TextIO,
    progress: TextIO,
) -> int:
    import contextlib
    import dataclasses

    from specwatch.bench.prompts import PromptsError, load_prompts
    from specwatch.bench.shield import SignalLog, shield_signals
    from specwatch.commands.clocks import lock_for_bench, parse_lock_target
    from specwatch.sources.http.endpoint import parse_endpoint

    try:
        endpoint = parse_endpoint(args.url, args.api_key)
        # Read now so that a bad file is a usage error before connecting; the runner loads
        # the prompts again from the config, and records where they came from.
        load_prompts(args.prompts, args.seed)
        lock_target = parse_lock_target(args.lock_clocks)
    except (ValueError, PromptsError) as exc:
        say_error("specwatch bench", exc, err)
        return EXIT_USAGE
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        say_error("specwatch bench", f"--out must name a directory; {args.out} is a file", err)
        return EXIT_USAGE
    from specwatch.bench.snapshot import SnapshotError, check_writable

    try:  # before the first run, not after the last: nothing is measured for nowhere
        check_writable(args.out or DEFAULT_DIR)
    except SnapshotError as exc:
        say_error("specwatch bench", f"{exc}; nothing measured", err)
        return EXIT_USAGE
    from specwatch.sources.identity.process import identify_server

    identity = identify_server(endpoint.base_url)
    own_sampler = False
    fake = None
    if sampler is None:
        from specwatch.commands.arguments import source_options
        from specwatch.session.factory import gpu_source
        from specwatch.session.gpu_source import PrometheusGpuSource, ReaderGpuSource

        if demo is not None:
            from specwatch.sim.fake_nvml import FakeNvml

            fake = FakeNvml(demo.world.gpus, demo.world.clock.now)
        options = dataclasses.replace(
            source_options(args, args.gpu_interval, args.gpu_interval), demo=False
        )
        try:
            source = gpu_source(options, server_url=args.url, nvml=fake)
        except ValueError as e:
            say_error("specwatch bench", e, err)
            return EXIT_USAGE
        if isinstance(source, (ReaderGpuSource, PrometheusGpuSource)):
            sampler, own_sampler = source.sampler, True
    log = SignalLog()
    try:
        with shield_signals(log), contextlib.ExitStack() as lock:
            locked = lock_for_bench(lock, lock_target, demo, fake, progress, err)
            if locked is None:
                return EXIT_USAGE
            args.clocks_locked = bool(locked)
            return _measure_and_save(
                args, endpoint, config, sampler, argv, out, err, progress, log, identity, locked
            )
    finally:
        if own_sampler and sampler is not None:
            sampler.stop()


def _measure_and_save(
    args: argparse.Namespace,
    endpoint: Endpoint,
    config: BenchConfig,
    sampler: GpuReader | None,
    argv: Sequence[str] | None,
    out: TextIO,
    err: TextIO,
    progress: TextIO,
    log: SignalLog,
    identity: ServerIdentity,
    locked: Locked | None = None,
) -> int:
    import asyncio
    import signal

    from specwatch.bench.prompts import PromptsError
    from specwatch.bench.report import code_lines
    from specwatch.bench.shield import print_lines, signal_name
    from specwatch.bench.snapshot import SnapshotError, build_snapshot, dumps, write_snapshot
    from specwatch.commands.clocks import with_locks
    from specwatch.sources.host import sampler_for

    try:
        result, secret, stopped_by = asyncio.run(
            _bench(args, endpoint, config, sampler, progress, log, sampler_for(identity))
        )
    except (_Failure, PromptsError) as exc:
        # PromptsError: the prompts file changed after it was checked above.
        say_error("specwatch bench", exc, err)
        return EXIT_FAILED
    stopped_by = stopped_by or log.first
    if result is None or (result.interrupted and not result.runs):
        # Nothing measured yet: an empty snapshot would only clutter the directory.
        print_lines(err, ["specwatch bench: interrupted before the first run; nothing saved"])
        return 128 + (stopped_by or signal.SIGINT)
    from specwatch.sources.identity.process import with_server_build

    identity = with_server_build(identity, result.server)  # llama-server's build id
    result = with_locks(result, locked or {})
    snap = build_snapshot(
        result,
        list(argv if argv is not None else sys.argv),
        secrets=[secret or ""],
        identity=identity,
    )
    # Written before anything is printed: after SIGHUP the terminal may be gone.
    status = 0
    try:
        saved = f"  Snapshot: {write_snapshot(snap, args.out or DEFAULT_DIR)}"
    except SnapshotError as exc:
        saved = f"specwatch bench: {exc}"
        status = EXIT_FAILED
    print_lines(progress, [*results_block(result), *code_lines(identity)])
    print_lines(err if status else progress, [saved])
    if args.json:
        print_lines(out, [dumps(snap).decode().rstrip("\n")])
    stopped_by = stopped_by or log.first
    if stopped_by is not None and stopped_by != signal.SIGINT:
        kept = f"{len(result.runs)} of {config.runs} runs"
        where = "saved" if not status else "NOT saved"
        print_lines(err, [f"specwatch bench: stopped by {signal_name(stopped_by)}; {kept} {where}"])
    if result.interrupted or stopped_by is not None:
        return 128 + (stopped_by or signal.SIGINT)
    if result.error is not None or not result.runs:
        return EXIT_FAILED
    return status


__all__ = [
    "DEFAULT_DIR",
    "EXIT_FAILED",
    "add_bench_arguments",
    "results_block",
    "run_bench",
]
