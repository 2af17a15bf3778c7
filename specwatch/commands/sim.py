"""``specwatch sim``: its options, and the simulated server run standalone until Ctrl-C.

The simulated server (aiohttp) is imported by :func:`run_sim`, not for ``specwatch sim --help``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING

from specwatch.commands.arguments import DIALECTS, say_error

if TYPE_CHECKING:
    from specwatch.sim.dcgm_exporter import SimDcgmExporter

DEFAULT_VERSIONS: dict[str, str] = {
    "sglang": "0.5.23",
    "vllm": "0.33.0",
    "llamacpp": "b6500-0c1e570",
    "trtllm": "1.3.0",
    "openai": "1.0.0",
}
"""The version each simulated server imitates when none is given: ``sim.servers``'s, spelt out
(a test keeps the two equal)."""


class _VersionOrOld(argparse.Action):
    """``--version`` alone prints specwatch's version; ``--version V`` is ``--server-version``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            from specwatch import __version__

            print(f"specwatch {__version__}")
            parser.exit()
        setattr(namespace, self.dest, values)


DEFAULT_BACKGROUND = 3
"""Simulated users by default: a simulator is watchable as started (the demo's number)."""
DCGM_DEFAULT_PORT = 9400
"""dcgm-exporter's own default port (``sources.dcgm.parse.DEFAULT_PORT``, spelt out so that
``--help`` stays light)."""


def add_sim_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch sim``."""
    p.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="sglang",
        help="which server to imitate (default: sglang)",
    )
    p.add_argument(
        "--server-version",
        dest="sim_version",
        default=None,
        metavar="VERSION",
        help="server version to imitate (default: "
        + ", ".join(f"{d} {v}" for d, v in DEFAULT_VERSIONS.items())
        + ")",
    )
    # The old spelling, hidden; alone, ``--version`` is specwatch's own version, as everywhere.
    p.add_argument(
        "--version",
        dest="sim_version_old",
        nargs="?",
        action=_VersionOrOld,
        default=None,
        help=argparse.SUPPRESS,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 = any free)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument(
        "--load-time",
        type=float,
        default=0.0,
        help="seconds of model loading before it answers (default: 0)",
    )
    p.add_argument("--gpus", type=int, default=8, help="simulated GPUs (default: 8)")
    p.add_argument(
        "--background",
        type=int,
        default=DEFAULT_BACKGROUND,
        help=f"simulated concurrent users generating traffic (default: {DEFAULT_BACKGROUND};"
        " 0 = an idle server)",
    )
    p.add_argument("--model", default=None, help="served model name")
    p.add_argument("--no-spec", action="store_true", help="no speculative decoding")
    p.add_argument(
        "--verify-eager",
        action="store_true",
        help="the verify path cannot use CUDA graphs: profiled verify steps run eager (the seed's"
        " 29 ms against 12 ms); see specwatch profile",
    )
    p.add_argument(
        "--profiler-config",
        default=None,
        metavar="JSON",
        help="vLLM: mount /start_profile and /stop_profile, writing traces to its"
        " torch_profiler_dir, as vLLM's own flag does",
    )
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (trace files; 1)")
    p.add_argument(
        "--no-metrics",
        action="store_true",
        help="start without metrics (SGLang --enable-metrics, llama.cpp --metrics off)",
    )
    p.add_argument(
        "--dcgm-port",
        type=int,
        default=None,
        metavar="N",
        help="serve a dcgm-exporter /metrics for the simulated GPUs on this port (default:"
        f" {DCGM_DEFAULT_PORT}, dcgm-exporter's own, where a monitor without NVML looks;"
        " 0 = any)",
    )
    p.add_argument(
        "--no-dcgm",
        action="store_true",
        help="serve no dcgm-exporter for the simulated GPUs",
    )
    p.add_argument(
        "--dcgm-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="the simulated exporter's collection interval, seconds (default: 1; real: 30)",
    )
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="require the API key held in this environment variable",
    )


def run_sim(args: argparse.Namespace) -> int:
    """Serve until interrupted; prints one line with the URL. Returns the exit status."""
    import os

    from specwatch.sim.dcgm_exporter import SimDcgmExporter
    from specwatch.sim.presets import preset
    from specwatch.sim.server import SimServer
    from specwatch.sim.world import SimWorld

    overrides: dict[str, object] = {
        "seed": args.seed,
        "load_time_s": args.load_time,
        "gpu_count": args.gpus,
        "background_concurrency": args.background,
        "metrics_enabled": not args.no_metrics,
    }
    if args.no_spec:
        overrides["spec_algorithm"] = None
    if args.verify_eager:
        overrides["verify_eager"] = True
    if args.tp > 1:
        overrides["tp_size"] = args.tp
    if args.profiler_config is not None:
        from specwatch.sources.profile.trigger import vllm_profiler_dir

        where = vllm_profiler_dir(["--profiler-config", args.profiler_config], {})
        if where is None:
            print(
                "specwatch sim: --profiler-config needs a torch_profiler_dir, e.g."
                ' \'{"profiler":"torch","torch_profiler_dir":"/abs/dir"}\'',
                file=sys.stderr,
            )
            return 2
        overrides["profiler_dir"] = where
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
        serve_until_stopped()
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


def serve_until_stopped() -> None:
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


__all__ = [
    "DCGM_DEFAULT_PORT",
    "DEFAULT_BACKGROUND",
    "DEFAULT_VERSIONS",
    "add_sim_arguments",
    "run_sim",
    "serve_until_stopped",
]
