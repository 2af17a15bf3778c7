"""Record a live session into one SQLite file, and read, replay and export it.

Headless: imports core, sources, bench and session, never textual or rich.
"""

from __future__ import annotations

from specwatch.record.reader import RecordedEvent, Reader, RecordingError
from specwatch.record.recorder import Recorder
from specwatch.record.replay import ReplaySession

__all__ = ["RecordedEvent", "Reader", "Recorder", "RecordingError", "ReplaySession"]
