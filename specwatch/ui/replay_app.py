"""``specwatch replay FILE``: the live monitor fed from a recording, with time controls.

The app is the live :class:`~specwatch.ui.app.SpecwatchApp` unchanged; only its session is a
:class:`~specwatch.record.replay.ReplaySession`, and this module adds the replay keys, the
status-line field and the jump-to-time input. Every string from the recording reaches the screen
through the panes, which sanitise it, or through :func:`specwatch.core.sanitize.sanitize_line`.
"""

from __future__ import annotations

import argparse
import sys
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from specwatch.core.sanitize import sanitize_line
from specwatch.record.replay import ReplaySession
from specwatch.record.timespec import parse_time
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.model import MonitorModel
from specwatch.ui.settings import AppSettings

LABEL_EVERY_S = 0.25
"""How often the status line's replay time is refreshed."""


class JumpModal(ModalScreen[str | None]):
    """A one-line input for the time to jump to."""

    DEFAULT_CSS = """
    JumpModal { align: center middle; }
    JumpModal > Vertical {
        width: 74;
        max-width: 100%;
        height: auto;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    JumpModal Label { width: 100%; }
    JumpModal Input { width: 100%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        """A prompt and the input in a box fitted to them."""
        with Vertical() as box:
            box.border_title = "jump to (esc cancels)"
            yield Label("ISO 8601, local zone unless given; or -10m before the end")
            yield Input(placeholder="2026-12-01T14:03:00 or -10m", id="when")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Close with the text typed."""
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Close without jumping."""
        self.dismiss(None)


class ReplayApp(SpecwatchApp):
    """The monitor on a recording: space pauses, arrows step, brackets seek, +/- change speed."""

    # The footer shows one entry per pair of keys (``←→ Step``); the live-only keys are off.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "replay_pause", "Play/pause"),
        Binding("left", "replay_step(-1)", "Step", key_display="←→"),
        Binding("right", "replay_step(1)", "Step", show=False),
        Binding("left_square_bracket", "replay_seek(-60)", "±1m", key_display="[]"),
        Binding("right_square_bracket", "replay_seek(60)", "+1m", show=False),
        Binding("left_curly_bracket", "replay_seek(-600)", "-10m", show=False),
        Binding("right_curly_bracket", "replay_seek(600)", "+10m", show=False),
        Binding("plus", "replay_speed(1)", "Speed", key_display="+-"),
        Binding("equals_sign", "replay_speed(1)", "Faster", show=False),
        Binding("minus", "replay_speed(-1)", "Slower", show=False),
        Binding("g", "replay_jump", "Jump"),
    ]
    LIVE_ONLY = frozenset({"benchmark", "profile", "cycle_interval", "toggle_pause", "resume"})
    """Actions of the live monitor that mean nothing on a recording: a benchmark or a profile
    needs the server, the sampling interval was the recording's, and space already pauses."""

    def __init__(self, settings: AppSettings, replay: ReplaySession) -> None:
        super().__init__(settings, replay)
        self.replay = replay
        replay.on_rewind(lambda: self.in_order(self._rewound))
        self.model.replay_label = sanitize_line(replay.label(), 80)

    def on_mount(self) -> None:
        """Start playing and keep the status line's replay time current."""
        super().on_mount()
        self.set_interval(LABEL_EVERY_S, self._refresh_label)
        stopped = self.replay.reader.stopped
        if stopped:
            self.notify(sanitize_line(stopped, 200), title="recording damaged", timeout=10)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The live-only keys are neither offered nor taken."""
        if action in self.LIVE_ONLY:
            return False
        return super().check_action(action, parameters)

    def _refresh_label(self) -> None:
        label = sanitize_line(self.replay.label(), 80)
        if label != self.model.replay_label:
            self.model.replay_label = label
            self.model.status_version += 1

    def _rewound(self) -> None:
        """The replay went back in time: start the panes from nothing; the history before the
        new time is on its way."""
        reset_model(self.model)
        for pane in self._panes:
            pane.force_sync()

    def action_replay_pause(self) -> None:
        """Pause or resume the replay clock."""
        self.replay.toggle_pause()
        self._refresh_label()

    def action_replay_step(self, direction: int) -> None:
        """One step back or forward (pauses)."""
        self.replay.step(direction)
        self._refresh_label()

    def action_replay_seek(self, seconds: float) -> None:
        """Seek by ``seconds``."""
        self.replay.seek_by(seconds)
        self._refresh_label()

    def action_replay_speed(self, direction: int) -> None:
        """Next speed up or down (×1..×60)."""
        if direction > 0:
            self.replay.faster()
        else:
            self.replay.slower()
        self._refresh_label()

    def action_replay_jump(self) -> None:
        """Ask for a time and jump there."""

        def jump(text: str | None) -> None:
            if not text:
                return
            replay = self.replay
            try:
                wall = parse_time(text, replay.reader.wall(replay.last_t))
            except ValueError as e:
                self.notify(sanitize_line(str(e), 160), severity="warning")
                return
            replay.jump_to_wall(wall)
            self._refresh_label()

        self.push_screen(JumpModal(), jump)


def reset_model(model: MonitorModel) -> None:
    """Empty ``model``'s histories and readings, keeping settings; every version moves on."""
    fresh = MonitorModel(model.baseline_ms, model.baseline_source)
    keep = (
        "paused",
        "show_overhead",
        "interval_s",
        "metrics_interval_s",
        "monitor_cpu_pct",
        "replay_label",
        "gpu_opening",
    )
    kept = {name: getattr(model, name) for name in keep}
    versions = {k: v + 1 for k, v in vars(model).items() if k.endswith("_version")}
    vars(model).update(vars(fresh))
    vars(model).update(kept)
    vars(model).update(versions)


def run_replay(args: argparse.Namespace) -> int:
    """Open ``args.file`` in the monitor; returns the exit status."""
    from specwatch.record.reader import Reader, RecordingError
    from specwatch.ui.hangup import remove_sighup

    try:
        reader = Reader(args.file)
    except RecordingError as e:
        print(f"specwatch replay: {e}", file=sys.stderr)
        return 2
    with reader:
        replay = ReplaySession(reader, speed=min(max(args.speed, 1.0), 60.0))
        if not replay.index:
            print(f"specwatch replay: {sanitize_line(str(args.file))}: no events", file=sys.stderr)
            return 1
        interval = reader.meta.get("interval_s", "1")
        try:
            interval_s = float(interval)
        except ValueError:
            interval_s = 1.0
        settings = AppSettings(
            theme=args.theme,
            interval_s=interval_s,
            metrics_interval_s=interval_s,  # a coarse recording's windows are not late reads
            live_cpu=False,
            show_overhead=False,
        )
        app = ReplayApp(settings, replay)
        try:
            result = app.run()
        finally:
            replay.stop()
            remove_sighup()
        if reader.stopped:
            print(f"specwatch replay: {reader.stopped}", file=sys.stderr)
    return result if isinstance(result, int) else 0


__all__ = ["JumpModal", "ReplayApp", "reset_model", "run_replay"]
