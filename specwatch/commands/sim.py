"""``specwatch sim``: run the simulated server standalone until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from specwatch.commands.error_line import say_error
from specwatch.commands.sim_arguments import DCGM_DEFAULT_PORT
from specwatch.sim.dcgm_exporter import SimDcgmExporter
from specwatch.sim.hostile import HostileServer
from specwatch.sim.presets import preset
from specwatch.sim.server import SimServer
from specwatch.sim.world import SimWorld


def run_sim(args: argparse.Namespace) -> int:
    """Serve until interrupted; prints one line with the URL. Returns the exit status."""
    import os

    if args.hostile is not None:
        return _run_hostile(args.hostile, args.host, args.port, args.trickle)

    overrides: dict[str, object] = {
        "seed": args.seed,
        "load_time_s": args.load_time,
        "gpu_count": args.gpus,
        "background_concurrency": args.background,
        "metrics_enabled": not args.no_metrics,
    }
    if args.no_spec:
        overrides["spec_algorithm"] = None
    if args.model:
        overrides["model"] = args.model
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            print(
                f"specwatch sim: environment variable {args.api_key_env} is empty", file=sys.stderr
            )
            return 2
        overrides["api_key"] = key
    version = args.sim_version
    old = getattr(args, "sim_version_old", None)
    if old is not None:
        print("specwatch sim: --version is now --server-version", file=sys.stderr)
        version = version or old
    config = preset(args.dialect, version, **overrides)
    world = SimWorld(config)
    server = SimServer(world, host=args.host, port=args.port)
    try:
        url = server.start()
    except (OSError, RuntimeError) as exc:
        say_error("specwatch sim", f"cannot serve on {args.host}:{args.port}: {exc}")
        return 1
    exporter: SimDcgmExporter | None = None
    no_exporter = ""
    if not args.no_dcgm:
        exporter = SimDcgmExporter(
            world.gpus,
            world.clock.now,
            port=DCGM_DEFAULT_PORT if args.dcgm_port is None else args.dcgm_port,
            host=args.host,
            update_interval_s=args.dcgm_interval,
            hostname=_node_name(args.host),
        )
        try:
            exporter.start()
        except (OSError, RuntimeError, ValueError) as exc:
            exporter = None
            if args.dcgm_port is not None:
                server.stop()
                say_error("specwatch sim", f"cannot serve dcgm-exporter: {exc}")
                return 1
            # The default port is a convenience: the server alone is still worth watching.
            no_exporter = (
                f"specwatch sim: no dcgm-exporter for the GPUs ({args.host}:{DCGM_DEFAULT_PORT}"
                " is taken; --dcgm-port N serves one elsewhere)"
            )
    spec = config.spec_algorithm or "no speculation"
    print(
        f"specwatch sim: {config.dialect.value} {config.version} ({spec}, {config.gpu_count} GPUs)"
        f" serving {config.model} at {url}  (Ctrl-C to stop)",
        flush=True,
    )
    if exporter is not None:
        print(f"specwatch sim: dcgm-exporter for the GPUs at {exporter.url}", flush=True)
    elif no_exporter:  # after the URL line, which scripts read first
        print(no_exporter, flush=True)
    try:
        _serve_until_stopped()
    finally:
        if exporter is not None:
            exporter.stop()
        server.stop()
    return 0


def _node_name(host: str) -> str:
    """The exporter's ``Hostname``: the address it serves on, as each real node has its own."""
    if host in ("", "0.0.0.0", "::"):
        import socket

        return socket.gethostname()
    return host


def _run_hostile(case: str, host: str, port: int, trickle_s: float) -> int:
    server = HostileServer(case, trickle_s=trickle_s, port=port, host=host)
    try:
        url = server.start()
    except OSError as exc:
        say_error("specwatch sim", f"cannot serve on {host}:{port}: {exc}")
        return 1
    print(f"specwatch sim: hostile case {case} at {url}  (Ctrl-C to stop)", flush=True)
    try:
        _serve_until_stopped()
    finally:
        server.stop()
    return 0


def _serve_until_stopped() -> None:
    """Block until SIGINT or SIGTERM."""
    done = threading.Event()
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
