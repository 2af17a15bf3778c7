"""Record a live session into one SQLite file, and read, replay and export it.

Headless: imports core, sources, bench and session, never textual or rich.
"""

from __future__ import annotations

from specwatch.record.reader import Reader, RecordedEvent, RecordingError
from specwatch.record.recorder import Recorder
from specwatch.record.replay import ReplaySession

__all__ = ["Reader", "RecordedEvent", "Recorder", "RecordingError", "ReplaySession"]
