"""The live monitor's command-line options and its entry point,
``specwatch [URL | -u URL | --demo]``.

``specwatch --help`` imports this module for its options: what the monitor needs to run is
imported by :func:`run_tui`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specwatch.commands.arguments import (
    add_api_key,
    add_slo_arguments,
    add_source_arguments,
    interval,
    positive,
    positive_int,
    say_error,
    shared_help,
    slo_of,
    source_options,
)
from specwatch.core.windows import WINDOWS

if TYPE_CHECKING:
    from specwatch.core.draft_sweep import Sweep
    from specwatch.record.recorder import Recorder
    from specwatch.session import LiveSession
    from specwatch.session.live import Stoppable
    from specwatch.session.verdict_state import Reference
    from specwatch.ui.settings import AppSettings


def add_tui_arguments(p: argparse.ArgumentParser) -> None:
    """Add the monitor's options to the top-level parser."""
    g = p.add_argument_group("live monitor (the default command)")
    g.add_argument(
        "-u",
        "--url",
        action="append",
        help="server address: localhost:8000, host:port, http://... or https://... (default: "
        "$SPECWATCH_URL, the config file's url, else http://localhost:8000; repeatable: more "
        "than one opens the fleet screen)",
    )
    add_api_key(g)
    g.add_argument(
        "--demo",
        action="store_true",
        help="watch a simulated server with 8 simulated GPUs (started in-process, over HTTP)",
    )
    g.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="SNAPSHOT.json",
        help="judge the live verdict against this benchmark snapshot (default: the first "
        "steady 30 s after warmup; the r key marks a new one)",
    )
    g.add_argument(
        "--screenshot-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the s key saves SVG screenshots (default: "
        "$XDG_DATA_HOME/specwatch/screenshots)",
    )
    add_source_arguments(g)
    g.add_argument(
        "--theme",
        default=None,
        help="dark, light, high-contrast, ansi-16, or a theme file's name from "
        "~/.config/specwatch/themes (default: the config file's theme, else the one last "
        "chosen with the t key, else dark)",
    )
    g.add_argument(
        "--gpu-interval",
        "-i",
        "--interval",
        dest="interval",
        type=interval,
        default=None,
        metavar="S",
        help=shared_help("--gpu-interval", 1),
    )
    g.add_argument(
        "--metrics-interval",
        type=interval,
        default=None,
        metavar="S",
        help=shared_help("--metrics-interval", 1),
    )
    g.add_argument(
        "--baseline-itl",
        type=positive,
        default=None,
        metavar="MS",
        help=shared_help("--baseline-itl"),
    )
    g.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="SNAPSHOT.json",
        help="a benchmark snapshot taken without speculation, as the verdict's baseline",
    )
    g.add_argument(
        "--sweep",
        nargs="+",
        type=Path,
        default=None,
        metavar="SNAP.json",
        help="benchmark snapshots at several draft lengths: the advisor view (a) shows them "
        "beside its prediction",
    )
    g.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help=shared_help("--record"),
    )
    g.add_argument(
        "--profile-steps",
        type=positive_int,
        default=20,
        metavar="N",
        help="decode steps the P key profiles (default: 20)",
    )
    add_slo_arguments(g)
    g.add_argument(
        "--window",
        choices=tuple(WINDOWS),
        default="5m",
        help="token-rate graph window (default: 5m; the w key cycles)",
    )


def _baseline(args: argparse.Namespace) -> tuple[float | None, str, str | None]:
    """(ms per token, where it came from, an error line).

    The demo without a baseline uses its simulator's own plain-decoding step time, so its
    verify pane gives a speculation verdict from the start ("plain: simulated").
    """
    from specwatch.session.baseline import load_baseline

    b = load_baseline(args.baseline_itl, getattr(args, "baseline", None))
    if b.ms is None and b.error is None and getattr(args, "demo", False):
        from specwatch.sim.presets import preset

        return preset(args.demo_dialect).plain_step_ms, "simulated", None
    return b.ms, b.source, b.error


def first_url(args: argparse.Namespace) -> str | None:
    """The server the TUI watches: the first URL given (``args.url`` is a list or a string)."""
    url = getattr(args, "url", None)
    if isinstance(url, str) or url is None:
        return url or None
    return str(url[0]) if url else None


def fill_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Defaults for what ``specwatch.commands.main.parse_args`` would have settled (for callers that
    parse with ``build_parser()`` alone: tests, embedders)."""
    if getattr(args, "theme", None) is None:
        args.theme = "dark"
    if getattr(args, "interval", None) is None:
        args.interval = 1.0
    if getattr(args, "metrics_interval", None) is None:
        args.metrics_interval = 1.0
    return args


class _StopBoth:
    """Stops the session's demo (if any), then the recorder (committing its last batch)."""

    def __init__(self, first: Stoppable | None, recorder: Recorder) -> None:
        self.first = first
        self.recorder = recorder

    def stop(self) -> None:
        """Stop both."""
        if self.first is not None:
            self.first.stop()
        self.recorder.stop()


def with_recorder(session: LiveSession, path: Path, interval_s: float | None = None) -> Recorder:
    """Record ``session`` into ``path`` until the session stops.

    Raises:
        ValueError, OSError, sqlite3.Error: The file cannot be a recording.
    """
    from specwatch.record.recorder import Recorder

    recorder = Recorder(path, session.endpoints, clock=session.clock, interval_s=interval_s)
    recorder.start()
    recorder.attach_to(session)
    session.demo = _StopBoth(session.demo, recorder)
    return recorder


def build_session(args: argparse.Namespace, reference: Reference | None = None) -> LiveSession:
    """The live session for ``args``: the demo (started here) or the given server, recorded
    into ``--record FILE`` when given; its live verdict judges against ``reference`` when
    given (``--reference FILE``), else the first steady window.

    Raises:
        ValueError: The address cannot be parsed, or the file cannot be recorded into (one
            line, without the key).
    """
    session = _build_session(fill_defaults(args))
    if reference is not None:
        session.use_reference(reference)
    record: Path | None = getattr(args, "record", None)
    if record is not None:
        try:
            with_recorder(session, record, args.interval)
        except Exception as e:  # a newer-format file, not a database, no permission
            session.stop()
            raise ValueError(f"cannot record into {record}: {e}") from None
    return session


def _build_session(args: argparse.Namespace) -> LiveSession:
    """The demo (started here) or the given server (:func:`specwatch.session.factory.live_session`).

    The GPUs are read from ``--dcgm`` exporters when given (local NVML is then not touched),
    not at all with ``--no-gpu``, else through NVML (the demo's: a fake NVML, or its simulated
    exporter with ``--demo-dcgm``).
    """
    import dataclasses

    from specwatch.session.factory import live_session

    options = source_options(args, args.interval, args.metrics_interval)
    if not options.demo:  # more than one server is the fleet screen's; this is the first's
        options = dataclasses.replace(options, urls=(first_url(args) or "",))
    return live_session(options)


def _session_after_first_frame(args: argparse.Namespace) -> bool:
    """Whether the monitor may build its session after the first frame: a plain server (read
    through NVML or not at all), whose only refusal, a bad address, is checked before."""
    return not (
        getattr(args, "demo", False)
        or getattr(args, "dcgm", None)
        or getattr(args, "record", None) is not None
    )


def _is_fleet(args: argparse.Namespace) -> bool:
    """``--prometheus``, or more than one ``--url``: the fleet screen."""
    url = getattr(args, "url", None)
    many = isinstance(url, list) and len(url) > 1
    return getattr(args, "prometheus", None) is not None or many


def build_settings(
    args: argparse.Namespace,
    baseline_ms: float | None = None,
    baseline_source: str = "",
    sweep: Sweep | None = None,
) -> AppSettings:
    """The app's settings from the command line."""
    from specwatch.ui.settings import AppSettings

    fill_defaults(args)
    return AppSettings(
        slo=slo_of(args),
        sweep=sweep,
        theme=args.theme,
        window=args.window,
        interval_s=args.interval,
        metrics_interval_s=args.metrics_interval,
        baseline_ms=baseline_ms,
        baseline_source=baseline_source,
        screenshot_dir=getattr(args, "screenshot_dir", None),
        profile_steps=getattr(args, "profile_steps", 20),
    )


def _run_fleet(args: argparse.Namespace) -> int:
    from specwatch.ui.fleet_run import run_fleet

    return run_fleet(args, build_settings(args))


def run_tui(args: argparse.Namespace) -> int:
    """Open the live monitor; returns the exit status.

    ``args`` is settled (:func:`specwatch.commands.main.parse_args`); without a server at
    all (called directly) it prints one line saying so and returns 2. More than one URL, or
    ``--prometheus``, opens the fleet screen.
    """
    url = first_url(args)
    demo_wanted: bool = bool(getattr(args, "demo", False))
    if _is_fleet(args) and not demo_wanted:
        return _run_fleet(args)
    return _run_monitor(args, url, demo_wanted)


def _run_monitor(args: argparse.Namespace, url: str | None, demo_wanted: bool) -> int:
    if not url and not demo_wanted:
        print(
            "specwatch: give a server with --url URL (e.g. --url localhost:8000), or try --demo",
            file=sys.stderr,
        )
        return 2
    if url and demo_wanted:
        print("specwatch: --url and --demo are exclusive: pick one", file=sys.stderr)
        return 2
    fill_defaults(args)
    baseline_ms, baseline_source, baseline_error = _baseline(args)
    if baseline_error:
        say_error("specwatch", baseline_error)
        return 2
    sweep = None
    if getattr(args, "sweep", None):
        from specwatch.commands.advise import load_sweep

        try:
            sweep = load_sweep([str(p) for p in args.sweep])
        except ValueError as e:
            say_error("specwatch", str(e))
            return 2

    from specwatch.ui.themes import load_themes

    themes = load_themes()
    if args.theme not in themes.themes:
        from textual.theme import BUILTIN_THEMES

        if getattr(args, "theme_source", "") == "state" and args.theme not in BUILTIN_THEMES:
            args.theme = "dark"  # the kept theme's file went away: no reason to refuse to start
        elif args.theme not in BUILTIN_THEMES:
            names = ", ".join(sorted(themes.themes))
            bad = [e for e in themes.errors if args.theme in e]
            if bad:  # the file is there but was refused: say why, not "no theme"
                say_error("specwatch", f"theme {args.theme!r} skipped: {bad[0]}")
            else:
                say_error("specwatch", f"no theme {args.theme!r}; have: {names}")
            return 2

    from specwatch.ui.app import SpecwatchApp
    from specwatch.ui.hangup import remove_sighup

    settings = build_settings(args, baseline_ms, baseline_source, sweep)
    app_themes = themes if settings.theme_dirs is None else None
    reference: Reference | None = None
    if args.reference is not None:
        from specwatch.bench.snapshot import SnapshotError, load_snapshot
        from specwatch.session.verdict_state import snapshot_reference

        try:
            snap = load_snapshot(args.reference)
        except SnapshotError as e:
            say_error("specwatch", f"--reference: {e}")
            return 2
        reference = snapshot_reference(snap, args.reference.name)
    if _session_after_first_frame(args):
        from specwatch.sources.http.endpoint import parse_endpoint

        try:
            parse_endpoint(url or "", args.api_key)  # a bad address is refused before the UI
        except ValueError as e:
            say_error("specwatch", e)
            return 2
        app = SpecwatchApp(
            settings,
            session_factory=lambda: build_session(args, reference),
            themes=app_themes,
        )
    else:
        try:
            session = build_session(args, reference)
        except ValueError as e:
            say_error("specwatch", e)
            return 2
        app = SpecwatchApp(settings, session, themes=app_themes)
    try:
        result = app.run()
    finally:
        if app.session is not None:
            app.session.stop()
        remove_sighup()
        left = app.benchmark_left()
        if left is not None:  # the terminal is back: say where the finished runs went
            from specwatch.bench.shield import print_lines

            print_lines(sys.stderr, [left])
    keep_chosen_theme(args.theme, app.theme)
    return result if isinstance(result, int) else 0


def keep_chosen_theme(started: str, ended: str) -> bool:
    """Keep the theme chosen during the session (the t key) for the next start.

    Returns:
        Whether a theme was kept (``False`` when none was chosen or it cannot be written).
    """
    if not ended or ended == started:
        return False
    from specwatch.commands.settings import keep_theme

    return keep_theme(ended)


__all__ = [
    "add_tui_arguments",
    "build_session",
    "build_settings",
    "fill_defaults",
    "first_url",
    "run_tui",
]
