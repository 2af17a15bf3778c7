"""Between the fleet screen and a server's screen: ``specwatch --prometheus URL`` and
``specwatch --url A --url B``.

One event loop runs the fleet session the whole time and the apps one after the other: the
fleet app until Enter chooses a server, then the single-server app
(:class:`~specwatch.ui.app.SpecwatchApp` with a back key) for that server and its node's GPUs,
then the fleet again. The fleet keeps refreshing meanwhile, so it comes back current.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit

from textual.app import App
from textual.binding import Binding, BindingType

from specwatch.bench.shield import print_lines
from specwatch.core.fleet import target_of
from specwatch.core.sanitize import sanitize_line
from specwatch.session.factory import SourceOptions, gpu_source, session_for
from specwatch.session.fleet import FleetSession, FleetSource
from specwatch.session.fleet_probe import FleetOptions, build_fleet_source, server_endpoint
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.fleet_app import FleetApp, FleetChoice
from specwatch.ui.settings import AppSettings

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow
    from specwatch.session import LiveSession
    from specwatch.session.gpu_source import GpuSource

BACK = -1
"""What the single-server app returns when Escape asks for the fleet again."""
FLEET_INTERVAL_S = 2.0

RunApp = Callable[[App[object]], Awaitable[object]]


class DrillApp(SpecwatchApp):
    """The single-server screen opened from the fleet: Escape goes back to the fleet."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "to_fleet", "Fleet")]

    def action_to_fleet(self) -> None:
        """Return to the fleet screen."""
        self.leaving = "on going back to the fleet"
        self.exit(BACK)


async def server_url(choice: FleetChoice, options: FleetOptions) -> str:
    """Where to reach the chosen server directly.

    A ``--url`` given for it (its scheme and path kept); else the address Prometheus scrapes
    it at (``scrapeUrl`` of its target, which may differ from the ``instance`` label); else
    its ``instance``.
    """
    for url in options.urls:
        if target_of(url) == target_of(choice.instance):
            return url
    if options.prometheus is not None:
        from specwatch.sources.prometheus.api import PrometheusClient, prometheus_endpoint

        try:
            async with PrometheusClient(
                prometheus_endpoint(options.prometheus), deadline_s=options.timeout_s
            ) as client:
                targets = await client.targets()
        except Exception:  # a query front end without /api/v1/targets: the instance it is
            targets = []
        for t in targets:
            if t.labels.get("instance") == choice.instance and t.scrape_url:
                parts = urlsplit(t.scrape_url)
                return f"{parts.scheme}://{parts.netloc}"
    return choice.instance


def drill_gpus(
    choice: FleetChoice, options: FleetOptions, source: SourceOptions
) -> GpuSource | None:
    """The node's GPUs: from Prometheus (exactly the joined ones), or from their exporters
    (``source.dcgm``, those of the chosen server's node)."""
    if options.prometheus is not None:
        from specwatch.session.gpu_source import PrometheusGpuSource
        from specwatch.sources.prometheus.api import prometheus_endpoint
        from specwatch.sources.prometheus.gpus import PrometheusGpuSampler, gpus_with_keys

        sampler = PrometheusGpuSampler(
            prometheus_endpoint(options.prometheus),
            gpus_with_keys(choice.gpus),
            options.gpu_match,
            source.interval_s,
        )
        return PrometheusGpuSource(sampler)
    return gpu_source(source) if source.dcgm else None


async def drill_session(
    choice: FleetChoice, options: FleetOptions, settings: AppSettings
) -> LiveSession:
    """The live session of the chosen server and its node's GPUs."""
    endpoint = server_endpoint(await server_url(choice, options), options)
    source = SourceOptions(
        dcgm=tuple(u for u in options.dcgm if target_of(u) in choice.exporters),
        interval_s=settings.interval_s,
        metrics_interval_s=settings.metrics_interval_s,
    )
    live = session_for([endpoint], drill_gpus(choice, options, source), source)
    now = live.clock()
    live.seed_verdict([dataclasses.replace(w, t=now + w.t) for w in choice.history])
    return live


async def _run_async(app: App[object]) -> object:
    return await app.run_async()


async def _run_screen(run_app: RunApp, app: FleetApp | DrillApp) -> object:
    """Run one screen; then its SIGTERM/SIGHUP handlers go, so none acts for a screen gone."""
    try:
        return await run_app(app)  # type: ignore[arg-type]
    finally:
        if app.terminal_watch is not None:
            app.terminal_watch.stop()


async def run_fleet_async(
    options: FleetOptions,
    settings: AppSettings,
    run_app: RunApp = _run_async,
    interval_s: float = FLEET_INTERVAL_S,
    built: tuple[FleetSource, Callable[[], Awaitable[None]]] | None = None,
) -> int:
    """Alternate between the fleet app and the chosen server's app until one quits.

    Args:
        options: Where the fleet comes from.
        settings: The single-server app's settings (the theme is shared).
        run_app: Runs one app to its end and returns its result (tests drive it with Pilot).
        interval_s: Seconds between fleet refreshes.
        built: The fleet source and its closer, when built already.
    """
    source, close = built if built is not None else build_fleet_source(options)
    # The fleet screen draws no graphs: no history to fill.
    fleet = FleetSession(source, interval_s=interval_s, history_s=0.0, close=close)
    where = options.prometheus or "direct"
    selected: str | None = None
    history: dict[str, deque[MetricsWindow]] = {}
    fleet.start()
    try:
        while True:
            app = FleetApp(fleet, where, settings.theme, selected=selected, history=history)
            chosen = await _run_screen(run_app, app)
            if not isinstance(chosen, FleetChoice):
                return chosen if isinstance(chosen, int) else 0
            selected = chosen.instance
            live = await drill_session(chosen, options, settings)
            drill = DrillApp(settings, live)
            try:
                result = await _run_screen(run_app, drill)
            finally:
                await asyncio.to_thread(live.stop)
                left = await asyncio.to_thread(drill.benchmark_left)
                if left is not None:  # between screens, the terminal is ours to print on
                    print_lines(sys.stderr, [left])
            if result != BACK:
                return result if isinstance(result, int) else 0
    finally:
        await fleet.aclose()


def run_fleet(args: argparse.Namespace, settings: AppSettings) -> int:
    """The fleet TUI for parsed arguments; returns the exit status."""
    from specwatch.session.fleet_probe import fleet_options

    options = fleet_options(args)
    try:  # bad addresses and matchers are said before the terminal is taken
        built = build_fleet_source(options)
    except ValueError as e:
        print(f"specwatch: {sanitize_line(str(e), 400)}", file=sys.stderr)
        return 2
    return asyncio.run(run_fleet_async(options, settings, built=built))


__all__ = [
    "BACK",
    "DrillApp",
    "drill_gpus",
    "drill_session",
    "run_fleet",
    "run_fleet_async",
    "server_url",
]
